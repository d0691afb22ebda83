/**
 * What the web console's routes take and answer, declared once as zod schemas: an episode in a
 * line, its transcript, the per-minute series, the overview, and each /console/* page and query.
 * The console's observers (src/console/) take their types from here, the page (web/) reads them
 * from here, /openapi.json documents them from here.
 */
import { z } from 'zod';
import { HarnessExitSchema } from './harness.js';
import { LaneCountsSchema, LaneSchema } from './lanes.js';
import { ModelCallSchema } from './model.js';
import { EndReasonSchema, EpisodeCostSchema, FailureSchema, PhaseSchema, ScoresSchema, TimingsSchema, TransportSchema } from './observations.js';
import { EnvImagesSchema } from './server.js';

const at = z.string().datetime();

/**
 * What a transcript holds in place of a payload past its bound (src/protocol/transcript-bound.ts): the
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
/** a model call the env made through the gateway: request, response (a stream put back together), usage, latency, status */
export const ModelCallEventSchema = ModelCallSchema.omit({ episode_id: true }).extend({ kind: z.literal('model_call'), at });
/** A verified task's verifier ran (docs/harbor.md): what it printed is kept here, never shown to the model. */
export const VerifierEventSchema = z.object({
  kind: z.literal('verifier'),
  at,
  /** the turn it scored; scope task: the task's verifier, at the episode's end */
  turn: z.number().int(),
  scope: z.enum(['turn', 'task']),
  /** where the tests ran: the agent's container (after the toolchain check) or a fresh one given the agent's outputs */
  mode: z.enum(['in-place', 'clean']),
  /** tampered: the toolchain check refused to run the tests (`tampered` names the changed paths); failed: it could not run its tests (verifier_failed) */
  status: z.enum(['scored', 'invalid', 'timeout', 'tampered', 'failed']),
  tampered: z.array(z.string()),
  scores: ScoresSchema.nullable(),
  exit_code: z.number().int().nullable(),
  duration_s: z.number(),
  agent_processes_killed: z.number().int(),
  /** test.sh's output, its first and last bytes kept (a mark when the transcript had no room left) */
  output: z.union([z.string(), TruncationMarkSchema]),
  output_bytes: z.number().int(),
  dropped_bytes: z.number().int(),
});
/** A harness episode's harness run ended (docs/gateway.md, "harness episodes"): how, and what it printed. */
export const HarnessEventSchema = z.object({
  kind: z.literal('harness'),
  at,
  turn: z.number().int(),
  ended: HarnessExitSchema,
  exit_code: z.number().int().nullable(),
  duration_s: z.number(),
  /** its stdout and stderr together, their first and last bytes kept */
  output: z.union([z.string(), TruncationMarkSchema]),
  output_bytes: z.number().int(),
  dropped_bytes: z.number().int(),
});
export const TranscriptEventSchema = z
  .discriminatedUnion('kind', [
    ResetEventSchema,
    ToolCallEventSchema,
    ListToolsEventSchema,
    ModelCallEventSchema,
    VerifierEventSchema,
    HarnessEventSchema,
    EndEventSchema,
  ])
  .describe(
    "reset: the prompt and tools; tool_call: one call (end_turn included) with arguments and result; list_tools; model_call: a call of the env to the model gateway; verifier: a verified task's tests ran (their output, never the model's); harness: a harness episode's harness run ended; end: how it ended",
  );
export type ResetEvent = z.infer<typeof ResetEventSchema>;
export type ToolCallEvent = z.infer<typeof ToolCallEventSchema>;
export type ListToolsEvent = z.infer<typeof ListToolsEventSchema>;
export type ModelCallEvent = z.infer<typeof ModelCallEventSchema>;
export type EndEvent = z.infer<typeof EndEventSchema>;
export type VerifierEvent = z.infer<typeof VerifierEventSchema>;
export type HarnessEvent = z.infer<typeof HarnessEventSchema>;
export type TranscriptEvent = z.infer<typeof TranscriptEventSchema>;

export const EpisodeSummarySchema = z
  .object({
    episode_id: z.string(),
    client_label: z.string().nullable().describe("the reset's own episode_id label"),
    env_id: z
      .string()
      .nullable()
      .describe(
        "what its env's containers and network are labelled with (io.openenv.bundle-server.episode): the episode_id, or the pooled env's own pool-… id; null until its env is deployed",
      ),
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
    scores: ScoresSchema.nullable().describe("the env's scores the reward came from (null until scored, and for a failure)"),
    failure_reason: z.string().nullable(),
    timings: TimingsSchema,
    cost: EpisodeCostSchema.nullable().describe(
      "what its env cost (the ending observation's metadata.cost): null until its teardown read it, and when no env was deployed",
    ),
  })
  .describe('an episode in a line');
export type EpisodeSummary = z.infer<typeof EpisodeSummarySchema>;

export const TranscriptSchema = EpisodeSummarySchema.extend({
  toolset: z.string(),
  seed: z.number().int().nullable(),
  failure: FailureSchema.nullable(),
  /** events past the per-transcript bound: counted, not kept */
  events_dropped: z.number().int(),
  events: z.array(TranscriptEventSchema),
}).describe("what the model saw and sent, and how the episode ended; never the token nor the task's hidden data");
export type Transcript = z.infer<typeof TranscriptSchema>;

