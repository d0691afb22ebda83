/**
 * What the web console's routes answer, declared once as zod schemas: an episode in a line, its
 * transcript, the per-minute series and the overview. history.ts and recorder.ts take their types
 * from here; /openapi.json documents them from here.
 */
import { z } from 'zod';
import { EndReasonSchema, FailureSchema, PhaseSchema, ScoresSchema, TimingsSchema, TransportSchema } from './observations.js';

const at = z.string().datetime();

/**
 * What a transcript holds in place of a payload past its bound (src/episodes/transcript.ts): the
 * model got the whole of it; the console, the download and --record get this.
 */
export const TruncationMarkSchema = z
  .object({
    truncated: z.literal(true),
    /** the payload's JSON size in bytes; null when it had no JSON (too large to write out) */
    original_bytes: z.number().int().nullable(),
    /** the first characters of its JSON ('' once the transcript is full) */
    head: z.string(),
  })
  .describe('a payload the server did not keep whole: its size and the start of its JSON');
export type TruncationMark = z.infer<typeof TruncationMarkSchema>;

export const ResetEventSchema = z.object({
  kind: z.literal('reset'),
  at,
  /** the prompt the model got */
  messages: z.unknown(),
  /** the tools it was offered, by name */
  tools: z.array(z.string()),
  turns: z.unknown(),
  max_turns: z.unknown(),
});
export const ToolCallEventSchema = z.object({
  kind: z.literal('tool_call'),
  at,
  /** the step's number (tool calls only) */
  step: z.number().int(),
  /** the turn it was made in */
  turn: z.number().int(),
  tool_name: z.string(),
  arguments: z.unknown(),
  result: z.unknown(),
  error: z.unknown(),
  ms: z.number(),
});
export const ListToolsEventSchema = z.object({ kind: z.literal('list_tools'), at, ms: z.number() });
export const EndEventSchema = z.object({
  kind: z.literal('end'),
  at,
  end_reason: EndReasonSchema.nullable(),
  reward: z.number().nullable(),
  scores: ScoresSchema.nullable(),
  failure: FailureSchema.nullable(),
  timings: TimingsSchema,
});
export const TranscriptEventSchema = z
  .discriminatedUnion('kind', [ResetEventSchema, ToolCallEventSchema, ListToolsEventSchema, EndEventSchema])
  .describe('reset: the prompt and tools; tool_call: one call (end_turn included) with arguments and result; list_tools; end: how it ended');
export type ResetEvent = z.infer<typeof ResetEventSchema>;
export type ToolCallEvent = z.infer<typeof ToolCallEventSchema>;
export type ListToolsEvent = z.infer<typeof ListToolsEventSchema>;
export type EndEvent = z.infer<typeof EndEventSchema>;
export type TranscriptEvent = z.infer<typeof TranscriptEventSchema>;

export const EpisodeSummarySchema = z
  .object({
    episode_id: z.string(),
    client_label: z.string().nullable().describe("the reset's own episode_id label"),
    task_id: z.string(),
    split: z.string(),
    index: z.number().int(),
    transport: TransportSchema,
    phase: PhaseSchema,
    created_at: at,
    ended_at: at.nullable(),
    steps: z.number().int(),
    turn: z.number().int(),
    last_tool: z.string().nullable(),
    end_reason: EndReasonSchema.nullable(),
    reward: z.number().nullable(),
    failure_reason: z.string().nullable(),
    timings: TimingsSchema,
  })
  .describe('an episode in a line');
export type EpisodeSummary = z.infer<typeof EpisodeSummarySchema>;

export const TranscriptSchema = EpisodeSummarySchema.extend({
  toolset: z.string(),
  seed: z.number().int().nullable(),
  scores: ScoresSchema.nullable(),
  failure: FailureSchema.nullable(),
  /** events past the per-transcript bound: counted, not kept */
  events_dropped: z.number().int(),
  events: z.array(TranscriptEventSchema),
}).describe("what the model saw and sent, and how the episode ended; never the token nor the task's hidden data");
export type Transcript = z.infer<typeof TranscriptSchema>;

const StatSeriesSchema = z.object({ count: z.array(z.number().int()), mean: z.array(z.number().nullable()), max: z.array(z.number().nullable()) });

export const SeriesSchema = z
  .object({
    bucket_s: z.number().int(),
    /** unix seconds of each bucket's start, oldest first; the last is the current minute */
    t: z.array(z.number()),
    episodes_ended: z.array(z.number().int()),
    deploy_s: StatSeriesSchema,
    queue_wait_s: StatSeriesSchema,
    failures: z.record(z.array(z.number().int())).describe('failure reason → episodes per bucket'),
    end_reasons: z.record(z.array(z.number().int())).describe('end reason → episodes per bucket'),
    rewards: z
      .object({ edges: z.array(z.number()), by_split: z.record(z.object({ counts: z.array(z.number().int()), n: z.number().int(), mean: z.number() })) })
      .describe('over the hour, per split: counts in [<0, 0–0.1, …, 0.9–1 (1 included), >1]'),
  })
  .describe('per-minute buckets over the last hour, oldest first');
export type Series = z.infer<typeof SeriesSchema>;

export const RecorderStatsSchema = z
  .object({ dir: z.string(), written: z.number().int(), dropped: z.number().int(), failed: z.number().int(), queued: z.number().int() })
  .describe('--record: lines written, dropped (queue full), failed, and waiting to be written');
export type RecorderStats = z.infer<typeof RecorderStatsSchema>;

export const OverviewSchema = z.object({
  at,
  capacity: z.number().int().describe('--max-concurrent-envs'),
  running: z.number().int().describe('env slots held (deploying, running or tearing down)'),
  waiting: z.number().int().describe('resets waiting for a slot'),
  deploying: z.number().int().describe('deploys in flight'),
  live: z.number().int().describe('episodes not ended (waiting, deploying or running)'),
  draining: z.boolean(),
  history: z.object({ kept: z.number().int(), size: z.number().int().describe('--history'), bytes: z.number().int() }),
  recorder: RecorderStatsSchema.nullable(),
  series: SeriesSchema,
});

export const EndedFilterSchema = z
  .object({
    split: z.string().min(1).optional().describe('only this split (live and ended)'),
    end_reason: EndReasonSchema.optional().describe('only ended episodes with this end reason'),
    failed: z
      .enum(['true', 'false'])
      .transform((v) => v === 'true')
      .optional()
      .describe('true: only ended episodes with a failure; false: only those without'),
    failure_reason: z.string().min(1).optional().describe('only ended episodes that failed for this reason'),
    task: z.string().min(1).optional().describe('only task ids containing this'),
    offset: z.coerce.number().int().min(0).default(0).describe('of the ended episodes (newest first)'),
    limit: z.coerce.number().int().min(1).max(10_000).default(100).describe('ended episodes per page'),
  })
  .strict();
export type EndedFilter = Partial<z.output<typeof EndedFilterSchema>>;
