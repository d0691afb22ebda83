/**
 * The env-tools play: an http env's own tools, each call a POST of /tools/call to the env; a turn
 * ends on end_turn (or its time budget), and the episode is scored by the env's /finish (or by a
 * tool's reply that says it is done). A shell env (no http) has no client: its tools are all
 * built in (shell-toolset.ts) and it is scored by a verifier (verified-task.ts).
 */
import { END_TURN, type ToolSpec } from '../../bundle/index.js';
import { invalidScoresMessage } from '../../failures.js';
import { keptConnection } from '../../util/http-request.js';
import { FinishReplySchema, ToolCallReplySchema, type EnvResetRequest, type EnvToolCallRequest } from '../../protocol/env-contract.js';
import type { CallObservation, Ending, StepOutcome } from '../../protocol/observations.js';
import { fmtS } from '../../util/time.js';
import { EnvCallError, EnvClient, type EnvCaller } from '../env-client.js';
import { textResult, toolError } from '../outcomes.js';
import { withEnding, type EndedOutcome } from '../replies.js';
import type { TurnEnd } from '../verified-task.js';
import type { EpisodePlay, FinishReason, PlayEnv, PlayHost } from './play.js';

export class EnvToolsPlay implements EpisodePlay {
  readonly tools: ToolSpec[];
  readonly clocked = true;
  /** the env's HTTP client (null for a shell env) */
  private client: EnvCaller | null = null;

  constructor(protected readonly host: PlayHost) {
    this.tools = host.bundle.toolsets[host.task.toolset] ?? [];
  }

  /** Connects to an http env and calls its /reset with the task's data and the seed. */
  async attach(env: PlayEnv): Promise<void> {
    const h = this.host;
    this.client = h.bundle.envOf(h.task).spec.kind === 'shell' ? null : h.connect(env.handle);
    if (!this.client) return;
    const body: EnvResetRequest = { task_id: h.task.task_id, data: h.task.data, seed: h.seed };
    const res = await this.client.request('POST', '/reset', body, h.envResetCallMs(), h.callSignal());
    if (res.status !== 200) {
      throw new EnvCallError('bad_response', `the env answered /reset with HTTP ${res.status}: ${JSON.stringify(res.body)?.slice(0, 300)}`, res.status);
    }
  }

  onReset(): void {}
  onRunning(): void {}
  onCall(): void {}

  async call(name: string, args: Record<string, unknown>): Promise<StepOutcome<CallObservation | Ending>> {
    const h = this.host;
    const started = h.now();
    const timeoutMs = h.settings.toolTimeoutMs;
    let res;
    try {
      res = await this.client!.request('POST', '/tools/call', { name, arguments: args } satisfies EnvToolCallRequest, timeoutMs, h.callSignal());
    } catch (e) {
      h.metrics.toolCall.observe({ outcome: 'failed' }, (h.now() - started) / 1000);
      if (h.ended()) return h.endedOutcome(name); // the episode timed out or closed meanwhile
      const verdict = await h.inspector.judgeCall(e);
      if (verdict === 'ask_env') return h.failFromEnv('tool', `tool \`${name}\` failed: ${(e as Error).message}`, name);
      // an answer too large to read is the tool's failure, not the env's end: the episode goes on
      if ('tool_error' in verdict) return toolError(name, verdict.tool_error, `tool \`${name}\` failed: ${(e as Error).message}`);
      return h.fail(verdict.reason, 'tool', `tool \`${name}\` did not answer within tool_timeout (${fmtS(timeoutMs)})`, name);
    }
    h.metrics.toolCall.observe({ outcome: res.status === 200 ? 'ok' : 'error' }, (h.now() - started) / 1000);
    if (res.status === 404 || res.status === 400) {
      const body = (res.body ?? {}) as { error?: string; message?: string };
      const kind = res.status === 404 ? 'tool_not_found' : 'invalid_args';
      return toolError(name, kind, body.message ?? body.error ?? `the env refused the call (HTTP ${res.status})`);
    }
    if (res.status !== 200) {
      return toolError(name, 'execution_error', `the env answered HTTP ${res.status}: ${JSON.stringify(res.body)?.slice(0, 500)}`);
    }
    const parsed = ToolCallReplySchema.safeParse(res.body);
    if (!parsed.success) {
      return toolError(name, 'transport_error', 'the env answered the tool call with a malformed body');
    }
    const reply = parsed.data;
    const text = reply.text ?? (typeof reply.result === 'string' ? reply.result : JSON.stringify(reply.result ?? null));
    // A tool's own error (the env answered is_error) is the model's to read: it stays in
    // `result` with is_error true, as OpenEnv's CallToolObservation puts it; `error` is kept for
    // what went wrong around the tool (bad arguments, unknown tool, timeout, transport).
    const observation: CallObservation = { tool_name: name, result: textResult(text, reply.result ?? null, reply.is_error === true), error: null };
    if (reply.done) return withEnding({ observation, reward: null, done: false }, h.settleScores(reply.scores, 'finished', 'tool'));
    return { observation, reward: null, done: false };
  }

  /** The next turn's prompt, or after the last turn the env's scores. */
  async endTurn(answer: string | null): Promise<StepOutcome<CallObservation | Ending>> {
    if (this.host.turn() < this.host.task.turns.length) return this.host.nextTurn(END_TURN);
    const ended = await this.finish('turns_ended');
    return {
      observation: { tool_name: END_TURN, result: textResult('The last turn ended; the episode is scored.', { answer }), error: null, ...ended.observation },
      reward: ended.reward,
      done: true,
    };
  }

  /** Asks the env for its scores and ends the episode. */
  async finish(reason: FinishReason): Promise<EndedOutcome> {
    const h = this.host;
    const timeoutMs = h.settings.toolTimeoutMs;
    let res;
    try {
      res = await this.client!.request('POST', '/finish', {}, timeoutMs, h.callSignal());
    } catch (e) {
      if (h.ended()) return h.endedOutcome(END_TURN);
      const verdict = await h.inspector.judgeCall(e);
      if (verdict === 'ask_env' || 'tool_error' in verdict) {
        return h.failFromEnv('finish', `the env failed to score the episode: ${(e as Error).message}`, END_TURN);
      }
      return h.fail(verdict.reason, 'finish', `the env did not answer /finish within tool_timeout (${fmtS(timeoutMs)})`, END_TURN);
    }
    const parsed = FinishReplySchema.safeParse(res.body);
    if (res.status !== 200 || !parsed.success) {
      return h.fail('invalid_scores', 'finish', invalidScoresMessage('no_scores_reply', `HTTP ${res.status}`), END_TURN);
    }
    return h.settleScores(parsed.data.scores, reason, 'finish');
  }

  /** The turn ends (its prompt the next call's answer), or after the task's budget or the last turn, the episode. */
  budgetPassed(how: TurnEnd): Promise<StepOutcome<CallObservation | Ending>> {
    const endsEpisode = how === 'episode_end' || this.host.turn() === this.host.task.turns.length;
    return endsEpisode ? this.finish('turns_ended') : Promise.resolve(this.host.nextTurn(END_TURN));
  }

  /** A harness's run ended: the env scores the episode. */
  runEnded(): Promise<EndedOutcome> {
    return this.finish('turns_ended');
  }

  progress(): null {
    return null;
  }

  interrupt(_why: string): void {}
  onTeardown(): void {}
  async close(): Promise<void> {}
}

/** the default connection: an EnvClient over HTTP to the env's baseUrl */
export function httpEnvClient(handle: PlayEnv['handle']): EnvCaller {
  return new EnvClient(handle.baseUrl, handle.secret, keptConnection(handle));
}
