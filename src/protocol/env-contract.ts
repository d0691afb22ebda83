/**
 * The env contract (docs/bundle-format.md): what the server sends an env and reads back. The
 * requests are the server's own; the replies are read leniently (fields the server does not use
 * are ignored).
 */
import { z } from 'zod';

/** POST /reset: the task's private data and the reset's seed. */
export const EnvResetRequestSchema = z.object({ task_id: z.string(), data: z.record(z.unknown()), seed: z.number().int().nullable() });
export type EnvResetRequest = z.infer<typeof EnvResetRequestSchema>;

/** POST /tools/call: a tool of the task's toolset and its arguments, always a JSON object. */
export const EnvToolCallRequestSchema = z.object({ name: z.string(), arguments: z.record(z.unknown()) });
export type EnvToolCallRequest = z.infer<typeof EnvToolCallRequestSchema>;

/** POST /tools/call's 200 reply: every field optional. */
export const ToolCallReplySchema = z
  .object({
    result: z.unknown().optional(),
    text: z.string().optional(),
    is_error: z.boolean().optional(),
    done: z.boolean().optional(),
    scores: z.record(z.unknown()).optional(),
  })
  .passthrough();
export type ToolCallReply = z.infer<typeof ToolCallReplySchema>;

/** POST /finish's 200 reply (its body is `{}`). */
export const FinishReplySchema = z.object({ scores: z.record(z.unknown()) }).passthrough();
