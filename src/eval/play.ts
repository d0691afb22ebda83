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
 */
import { END_TURN_TOOL } from '../bundle/index.js';
import type { ServerTaskRow } from '../client/http.js';
import { ServerSession, SessionError, type Frame } from '../client/session.js';
import { MAX_FRAME_BYTES } from '../defaults.js';
import type { PromptRow } from '../rows/build.js';
import { ModelError, type ChatMessage, type ChatModel, type Usage } from './model.js';

/** The env's side of an episode failed: the server said so (its `failure`), or the session broke. */
export class EnvError extends Error {
  override readonly name = 'EnvError';
  constructor(
    readonly reason: string,
    message: string,
    /** the server's failure object, when it sent one */
    readonly failure: Record<string, unknown> | null = null,
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
  detail?: Record<string, unknown>;
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
  scores: Record<string, number> | null;
  end_reason: string | null;
  failure: EpisodeFailure | null;
  model_turns: number;
  /** the model used its --max-turns and the remaining turns were ended empty */
  turns_exhausted: boolean;
  /** summed over the model's replies; null when the endpoint reported none */
  usage: Usage | null;
  timings: { queued_s: number | null; deploy_s: number | null; running_s: number | null; model_s: number; wall_s: number };
}

export interface PlaySettings {
  url: string;
  token: string | null;
  maxTurns: number;
  toolTimeoutMs: number;
  resetTimeoutMs: number;
}

/** Extra time a client waits past the server's own budgets: the server reports those itself. */
const REPLY_SLACK_MS = 10_000;
/** end_turn calls that close the turns left after the model stopped; more than any task has turns */
const MAX_EMPTY_TURNS = 256;

const round3 = (s: number) => Math.round(s * 1000) / 1000;

/** The text a tool answer gives the model: the result's text, or the error's message. */
function toolText(obs: Record<string, unknown>): string {
  const result = obs.result as { content?: { type: string; text?: string }[] } | null | undefined;
  const texts = (result?.content ?? []).filter((c) => c.type === 'text' && typeof c.text === 'string').map((c) => c.text!);
  if (texts.length) return texts.join('\n');
  const error = obs.error as { message?: string } | null | undefined;
  return error?.message ?? '';
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

function observationOf(frame: Frame, what: string): { observation: Record<string, unknown>; reward: number | null; done: boolean } {
  if (frame.type === 'observation' && frame.data && typeof frame.data.observation === 'object') {
    return frame.data as { observation: Record<string, unknown>; reward: number | null; done: boolean };
  }
  if (frame.type === 'error') {
    const d = frame.data ?? {};
    const failure = (d.failure as Record<string, unknown> | undefined) ?? null;
    const code = String(d.code ?? 'error');
    const reason = code === 'CAPACITY_REACHED' ? 'capacity_reached' : String(failure?.reason ?? d.reason ?? code.toLowerCase());
    throw new EnvError(reason, `${what}: ${String(d.message ?? code)}`, failure);
  }
  throw new EnvError('server_error', `${what}: unexpected ${frame.type} frame`);
}

/** a tool call the model got wrong, answered to it as the server answers bad arguments */
function modelMistake(name: string, message: string): ReturnType<typeof observationOf> {
  return { observation: { tool_name: name, result: null, error: { error_type: 'invalid_args', message } }, reward: null, done: false };
}

export async function playEpisode(task: ServerTaskRow, row: PromptRow, model: ChatModel, s: PlaySettings, signal: AbortSignal): Promise<EpisodeRecord> {
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
    timings: { queued_s: null, deploy_s: null, running_s: null, model_s: 0, wall_s: 0 },
  };
  let socket: ServerSession | null = null;
  let done = false;
  const ended = (out: { observation: Record<string, unknown>; reward: number | null; done: boolean }) => {
    if (!out.done) return false;
    const o = out.observation;
    rec.end_reason = typeof o.end_reason === 'string' ? o.end_reason : null;
    const t = o.timings as Record<string, number> | undefined;
    if (t) Object.assign(rec.timings, { queued_s: t.queued_s ?? null, deploy_s: t.deploy_s ?? null, running_s: t.running_s ?? null });
    if (o.failure || out.reward === null) {
      const f = (o.failure as Record<string, unknown> | undefined) ?? {};
      rec.failure = {
        kind: 'env',
        reason: String(f.reason ?? rec.end_reason ?? 'no_reward'),
        message: String(f.message ?? 'the episode ended without a reward'),
        detail: f,
      };
    } else {
      rec.reward = out.reward;
      rec.scores = (o.scores as Record<string, number> | undefined) ?? null;
    }
    return true;
  };
  const step = async (name: string, args: unknown, modelTurn: number) => {
    // The model's own mistakes are its tool errors, as the server answers a bad argument: a call
    // too large for a frame is not sent (the server would close the session), and a call the
    // server refuses as malformed (an empty tool name) is answered to the model; the episode goes on.
    const bytes = Buffer.byteLength(JSON.stringify({ type: 'step', data: { type: 'call_tool', tool_name: name, arguments: args } }));
    let out: ReturnType<typeof observationOf>;
    if (bytes > MAX_FRAME_BYTES) {
      out = modelMistake(name, `the call is ${bytes} bytes of JSON, over the ${MAX_FRAME_BYTES / 1024 / 1024} MiB a step may have: not sent`);
    } else {
      const frame = await socket!.call(name, args, { timeoutMs: s.toolTimeoutMs + REPLY_SLACK_MS, what: '--tool-timeout', signal });
      out =
        frame.type === 'error' && frame.data?.code === 'VALIDATION_ERROR'
          ? modelMistake(name, String(frame.data.message))
          : observationOf(frame, `tool ${name}`);
    }
    const err = out.observation.error as { error_type?: string } | null | undefined;
    const result = out.observation.result as { is_error?: boolean } | null | undefined;
    rec.tool_calls.push({
      model_turn: modelTurn,
      name,
      arguments: bytes > MAX_FRAME_BYTES ? `[${bytes} bytes, not sent]` : args,
      is_error: Boolean(err) || Boolean(result?.is_error),
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
    const reset = observationOf(
      await socket.reset(
        { split: task.split, index: task.index, reset_timeout_s: s.resetTimeoutMs / 1000 },
        { timeoutMs: s.resetTimeoutMs + REPLY_SLACK_MS, what: '--reset-timeout', signal },
      ),
      'reset',
    );
    rec.episode_id = typeof reset.observation.episode_id === 'string' ? reset.observation.episode_id : null;
    while (!done) {
      if (rec.model_turns >= s.maxTurns) {
        rec.turns_exhausted = true;
        await endTurns(null, rec.model_turns);
        break;
      }
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