// ---- the series (src/console/series.ts) -------------------------------------------------------

/** The windows the console's charts can span; each starts no earlier than the first data kept. */
export const SeriesWindowSchema = z.enum(['15m', '1h', '6h', 'all']).describe('15m, 1h, 6h, or all: everything kept');
export type SeriesWindow = z.infer<typeof SeriesWindowSchema>;

const ints = z.array(z.number().int());
const maybe = z.array(z.number().nullable());

/** Exact count, mean and max; percentiles from the values kept (all of them up to the per-minute sample bound). */
export const DistributionSchema = z.object({
  n: z.number().int(),
  mean: z.number().nullable(),
  p10: z.number().nullable(),
  p50: z.number().nullable(),
  p90: z.number().nullable(),
  max: z.number().nullable(),
});
export type Distribution = z.infer<typeof DistributionSchema>;

const StatSeriesSchema = z.object({ count: ints, mean: maybe, max: maybe });

const SplitSeriesSchema = z
  .object({
    ended: ints.describe('episodes of this split that ended in each bucket'),
    failed: ints.describe('...of them with a failure'),
    reward: z.object({ n: ints, mean: maybe, p10: maybe, p90: maybe }).describe('scored episodes: exact mean, and the p10–p90 band'),
    steps_mean: maybe.describe('tool calls per ended episode'),
    turns_mean: maybe.describe('turns reached per ended episode'),
  })
  .describe("one split's buckets");

/**
 * Each score's mean beside the mean reward, as vf-eval prints each rubric function's: over the
 * scored episodes that reported it (a failed episode reports none).
 */
export const ScoreMeansSchema = z.record(z.number()).describe('score name → its exact mean over the scored episodes that reported it');
export type ScoreMeans = z.infer<typeof ScoreMeansSchema>;

/** Each cost figure's mean over the ended episodes that reported it (src/console/cost-means.ts). */
export const CostMeansSchema = z
  .object({
    n: z.number().int().describe('episodes with a cost'),
    cpu_s: z.number().nullable(),
    peak_memory_bytes: z.number().int().nullable(),
    bytes_written: z.number().int().nullable(),
    wall_s: z.number().nullable(),
  })
  .describe("each figure's mean over the episodes that reported it (null: none did)");
export type CostMeans = z.infer<typeof CostMeansSchema>;

export const GroupStatsSchema = z.object({
  ended: z.number().int(),
  failed: z.number().int(),
  n: z.number().int().describe('scored episodes'),
  mean: z.number().nullable().describe('exact mean reward of the scored ones'),
  scores: ScoreMeansSchema,
  cost: CostMeansSchema.describe("what the group's episodes cost, by the minute their teardown read it"),
});
export type GroupStats = z.infer<typeof GroupStatsSchema>;

export const SeriesSchema = z
  .object({
    window: SeriesWindowSchema,
    /** seconds each bucket spans (60, or more for long windows) */
    bucket_s: z.number().int(),
    /** unix seconds of each bucket's start, oldest first: from the window's start or the first data kept, whichever is later, to now */
    t: z.array(z.number()),
    /** unix seconds of the oldest data kept (null: none yet) */
    kept_since: z.number().nullable(),
    episodes_ended: ints,
    deploy_s: StatSeriesSchema,
    queue_wait_s: StatSeriesSchema,
    queue_wait_s_by_lane: z.record(LaneSchema, StatSeriesSchema).describe('the same per lane the resets waited in (lanes with a wait in the window)'),
    failures: z.record(ints).describe('failure reason → episodes per bucket'),
    end_reasons: z.record(ints).describe('end reason → episodes per bucket'),
    by_split: z.record(SplitSeriesSchema).describe('split → its buckets'),
    rewards: z
      .object({
        edges: z.array(z.number()),
        by_split: z.record(z.object({ counts: ints, n: z.number().int(), mean: z.number().nullable() })),
      })
      .describe('over the window, per split: counts in [<0, 0–0.1, …, 0.9–1 (1 included), >1], and the exact mean'),
    summary: z
      .object({
        reward: z.record(DistributionSchema).describe('split → rewards'),
        deploy_s: DistributionSchema,
        queue_wait_s: DistributionSchema,
        queue_wait_s_by_lane: z.record(LaneSchema, DistributionSchema).describe('lane → queue waits (lanes with a wait in the window)'),
      })
      .describe('over the window'),
    groups: z.record(z.record(z.record(GroupStatsSchema))).describe('split → group name → value → counts and mean reward, over the window'),
  })
  .describe('buckets over the chosen window, oldest first');
export type Series = z.infer<typeof SeriesSchema>;

