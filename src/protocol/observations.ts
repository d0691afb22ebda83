/**
 * What the server answers about an episode, declared once as zod schemas: the observation of each
 * kind of step (a union), the state, the failure and every enum they use. Types are inferred from
 * here; `GET /schema` and `/openapi.json` are generated from here.
 */
import { z } from 'zod';
import { ToolSpecSchema } from './bundle.js';
import { HarnessProgressSchema } from './harness.js';

export const PhaseSchema = z.enum(['waiting', 'deploying', 'running', 'done']);
export type Phase = z.infer<typeof PhaseSchema>;

export const EndReasonSchema = z.enum(['finished', 'turns_ended', 'max_steps', 'env_failed', 'closed']);
export type EndReason = z.infer<typeof EndReasonSchema>;

export const TransportSchema = z.enum(['ws', 'http', 'mcp', 'e2b']);
export type Transport = z.infer<typeof TransportSchema>;

export const FailureReasonSchema = z.enum([
  'deploy_timeout',
  'image_unavailable',
  'image_not_built',
  'env_crashed',
  'env_oom',
  'env_unreachable',
  'tool_timeout',
  'episode_timeout',
  'invalid_scores',
  'engine_error',
  'shutting_down',
  'unschedulable',
  'node_lost',
  // the model gateway (src/gateway/): an episode's model access ended
  'model_calls_exhausted',
  'model_tokens_exhausted',
  'model_time_exhausted',
  'model_upstream_error',
  'model_upstream_timeout',
  'verifier_timeout',
  // a verifier could not run its tests (its bootstrap needed the network, or a tool the image lacks): no reward
  'verifier_failed',
  // a verified task's turn could not be prepared in the env's container
  'setup_failed',
  // the env's lock-down (docs/security.md): it wrote past its storage_mb
  'storage_exceeded',
  // its processes held every slot of its pids limit (a fork bomb), so no new shell could start
  'env_pids_exhausted',
  // an in-place verifier found the toolchain it runs changed by the agent: the reward is refused
  'toolchain_tampered',
  // a process of the env's own killed its process 1 (gVisor lets one): the model's doing
  'env_killed_by_agent',
  // the shell ran earlier in the episode and cannot start any more: the agent's commands broke it
  'shell_broken',
]);
export type FailureReason = z.infer<typeof FailureReasonSchema>;

export const FailurePhaseSchema = z.enum(['queue', 'deploy', 'reset', 'tool', 'finish', 'teardown', 'model']);
export type FailurePhase = z.infer<typeof FailurePhaseSchema>;

/** OpenEnv's ToolErrorType: what went wrong around a tool call (never the tool's own is_error). */
export const ToolErrorTypeSchema = z.enum(['invalid_args', 'tool_not_found', 'execution_error', 'timeout', 'transport_error']);
export type ToolErrorType = z.infer<typeof ToolErrorTypeSchema>;

export const FailureSchema = z.object({
  reason: FailureReasonSchema,
  phase: FailurePhaseSchema,
  retryable: z.boolean(),
  message: z.string(),
  episode_id: z.string(),
  task_id: z.string(),
  exit_code: z.number().int().nullable().optional(),
  log_tail: z.string().optional(),
});
export type Failure = z.infer<typeof FailureSchema>;

export const TimingsSchema = z.object({
  queued_s: z.number(),
  deploy_s: z.number(),
  running_s: z.number(),
  /** only on a server with a warm pool (--warm-pool above 0): the env was taken from it */
  pooled: z.boolean().optional(),
  /** with pooled: true, how long the env waited in the pool, ready, before this episode took it */
  pool_wait_s: z.number().optional(),
  /** only when the reset waited for its env's image (built in the background): that wait, a part of queued_s */
  image_wait_s: z.number().optional(),
});
export type Timings = z.infer<typeof TimingsSchema>;

/** an env's (or a verifier's) named scores: name → a finite number; the reward comes from them */
export const ScoresSchema = z.record(z.number());
export type Scores = z.infer<typeof ScoresSchema>;

/**
 * What an ended episode's env cost (src/episodes/episode-cost.ts reads it once, just before the
 * env is removed): each figure null when the sandbox cannot tell it (docs/protocol.md, "What an
 * episode cost").
 */
export const EpisodeCostSchema = z
  .object({
    cpu_s: z.number().nonnegative().nullable().describe("CPU seconds the env's processes used, over the env's whole life"),
    peak_memory_bytes: z.number().int().nonnegative().nullable().describe("the most memory the env's container held at once (its cgroup's peak)"),
    bytes_written: z
      .number()
      .int()
      .nonnegative()
      .nullable()
      .describe("bytes the env wrote to the host's disk: at least its container's writable layer at the end"),
    wall_s: z
      .number()
      .nonnegative()
      .nullable()
      .describe("seconds the env was deployed for the episode: from its deploy's start (or its hand-out from the warm pool) to its removal"),
  })
  .describe("what the episode's env cost; null figures: the sandbox cannot tell");
