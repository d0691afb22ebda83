/**
 * One episode played the way slime's generate function plays a prompt row: the row's messages
 * and tools go to the model; each of its tool calls becomes a step over /ws and its answer a
 * `tool` message; `end_turn`'s answer is the next turn's prompt like any tool answer; a reply
 * without a tool call ends the turn it left open, and any turns after it end empty. Past
 * --max-turns model turns the remaining turns end empty too, so the env scores what was done.
 *
 * How the episode ended is one of three: scored (a reward), the env's failure (the server's
 * `failure`, or a session that broke) or the model's failure (its endpoint failed or timed out);
 * the two failures carry no reward, as slime drops them rather than train on a false 0.
 *
 * A harness episode (its reset says `harness: true`) is played by the server's harness in the
 * env, its model calls going to the server's gateway upstream: the client makes no model call and
 * only waits (tool `wait`) until the episode ends.
 */
import { END_TURN_TOOL } from '../bundle/index.js';
import { ServerSession, SessionError } from '../client/session.js';
import type { TaskRow as ServerTaskRow } from '../protocol/bundle.js';
import { HARNESS, MAX_FRAME_BYTES } from '../defaults.js';
import { WAIT_TOOL_NAME } from '../protocol/harness.js';
import type { ServerFrame } from '../protocol/frames.js';
import type { CallObservation, Ending, Failure, ResetObservation, Scores, StepOutcome } from '../protocol/observations.js';
import type { PromptRow } from '../rows/build.js';
import { ModelError, type ChatMessage, type ChatModel, type Usage } from './model.js';

/** The env's side of an episode failed: the server said so (its `failure`), or the session broke. */
export class EnvError extends Error {
  override readonly name = 'EnvError';
  constructor(
    readonly reason: string,
    message: string,
    /** the server's failure object, when it sent one */
    readonly failure: Failure | null = null,
  ) {
    super(message);
  }
}

export interface EpisodeFailure {
  /** whose side failed: the env's (the server, the env, the session) or the model's (its endpoint) */
  kind: 'env' | 'model';
  reason: string;
  message: string;
  /** the server's failure object, for an env failure it reported */
  detail?: Failure;
}

export interface ToolCallRecord {
  model_turn: number;
  name: string;
  arguments: unknown;
  is_error: boolean;
  error_type: string | null;
}

/** One line of episodes.jsonl. */
export interface EpisodeRecord {
  task_id: string;
  split: string;
  index: number;
  groups: Record<string, string>;
  episode_id: string | null;
  messages: ChatMessage[];
  tool_calls: ToolCallRecord[];
  /** null unless scored */
  reward: number | null;
  scores: Scores | null;
  end_reason: string | null;
  failure: EpisodeFailure | null;
  model_turns: number;
  /** the model used its --max-turns and the remaining turns were ended empty */
  turns_exhausted: boolean;
  /** summed over the model's replies; null when the endpoint reported none */
  usage: Usage | null;
  /**
   * a harness episode's model use through the server's gateway (its calls and their tokens, as
   * the ending's `harness` reports them) and how its harness's last run ended; null for a task the
   * client played with its own model
   */
  harness: HarnessUse | null;
  timings: { queued_s: number | null; deploy_s: number | null; running_s: number | null; model_s: number; wall_s: number };
}

export interface PlaySettings {
  url: string;
  token: string | null;
  maxTurns: number;
  toolTimeoutMs: number;
  resetTimeoutMs: number;
}

/** What a harness episode's harness did through the gateway (docs/gateway.md, "harness episodes"). */
export interface HarnessUse {
  model_calls: number;
  model_tokens: number;
  ended: string | null;
  exit_code: number | null;
  /** the last run's output, its last HARNESS_TAIL_CHARS characters, when it did not exit 0 */
  output_tail?: string;
}

/** how much of a harness's output a record keeps, for a run that did not exit 0 */
const HARNESS_TAIL_CHARS = 2000;

/** Extra time a client waits past the server's own budgets: the server reports those itself. */
const REPLY_SLACK_MS = 10_000;
/** end_turn calls that close the turns left after the model stopped; more than any task has turns */
const MAX_EMPTY_TURNS = 256;

const round3 = (s: number) => Math.round(s * 1000) / 1000;

/** A step's answer: a tool call's observation, or the ending of an episode that ended between steps. */
type StepObservation = CallObservation | Ending;

/** The text a tool answer gives the model: the result's text, or the error's message. */
function toolText(obs: StepObservation): string {
  if (!('tool_name' in obs)) return '';
  const texts = (obs.result?.content ?? []).map((c) => c.text);
  if (texts.length) return texts.join('\n');
  return obs.error?.message ?? '';
}