/** Per task over the last N ended episodes kept (GET /console/tasks/recent). */
export const RecentTaskSchema = z.object({
  task_id: z.string(),
  split: z.string(),
  ended: z.number().int(),
  failed: z.number().int(),
  n: z.number().int().describe('scored episodes'),
  mean: z.number().nullable().describe('exact mean reward of the scored ones'),
  scores: ScoreMeansSchema,
  cost: CostMeansSchema,
  last_reward: z.number().nullable(),
  last_ended_at: at.nullable(),
});
export type RecentTask = z.infer<typeof RecentTaskSchema>;

export const RecorderStatsSchema = z
  .object({ dir: z.string(), written: z.number().int(), dropped: z.number().int(), failed: z.number().int(), queued: z.number().int() })
  .describe('--record: lines written, dropped (queue full), failed, and waiting to be written');
export type RecorderStats = z.infer<typeof RecorderStatsSchema>;

export const OverviewSchema = z.object({
  at,
  capacity: z.number().int().describe('--max-concurrent-envs'),
  running: z.number().int().describe('env slots held (deploying, running or tearing down)'),
  waiting: z.number().int().describe('resets waiting for a slot'),
  waiting_by_lane: LaneCountsSchema.describe('the same, per lane'),
  deploying: z.number().int().describe('deploys in flight'),
  live: z.number().int().describe('episodes not ended (waiting, deploying or running)'),
  draining: z.boolean(),
  history: z.object({ kept: z.number().int(), size: z.number().int().describe('--history'), bytes: z.number().int() }),
  recorder: RecorderStatsSchema.nullable(),
  images: EnvImagesSchema.optional().describe('the env images, while not every one is ready (they build in the background)'),
  series: SeriesSchema,
});
export type Overview = z.infer<typeof OverviewSchema>;

/** GET /console/overview's query. */
export const WindowQuerySchema = z.object({ window: SeriesWindowSchema.default('1h') }).strict();

/** GET /console/recent-tasks */
export const RecentTasksQuerySchema = z
  .object({
    n: z.coerce.number().int().min(1).max(100_000).default(200).describe('the last N ended episodes (at most the --history kept)'),
    split: z.string().min(1).optional().describe('only this split'),
  })
  .strict();

export const RecentTasksPageSchema = z.object({
  episodes: z.number().int().describe('ended episodes looked at'),
  tasks: z.array(RecentTaskSchema).describe('most episodes first'),
});
export type RecentTasksPage = z.infer<typeof RecentTasksPageSchema>;

/** GET /console/tasks: a split's task ids, searchable (GET /tasks/{task_id} has the rest of a task). */
export const ConsoleTasksQuerySchema = z
  .object({
    split: z.string().min(1).optional().describe('default: the default split'),
    q: z.string().optional().describe('only task ids containing this (case-insensitive)'),
    offset: z.coerce.number().int().min(0).default(0),
    limit: z.coerce.number().int().min(1).max(1000).default(50),
  })
  .strict();

/** A task in a line of the console's task picker. */
export const TaskLineSchema = z.object({
  task_id: z.string(),
  index: z.number().int(),
  toolset: z.string(),
  turns: z.number().int(),
  max_turns: z.number().int(),
});
export type TaskLine = z.infer<typeof TaskLineSchema>;

export const ConsoleTasksPageSchema = z.object({
  split: z.string(),
  splits: z.record(z.number().int()).describe('every split and its task count'),
  total: z.number().int().describe('tasks that match'),
  offset: z.number().int(),
  tasks: z.array(TaskLineSchema),
});
export type ConsoleTasksPage = z.infer<typeof ConsoleTasksPageSchema>;

/** GET /console/episodes/{id}'s query. */
export const TranscriptQuerySchema = z
  .object({
    download: z
      .enum(['true', 'false'])
      .transform((v) => v === 'true')
      .optional()
      .describe('answer as an attachment, episode-<id>.json'),
  })
  .strict();

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

/** GET /console/episodes: live episodes and the last --history ended ones. */
export const ConsoleEpisodesPageSchema = z.object({
  live: z.array(EpisodeSummarySchema),
  ended: z.array(EpisodeSummarySchema).describe('newest first'),
  ended_total: z.number().int().describe('ended episodes kept that match the filter'),
  history_size: z.number().int(),
});
export type ConsoleEpisodesPage = z.infer<typeof ConsoleEpisodesPageSchema>;

// ---- the live stream (GET /console/stream): one JSON object per line -------------------------

export const StreamQuerySchema = z
  .object({
    episode: z.string().min(1).optional().describe("also stream this episode's transcript events"),
    window: SeriesWindowSchema.default('1h').describe("the overviews' series window"),
  })
  .strict();

export const StreamMessageSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('snapshot'), overview: OverviewSchema, live: z.array(EpisodeSummarySchema) }),
  z.object({ type: z.literal('overview'), overview: OverviewSchema }),
  z.object({ type: z.literal('episode'), episode: EpisodeSummarySchema }),
  z.object({ type: z.literal('transcript'), transcript: TranscriptSchema }),
  z
    .object({ type: z.literal('event'), episode_id: z.string(), index: z.number().int(), event: TranscriptEventSchema })
    .describe("index: the event's place in the transcript (a step that ended the episode goes before its end)"),
]);
export type StreamMessage = z.infer<typeof StreamMessageSchema>;
