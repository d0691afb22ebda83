/** The shapes of the /console/* routes and the API the page reads (see /openapi.json). */

export interface Timings {
  queued_s: number;
  deploy_s: number;
  running_s: number;
}

export interface EpisodeSummary {
  episode_id: string;
  client_label: string | null;
  task_id: string;
  split: string;
  index: number;
  transport: 'ws' | 'http' | 'mcp';
  phase: 'waiting' | 'deploying' | 'running' | 'done';
  created_at: string;
  ended_at: string | null;
  steps: number;
  turn: number;
  last_tool: string | null;
  end_reason: string | null;
  reward: number | null;
  failure_reason: string | null;
  timings: Timings;
}

export interface Failure {
  reason: string;
  phase: string;
  message: string;
  exit_code?: number | null;
  log_tail?: string;
}

export interface Message {
  role: string;
  content: string;
}

export type TranscriptEvent =
  | { kind: 'reset'; at: string; messages: Message[]; tools: string[]; turns: number; max_turns: number }
  | {
      kind: 'tool_call';
      at: string;
      step: number;
      turn: number;
      tool_name: string;
      arguments: unknown;
      result: ToolResult | null;
      error: { error_type: string; message: string } | null;
      ms: number;
    }
  | { kind: 'list_tools'; at: string; ms: number }
  | {
      kind: 'end';
      at: string;
      end_reason: string | null;
      reward: number | null;
      scores: Record<string, number> | null;
      failure: Failure | null;
      timings: Timings;
    };

export interface ToolResult {
  content?: { type: string; text?: string }[];
  is_error?: boolean;
  data?: unknown;
}

export interface Transcript extends EpisodeSummary {
  toolset: string;
  seed: number | null;
  scores: Record<string, number> | null;
  failure: Failure | null;
  events_dropped: number;
  events: TranscriptEvent[];
}

export interface StatSeries {
  count: number[];
  mean: (number | null)[];
  max: (number | null)[];
}

export interface Series {
  bucket_s: number;
  t: number[];
  episodes_ended: number[];
  deploy_s: StatSeries;
  queue_wait_s: StatSeries;
  failures: Record<string, number[]>;
  end_reasons: Record<string, number[]>;
  rewards: { edges: number[]; by_split: Record<string, { counts: number[]; n: number; mean: number }> };
}

export interface Overview {
  at: string;
  capacity: number;
  running: number;
  waiting: number;
  deploying: number;
  live: number;
  draining: boolean;
  history: { kept: number; size: number; bytes: number };
  recorder: { dir: string; written: number; dropped: number; failed: number; queued: number } | null;
  series: Series;
}

export type StreamMessage =
  | { type: 'snapshot'; overview: Overview; live: EpisodeSummary[] }
  | { type: 'overview'; overview: Overview }
  | { type: 'episode'; episode: EpisodeSummary }
  | { type: 'transcript'; transcript: Transcript }
  | { type: 'event'; episode_id: string; index: number; event: TranscriptEvent };

export interface ToolSpec {
  name: string;
  description: string;
  input_schema: JsonSchema;
}

export interface JsonSchema {
  type?: string | string[];
  description?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  enum?: unknown[];
  default?: unknown;
  minimum?: number;
  maximum?: number;
  minItems?: number;
  maxItems?: number;
}

export interface TaskRow {
  task_id: string;
  split: string;
  index: number;
  toolset: string;
  messages: Message[];
  turns: number;
  max_turns: number;
}

export interface StepReply {
  observation: Record<string, unknown> & {
    tool_name?: string;
    result?: ToolResult | null;
    error?: { error_type: string; message: string } | null;
    scores?: Record<string, number>;
    end_reason?: string;
    failure?: Failure;
    timings?: Timings;
    turn?: number;
  };
  reward: number | null;
  done: boolean;
}