/** The tool call's `arguments` as the step sends them: the parsed JSON, or the raw text (the server answers that as invalid_args). */
function parseArguments(raw: string): unknown {
  if (raw.trim() === '') return {};
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

/** An observation frame's outcome; an error frame is the env's failure, with the server's reason. */
function outcomeOf(frame: ServerFrame, what: string): StepOutcome {
  if (frame.type === 'observation') return frame.data;
  if (frame.type === 'error') {
    const d = frame.data;
    const reason = d.code === 'CAPACITY_REACHED' ? 'capacity_reached' : (d.failure?.reason ?? d.reason ?? d.code.toLowerCase());
    throw new EnvError(reason, `${what}: ${d.message}`, d.failure ?? null);
  }
  throw new EnvError('server_error', `${what}: unexpected ${frame.type} frame`);
}

function resetOf(frame: ServerFrame): ResetObservation {
  const o = outcomeOf(frame, 'reset').observation;
  if ('episode_id' in o) return o;
  throw new EnvError('server_error', "reset: the answer is not a reset's observation");
}

/** a tool call the model got wrong, answered to it as the server answers bad arguments */
function modelMistake(name: string, message: string): StepOutcome<StepObservation> {
  return { observation: { tool_name: name, result: null, error: { error_type: 'invalid_args', message } }, reward: null, done: false };
}

function stepOf(frame: ServerFrame, what: string): StepOutcome<StepObservation> {
  const out = outcomeOf(frame, what);
  const o = out.observation;
  if ('tools' in o) throw new EnvError('server_error', `${what}: the answer is not a tool call's observation`);
  return { ...out, observation: o };
}

export async function playEpisode(
  task: ServerTaskRow,
  row: PromptRow,
  /** null: the task is a harness task, whose model is the server's gateway upstream */
  model: ChatModel | null,
  s: PlaySettings,
  signal: AbortSignal,
): Promise<EpisodeRecord> {
  const started = Date.now();
  const rec: EpisodeRecord = {
    task_id: task.task_id,
    split: task.split,
    index: task.index,
    groups: task.groups ?? {},
    episode_id: null,
    messages: row.messages.map((m) => ({ role: m.role as 'system' | 'user', content: m.content })),
    tool_calls: [],
    reward: null,
    scores: null,
    end_reason: null,
    failure: null,
    model_turns: 0,
    turns_exhausted: false,
    usage: null,
    harness: null,
    timings: { queued_s: null, deploy_s: null, running_s: null, model_s: 0, wall_s: 0 },
  };
  let socket: ServerSession | null = null;
  let done = false;
  const ended = (out: StepOutcome<StepObservation>) => {
    if (!out.done) return false;
    const o = out.observation;
    rec.end_reason = o.end_reason ?? null;
    const h = 'harness' in o && typeof o.harness === 'object' ? o.harness : undefined;
    if (h) {
      const clean = h.ended === 'exited' && h.exit_code === 0;
      rec.harness = {
        model_calls: h.model_calls,
        model_tokens: h.model_tokens,
        ended: h.ended,
        exit_code: h.exit_code,
        ...(clean ? {} : { output_tail: h.output_tail.slice(-HARNESS_TAIL_CHARS) }),
      };
    }
    const t = o.timings;
    if (t) Object.assign(rec.timings, { queued_s: t.queued_s, deploy_s: t.deploy_s, running_s: t.running_s });
    if (o.failure || out.reward === null) {
      rec.failure = {
        kind: 'env',
        reason: o.failure?.reason ?? rec.end_reason ?? 'no_reward',
        message: o.failure?.message ?? 'the episode ended without a reward',
        ...(o.failure ? { detail: o.failure } : {}),
      };
    } else {
      rec.reward = out.reward;
      rec.scores = o.scores ?? null;
    }
    return true;
  };
  const step = async (name: string, args: unknown, modelTurn: number) => {
    // The model's own mistakes are its tool errors, as the server answers a bad argument: a call
    // too large for a frame is not sent (the server would close the session), and a call the
    // server refuses as malformed (an empty tool name) is answered to the model; the episode goes on.
    const bytes = Buffer.byteLength(JSON.stringify({ type: 'step', data: { type: 'call_tool', tool_name: name, arguments: args } }));
    let out: StepOutcome<StepObservation>;
    if (bytes > MAX_FRAME_BYTES) {
      out = modelMistake(name, `the call is ${bytes} bytes of JSON, over the ${MAX_FRAME_BYTES / 1024 / 1024} MiB a step may have: not sent`);
    } else {
      const frame = await socket!.call(name, args, { timeoutMs: s.toolTimeoutMs + REPLY_SLACK_MS, what: '--tool-timeout', signal });
      out = frame.type === 'error' && frame.data.code === 'VALIDATION_ERROR' ? modelMistake(name, frame.data.message) : stepOf(frame, `tool ${name}`);
    }
    const o = out.observation;
    const err = 'tool_name' in o ? o.error : null;
    rec.tool_calls.push({
      model_turn: modelTurn,
      name,
      arguments: bytes > MAX_FRAME_BYTES ? `[${bytes} bytes, not sent]` : args,
      is_error: err !== null || ('tool_name' in o && o.result?.is_error === true),
      error_type: err?.error_type ?? null,
    });
    return out;
  };
  /** the open turn ends with `answer`, any later turns empty, until the env scores the episode */
  const endTurns = async (answer: string | null, modelTurn: number) => {
    for (let i = 0; i < MAX_EMPTY_TURNS && !done; i++) {
      const out = await step(END_TURN_TOOL.name, i === 0 && answer ? { answer } : {}, modelTurn);
      done = ended(out);
    }
    if (!done) throw new EnvError('server_error', `the episode did not end after ${MAX_EMPTY_TURNS} end_turn calls`);
  };
  try {
    socket = await ServerSession.open(s.url, { token: s.token, timeoutMs: s.resetTimeoutMs, signal });
    const reset = resetOf(
      await socket.reset(
        { split: task.split, index: task.index, reset_timeout_s: s.resetTimeoutMs / 1000 },
        { timeoutMs: s.resetTimeoutMs + REPLY_SLACK_MS, what: '--reset-timeout', signal },
      ),
    );
    rec.episode_id = reset.episode_id;
    // a harness episode is played by the server's harness in the env: the client only waits
    const waitS = Math.min(HARNESS.waitMaxS, Math.max(1, s.toolTimeoutMs / 1000));
    while (reset.harness && !done) {
      const frame = await socket.call(WAIT_TOOL_NAME, { timeout_s: waitS }, { timeoutMs: waitS * 1000 + REPLY_SLACK_MS, what: 'wait', signal });
      done = ended(stepOf(frame, WAIT_TOOL_NAME));
    }
    while (!done) {
      if (rec.model_turns >= s.maxTurns) {
        rec.turns_exhausted = true;
        await endTurns(null, rec.model_turns);
        break;
      }
      if (!model) throw new EnvError('not_harness', `task ${task.task_id} is not a harness task: the client plays it with a model (--model-url)`);
      const t0 = Date.now();
      let reply;
      try {
        reply = await model.complete(rec.messages, row.tools, signal);
      } finally {
        rec.timings.model_s = round3(rec.timings.model_s + (Date.now() - t0) / 1000);
      }
      rec.model_turns++;
      if (reply.usage) {
        rec.usage = {
          prompt_tokens: (rec.usage?.prompt_tokens ?? 0) + reply.usage.prompt_tokens,
          completion_tokens: (rec.usage?.completion_tokens ?? 0) + reply.usage.completion_tokens,
        };
      }
      const calls = (reply.message.tool_calls ?? []).map((c, i) => ({ ...c, id: c.id || `call_${rec.model_turns}_${i}` }));
      rec.messages.push(calls.length ? { ...reply.message, tool_calls: calls } : reply.message);
      if (calls.length === 0) {
        await endTurns(reply.message.content, rec.model_turns);
        break;
      }
      for (const call of calls) {
        const args = parseArguments(call.function.arguments);
        const out = await step(call.function.name, args, rec.model_turns);
        rec.messages.push({ role: 'tool', tool_call_id: call.id, content: toolText(out.observation) });
        done = ended(out);
        // the calls after the one that ended the episode are not played
        if (done) break;
      }
    }
  } catch (e) {
    if (signal.aborted) throw e;
    if (e instanceof ModelError) rec.failure = { kind: 'model', reason: e.reason, message: e.message };
    else if (e instanceof EnvError) rec.failure = { kind: 'env', reason: e.reason, message: e.message, ...(e.failure ? { detail: e.failure } : {}) };
    else if (e instanceof SessionError) rec.failure = { kind: 'env', reason: e.reason, message: e.message };
    else throw e;
    rec.reward = null;
    rec.scores = null;
  } finally {
    // the server tears the episode down when its session closes (also after Ctrl-C); the
    // record does not wait for the close handshake
    void socket?.close();
    rec.timings.wall_s = round3((Date.now() - started) / 1000);
  }
  return rec;
}
