/**
 * What clients send, as zod schemas (reset data, actions, /ws frames), and the frames the server
 * answers on /ws (docs/protocol.md). The parsers every transport uses are src/sessions/client-input.ts.
 */
import { z } from 'zod';
import { RpcResponseSchema } from './jsonrpc.js';
import { EpisodeStateSchema, FailureSchema, StepOutcomeSchema } from './observations.js';
import { LaneSchema } from './lanes.js';
import { BudgetsSchema, UpstreamSchema } from './model.js';

/** Reset data: known fields are checked, unknown ones ignored (OpenEnv clients pass any kwargs). */
export const ResetDataSchema = z
  .object({
    task_id: z.string().min(1).max(255).optional(),
    split: z.string().min(1).optional(),
    index: z.number().int().min(0).optional(),
    seed: z.number().int().min(0).optional(),
    episode_id: z.string().max(255).optional().describe('a client label, logged'),
    reset_timeout_s: z.number().positive().finite().optional().describe('wait at most this long for a slot (capped by the server)'),
    priority: LaneSchema.optional().describe("the lane to wait in for a slot: high, normal or low (default: the split's, --split-priority, else normal)"),
    model: UpstreamSchema.optional().describe(
      "this episode's model upstream, which the env's model calls go to through the gateway (a server started with --model-from-reset); default: the server's --model-url",
    ),
    model_budgets: BudgetsSchema.optional().describe(
      "this episode's model budgets (calls, tokens, wall_time_s), each at most the server's (--model-calls, --model-tokens, --model-time)",
    ),
  })
  .passthrough()
  .describe('reset data: a task by task_id, or split + index; neither: the default split, by seed or at random. Unknown fields are ignored.');
export type ResetData = z.infer<typeof ResetDataSchema>;

/** `arguments` is any JSON here: a non-object is the model's error, answered in the observation. */
export const ActionSchema = z
  .discriminatedUnion('type', [
    z.object({ type: z.literal('list_tools') }).passthrough(),
    z
      .object({
        type: z.literal('call_tool'),
        tool_name: z.string().min(1, 'tool_name must be a non-empty string'),
        arguments: z.unknown().optional().describe("the tool's parameters, a JSON object; anything else is answered with error_type invalid_args"),
      })
      .passthrough(),
  ])
  .describe('a step: list_tools, or call_tool (end_turn included)');
export type Action = z.infer<typeof ActionSchema>;

export type ClientFrame =
  { type: 'reset'; data: ResetData } | { type: 'step'; data: Action } | { type: 'state' } | { type: 'close' } | { type: 'mcp'; data: unknown };

/** The frame types a client sends, and whether each carries `data`. */
export const CLIENT_FRAME_DATA: Record<ClientFrame['type'], 'required' | 'optional' | 'none'> = {
  reset: 'optional',
  step: 'required',
  state: 'none',
  close: 'none',
  mcp: 'required',
};

/** OpenEnv's error codes of an error frame. */
export const WsErrorCodeSchema = z.enum(['INVALID_JSON', 'UNKNOWN_TYPE', 'VALIDATION_ERROR', 'EXECUTION_ERROR', 'CAPACITY_REACHED', 'SESSION_ERROR']);
export type WsErrorCode = z.infer<typeof WsErrorCodeSchema>;

/** `data` of an error frame: the code, a message a person can act on, and details by kind. */
export const ErrorFrameDataSchema = z
  .object({
    code: WsErrorCodeSchema,
    message: z.string(),
    reason: z.string().optional().describe("why, in a word: the failure's reason, no_episode, episode_done, shutting_down, owned_by_ws_session"),
    failure: FailureSchema.optional().describe('a deploy that failed: the failure, as an ended episode reports it'),
  })
  .passthrough();
export type ErrorFrameData = z.infer<typeof ErrorFrameDataSchema>;

/** Frames the server sends on /ws: exactly one per client frame. A client reads them with this schema. */
export const ServerFrameSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('observation'), data: StepOutcomeSchema }),
  z.object({ type: z.literal('state'), data: EpisodeStateSchema }),
  z.object({ type: z.literal('error'), data: ErrorFrameDataSchema }),
  z.object({ type: z.literal('mcp'), data: RpcResponseSchema }),
]);
export type ServerFrame = z.infer<typeof ServerFrameSchema>;
