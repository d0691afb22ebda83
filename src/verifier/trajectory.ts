/**
 * The agent's trajectory as Harbor gives it to verifiers that read it: `/logs/agent/trajectory.json`
 * in ATIF (the Agent Trajectory Interchange Format, Harbor's RFC 0001), built from the episode's
 * transcript (docs/verifiers.md, "The agent's trajectory"). Only what the model saw and did: the
 * prompt (a system step, a user step per message), then one agent step per tool call with its
 * arguments and, as its observation, the reply the model got. Never a verifier's output, the tests,
 * the env's model calls or the episode's end. Pure: transcript events in, a JSON object out.
 */
import { boundEvent } from '../protocol/transcript-bound.js';
import type { ResetEvent, ToolCallEvent, TranscriptEvent } from '../protocol/console.js';

/** the ATIF version written (fields of later versions are optional additions) */
export const ATIF_SCHEMA_VERSION = 'ATIF-v1.4';
/** where in the verifier's container the trajectory is written (Harbor's layout) */
export const AGENT_LOGS_DIR = '/logs/agent';
export const TRAJECTORY_FILE_NAME = 'trajectory.json';
export const TRAJECTORY_FILE = `${AGENT_LOGS_DIR}/${TRAJECTORY_FILE_NAME}`;

export interface AtifToolCall {
  tool_call_id: string;
  function_name: string;
  arguments: Record<string, unknown>;
}

export interface AtifStep {
  /** 1, 2, … in order */
  step_id: number;
  timestamp?: string;
  source: 'system' | 'user' | 'agent';
  message: string;
  tool_calls?: AtifToolCall[];
  observation?: { results: { source_call_id: string; content: string }[] };
  extra?: Record<string, unknown>;
}

export interface AtifTrajectory {
  schema_version: typeof ATIF_SCHEMA_VERSION;
  session_id: string;
  agent: { name: string; version: string; model_name?: string };
  steps: AtifStep[];
  final_metrics: { total_steps: number };
}

/** the events a trajectory is built from (a transcript holds others: they are left out) */
export type TrajectoryEvent = ResetEvent | ToolCallEvent;

/** what the model was shown, as text: a string as it is, anything else (a list of parts, a truncation mark) as JSON */
function text(v: unknown): string {
  if (typeof v === 'string') return v;
  if (v === null || v === undefined) return '';
  // a message's content as parts: their text joined
  if (Array.isArray(v) && v.every((p) => typeof p === 'object' && p !== null && typeof (p as { text?: unknown }).text === 'string'))
    return v.map((p) => (p as { text: string }).text).join('\n');
  return JSON.stringify(v);
}

function promptSteps(ev: ResetEvent, next: () => number): AtifStep[] {
  const messages = Array.isArray(ev.messages) ? (ev.messages as unknown[]) : [ev.messages];
  return messages.map((m) => {
    const msg = typeof m === 'object' && m !== null ? (m as { role?: unknown; content?: unknown }) : { content: m };
    return { step_id: next(), timestamp: ev.at, source: msg.role === 'system' ? ('system' as const) : ('user' as const), message: text(msg.content) };
  });
}

function callStep(ev: ToolCallEvent, next: () => number): AtifStep {
  const id = `call_${ev.step}`;
  const args =
    typeof ev.arguments === 'object' && ev.arguments !== null && !Array.isArray(ev.arguments)
      ? (ev.arguments as Record<string, unknown>)
      : { value: ev.arguments };
  const failed = ev.error !== null && ev.error !== undefined;
  return {
    step_id: next(),
    timestamp: ev.at,
    source: 'agent',
    message: '',
    tool_calls: [{ tool_call_id: id, function_name: ev.tool_name, arguments: args }],
    observation: { results: [{ source_call_id: id, content: failed ? text(ev.error) : text(ev.result) }] },
    extra: { turn: ev.turn, ...(failed ? { error: true } : {}) },
  };
}

/**
 * The ATIF trajectory of an episode's transcript so far: its prompt and every tool call the model
 * made (list_tools, model calls of the env, verifier runs and the end are not the model's steps).
 */
export function buildTrajectory(events: readonly TranscriptEvent[], session: { id: string; agent?: string; version?: string; model?: string }): AtifTrajectory {
  let n = 0;
  const next = () => ++n;
  const steps: AtifStep[] = [];
  for (const ev of events) {
    if (ev.kind === 'reset') steps.push(...promptSteps(ev, next));
    else if (ev.kind === 'tool_call') steps.push(callStep(ev, next));
  }
  return {
    schema_version: ATIF_SCHEMA_VERSION,
    session_id: session.id,
    agent: { name: session.agent ?? 'openenv-bundle', version: session.version ?? '1', ...(session.model ? { model_name: session.model } : {}) },
    steps,
    final_metrics: { total_steps: steps.length },
  };
}

/** An episode's model-visible events as they happen, each payload bounded, for the trajectory a verifier gets. */
export class TrajectoryLog {
  private readonly events: TrajectoryEvent[] = [];
  private bytes = 0;

  constructor(private readonly now: () => Date = () => new Date()) {}

  private push(ev: TrajectoryEvent): void {
    // bounded as the transcript bounds it (its field and total bounds, its truncation marks)
    const { event, bytes } = boundEvent(ev, this.bytes);
    this.bytes += bytes;
    this.events.push(event as TrajectoryEvent);
  }

  /** the prompt the model got (a reset's observation) */
  reset(observation: unknown): void {
    const o = (observation ?? {}) as { messages?: unknown; tools?: { name: string }[] };
    this.push({
      kind: 'reset',
      at: this.now().toISOString(),
      messages: o.messages ?? [],
      tools: (o.tools ?? []).map((t) => t.name),
      turns: null,
      max_turns: null,
    });
  }

  /** a tool call the model made (`step`: its number; `turn`: the turn it was made in) and the reply it got */
  call(c: { step: number; turn: number; tool: string; arguments: unknown; observation: unknown }): void {
    const o = (c.observation ?? {}) as { result?: unknown; error?: unknown };
    this.push({
      kind: 'tool_call',
      at: this.now().toISOString(),
      step: c.step,
      turn: c.turn,
      tool_name: c.tool,
      arguments: c.arguments === undefined ? {} : c.arguments,
      result: o.result ?? null,
      error: o.error ?? null,
      ms: 0,
    });
  }

  build(session: Parameters<typeof buildTrajectory>[1]): AtifTrajectory {
    return buildTrajectory(this.events, session);
  }
}
