/**
 * The page's view of the wire: every shape comes from the server's own declarations in src/protocol
 * (type-only imports, erased at build), so `tsc -p web` catches any drift. What the
 * server declares as `unknown` in a transcript (the reset prompt, a call's result and error) is
 * read here as the shapes the episode records there: the reset observation's messages and the
 * call observation's result and error.
 */
import type { BundleInfo, TaskRow, ToolSpec } from '../../src/protocol/bundle';
import type {
  ConsoleEpisodesPage,
  ConsoleTasksPage,
  CostMeans,
  EndEvent,
  EpisodeSummary,
  ListToolsEvent,
  HarnessEvent,
  ModelCallEvent,
  Overview,
  RecentTask,
  RecentTasksPage,
  ResetEvent as WireResetEvent,
  ScoreMeans,
  Series,
  SeriesWindow,
  StreamMessage,
  ToolCallEvent as WireToolCallEvent,
  Transcript as WireTranscript,
  VerifierEvent,
} from '../../src/protocol/console';
import type { EpisodeStarted } from '../../src/protocol/episodes';
import type { Lane } from '../../src/protocol/lanes';
import type { CallObservation, EpisodeCost, Failure, ResetObservation, StepOutcome, Timings, ToolError, ToolResult } from '../../src/protocol/observations';

export type {
  BundleInfo,
  ConsoleEpisodesPage,
  ConsoleTasksPage,
  CostMeans,
  EndEvent,
  EpisodeCost,
  EpisodeSummary,
  Failure,
  Lane,
  ListToolsEvent,
  HarnessEvent,
  ModelCallEvent,
  Overview,
  RecentTask,
  RecentTasksPage,
  ScoreMeans,
  Series,
  SeriesWindow,
  StreamMessage,
  TaskRow,
  Timings,
  ToolSpec,
  VerifierEvent,
};

export type Message = ResetObservation['messages'][number];

export type ResetEvent = Omit<WireResetEvent, 'messages'> & { messages: Message[] };
export type ToolCallEvent = Omit<WireToolCallEvent, 'result' | 'error'> & { result: ToolResult | null; error: ToolError | null };
export type TranscriptEvent = ResetEvent | ToolCallEvent | ListToolsEvent | ModelCallEvent | VerifierEvent | HarnessEvent | EndEvent;
export type Transcript = Omit<WireTranscript, 'events'> & { events: TranscriptEvent[] };

/** POST /episodes/{id}/step's answer to a call_tool */
export type StepReply = Omit<StepOutcome, 'observation'> & { observation: CallObservation };
/** POST /console/playground's answer: its observation is the reset's */
export type Started = Omit<EpisodeStarted, 'observation'> & { observation: ResetObservation };

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
