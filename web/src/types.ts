/**
 * The page's view of the wire: every shape comes from the server's own declarations in src/protocol
 * and src/bundle (type-only imports, erased at build), so `tsc -p web` catches any drift. What the
 * server declares as `unknown` in a transcript (the reset prompt, a call's result and error) is
 * read here as the shapes the episode records there: the reset observation's messages and the
 * call observation's result and error.
 */
import type {
  EndEvent,
  EpisodeSummary,
  ListToolsEvent,
  Overview,
  RecentTask,
  ResetEvent as WireResetEvent,
  Series,
  SeriesWindow,
  StreamMessage,
  ToolCallEvent as WireToolCallEvent,
  Transcript as WireTranscript,
} from '../../src/protocol/console';
import type { CallObservation, Failure, ResetObservation, StepOutcome, Timings, ToolError, ToolResult } from '../../src/protocol/observations';
import type { Baselines, Groups, TaskRow, ToolSpec } from '../../src/bundle/schema';

export type { EndEvent, EpisodeSummary, Failure, ListToolsEvent, Overview, RecentTask, Series, SeriesWindow, StreamMessage, TaskRow, Timings, ToolSpec };

export type Message = ResetObservation['messages'][number];

export type ResetEvent = Omit<WireResetEvent, 'messages'> & { messages: Message[] };
export type ToolCallEvent = Omit<WireToolCallEvent, 'result' | 'error'> & { result: ToolResult | null; error: ToolError | null };
export type TranscriptEvent = ResetEvent | ToolCallEvent | ListToolsEvent | EndEvent;
export type Transcript = Omit<WireTranscript, 'events'> & { events: TranscriptEvent[] };

/** POST /episodes/{id}/step's answer to a call_tool */
export type StepReply = Omit<StepOutcome, 'observation'> & { observation: CallObservation };
/** POST /console/playground's answer */
export type Started = Omit<StepOutcome, 'observation'> & { episode_id: string; observation: ResetObservation };

/** GET /bundle, the parts the page reads */
export interface BundleInfo {
  name: string;
  default_split: string;
  splits: Record<string, number>;
  groups: Groups;
  baselines: Baselines;
}

/** A tool's input schema, as the form reads it (a JSON Schema object) */
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
