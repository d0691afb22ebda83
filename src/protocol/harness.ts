/**
 * Harness episodes on the wire (docs/gateway.md, "harness episodes"): a task that names a harness
 * is run by the server, not stepped by the client. Its reset answers at once (`harness: true`,
 * one tool: `wait`); the client calls `wait` (an ordinary call_tool step, so /ws, /episodes and
 * MCP's tools/call carry it unchanged) until the episode is done, and ends it early with the
 * ordinary close. Each `wait` answers when the episode ends (the ending's fields, `harness`
 * among them) or after its `timeout_s` with the harness's progress so far.
 */
import { z } from 'zod';
import { HARNESS } from '../defaults.js';
import type { ToolSpec } from './bundle.js';

export const WAIT_TOOL_NAME = 'wait';

/** The one tool of a harness episode. */
export const WAIT_TOOL: ToolSpec = Object.freeze({
  name: WAIT_TOOL_NAME,
  description:
    "Waits for the harness the server runs in the env: answers when the episode has ended (its reward and how it ended) or after timeout_s with the harness's progress.",
  input_schema: Object.freeze({
    type: 'object',
    properties: Object.freeze({
      timeout_s: Object.freeze({
        type: 'number',
        exclusiveMinimum: 0,
        maximum: HARNESS.waitMaxS,
        description: `the longest to wait before answering with the progress (default ${HARNESS.waitDefaultS}, at most ${HARNESS.waitMaxS})`,
      }),
    }),
    additionalProperties: false,
  }) as Record<string, unknown>,
});

export const WaitArgsSchema = z
  .object({ timeout_s: z.number().positive().max(HARNESS.waitMaxS).finite().optional() })
  .strict('unknown field; wait takes timeout_s only');

/** How a harness run ended: its process exited, or its time budget passed (it was killed). */
export const HarnessExitSchema = z.enum(['exited', 'time_budget']);
export type HarnessExit = z.infer<typeof HarnessExitSchema>;

/** What a harness episode has done so far: a `wait` reply's `result.data`, and (with `ended`) the ending's `harness`. */
export const HarnessProgressSchema = z.object({
  /** the turn the harness runs (or last ran), 1-based */
  turn: z.number().int(),
  /** the harness is running now (false: it has not started, is being scored, or the episode ended) */
  running: z.boolean(),
  /** seconds since the episode's harness first started */
  elapsed_s: z.number(),
  /** model calls through the gateway so far, and their tokens (0 without a gateway) */
  model_calls: z.number().int(),
  model_tokens: z.number().int(),
  /** how its last run ended, once one did: the exit, its exit code (null: killed, or the engine could not say) */
  ended: HarnessExitSchema.nullable(),
  exit_code: z.number().int().nullable(),
  /** the last run's output (stdout and stderr together), its head and tail kept; "" while it runs */
  output_tail: z.string(),
});
export type HarnessProgress = z.infer<typeof HarnessProgressSchema>;