export type EpisodeCost = z.infer<typeof EpisodeCostSchema>;

/** The `metadata` of an ending observation (OpenEnv's Observation.metadata). */
export const EndingMetadataSchema = z.object({ cost: EpisodeCostSchema.nullable().describe('null: no env was deployed for the episode') });
export type EndingMetadata = z.infer<typeof EndingMetadataSchema>;

const MessageSchema = z.object({ role: z.enum(['system', 'user']), content: z.string() });

/** The reply to a reset: the task's prompt and tools. */
export const ResetObservationSchema = z.object({
  episode_id: z.string(),
  task_id: z.string(),
  split: z.string(),
  index: z.number().int(),
  seed: z.number().int().nullable(),
  toolset: z.string(),
  messages: z.array(MessageSchema),
  tools: z.array(ToolSpecSchema),
  turn: z.number().int(),
  turns: z.number().int(),
  max_turns: z.number().int(),
  timings: TimingsSchema,
  /** a harness episode (src/protocol/harness.ts): the server runs the task's harness; the client waits (tool `wait`) */
  harness: z.boolean().optional(),
});
export type ResetObservation = z.infer<typeof ResetObservationSchema>;

/** The reply to list_tools. */
export const ToolsObservationSchema = z.object({ tools: z.array(ToolSpecSchema) });
export type ToolsObservation = z.infer<typeof ToolsObservationSchema>;

/** A tool's answer as the model reads it (OpenEnv's CallToolObservation.result). */
export const ToolResultSchema = z.object({
  content: z.array(z.object({ type: z.literal('text'), text: z.string() })),
  structured_content: z.record(z.unknown()).nullable(),
  data: z.unknown(),
  is_error: z.boolean(),
});
export type ToolResult = z.infer<typeof ToolResultSchema>;

export const ToolErrorSchema = z.object({ error_type: ToolErrorTypeSchema, message: z.string() });
export type ToolError = z.infer<typeof ToolErrorSchema>;

/** Fields of the reply that ends an episode: how it ended, and scores or a failure. */
export const EndingSchema = z.object({
  done: z.literal(true),
  reward: z.number().nullable(),
  end_reason: EndReasonSchema,
  timings: TimingsSchema,
  scores: ScoresSchema.optional(),
  failure: FailureSchema.optional(),
  /** what the episode cost: on the reply that tells the client the episode ended */
  metadata: EndingMetadataSchema.optional(),
  /** a harness episode's: what its harness did, and how its last run ended */
  harness: HarnessProgressSchema.optional(),
});
export type Ending = z.infer<typeof EndingSchema>;

/** The reply to call_tool (end_turn included); the last one carries the ending fields too. */
export const CallObservationSchema = z
  .object({
    tool_name: z.string(),
    result: ToolResultSchema.nullable(),
    error: ToolErrorSchema.nullable(),
    /** the turn an end_turn moved to */
    turn: z.number().int().optional(),
  })
  .merge(EndingSchema.partial());
export type CallObservation = z.infer<typeof CallObservationSchema>;

/** An episode that ended between steps (episode timeout), told by the next step that names no tool. */
export const EndedObservationSchema = EndingSchema;

export const ObservationSchema = z
  .union([ResetObservationSchema, ToolsObservationSchema, CallObservationSchema, EndedObservationSchema])
  .describe(
    'data.observation of an observation frame: a reset reply, a list_tools reply or a call_tool reply; an ending reply adds end_reason, timings and scores or failure',
  );
export type Observation = z.infer<typeof ObservationSchema>;

/** `data` of an observation frame, and the body of an /episodes step reply. */
export const StepOutcomeSchema = z.object({ observation: ObservationSchema, reward: z.number().nullable(), done: z.boolean() });
export interface StepOutcome<O extends Observation = Observation> {
  observation: O;
  reward: number | null;
  done: boolean;
}

export const EpisodeStateSchema = z.object({
  episode_id: z.string().nullable(),
  task_id: z.string().nullable(),
  step_count: z.number().int(),
  turn: z.number().int(),
  done: z.boolean(),
  phase: z.enum([...PhaseSchema.options, 'idle']),
});
export type EpisodeState = z.infer<typeof EpisodeStateSchema>;

/** The state of a /ws session that has no episode. */
export const IDLE_STATE: EpisodeState = { episode_id: null, task_id: null, step_count: 0, turn: 0, done: false, phase: 'idle' };
