/**
 * A play's host for its unit tests: what an episode gives a play (plays/play.ts), recorded. Its
 * moves (next turn, scores settled, failures, the ending) change `state` as the episode would
 * and return the episode's replies (replies.ts), so a play's answers can be asserted exactly.
 */
import pino from 'pino';
import type { LoadedBundle, Task, ToolSpec } from '../../../src/bundle/index.js';
import type { EnvInspector } from '../../../src/episodes/diagnosis.js';
import type { EnvCaller } from '../../../src/episodes/env-client.js';
import type { PlayEnv, PlayHost } from '../../../src/episodes/plays/index.js';
import { endedOutcome, nextTurnOutcome, scoredOutcome } from '../../../src/episodes/replies.js';
import { makeReward } from '../../../src/episodes/reward.js';
import { scoreOf } from '../../../src/episodes/scoring.js';
import { Metrics } from '../../../src/metrics.js';
import type { EnvHandle } from '../../../src/sandbox/sandbox.js';

export const TIMINGS = { queued_s: 0, deploy_s: 0, running_s: 1 };
export const ECHO: ToolSpec = { name: 'echo', description: 'echoes', input_schema: { type: 'object' } } as ToolSpec;
export const SHELL_TOOL: ToolSpec = { name: 'exec_command', description: 'runs', input_schema: { type: 'object' } } as ToolSpec;

export function task(over: Partial<Task> = {}): Task {
  return { task_id: 't1', split: 'train', index: 0, toolset: 'main', turns: ['first', 'second'], max_turns: 2, data: { x: 1 }, ...over } as Task;
}

/** a bundle of one toolset `main` (with `builtin` shell tools if asked) and one env of `kind` */
export function bundle(opts: { builtin?: boolean; kind?: 'http' | 'shell'; harness?: unknown } = {}): LoadedBundle {
  return {
    toolsets: { main: opts.builtin ? [ECHO, SHELL_TOOL] : [ECHO] },
    manifest: {
      toolsets: { main: { builtin: opts.builtin ? ['shell'] : [] } },
      scores: { score: { min: 0, max: 1 } },
      ...(opts.harness ? { harness: opts.harness } : {}),
    },
    envOf: () => ({ name: 'env', spec: { kind: opts.kind ?? 'http' } }),
  } as unknown as LoadedBundle;
}

export interface Recorded {
  turn: number;
  done: boolean;
  failure: { reason: string; phase: string; message: string; extra?: unknown } | null;
  scores: Record<string, number> | null;
  reward: number | null;
  endReason: string | null;
  verdictReason: string;
}

export function fakeHost(t: Task, b: LoadedBundle, caller: EnvCaller | null = null): { host: PlayHost; state: Recorded; abort: AbortController } {
  const state: Recorded = { turn: 1, done: false, failure: null, scores: null, reward: null, endReason: null, verdictReason: 'env_crashed' };
  const abort = new AbortController();
  const ending = (toolName: string | null) =>
    endedOutcome(
      { reward: state.reward, endReason: state.endReason as never, failure: state.failure as never, scores: state.scores, timings: TIMINGS },
      toolName,
    );
  const fail: PlayHost['fail'] = (reason, phase, message, toolName, extra) => {
    if (!state.done) Object.assign(state, { done: true, endReason: 'env_failed', failure: { reason, phase, message, ...(extra ? { extra } : {}) } });
    return ending(toolName);
  };
  const inspector = {
    judgeCall: async () => 'ask_env',
    verdict: async () => ({ reason: state.verdictReason, what: 'the env exited', extra: {} }),
  } as unknown as EnvInspector;
  const host: PlayHost = {
    id: 'ep-1',
    task: t,
    seed: 7,
    bundle: b,
    log: pino({ level: 'silent' }),
    metrics: new Metrics({ running: () => 0, waiting: () => ({ high: 0, normal: 0, low: 0 }), capacity: () => 1, networks: () => 0 }, 'openenv_', false),
    reward: makeReward(undefined),
    settings: { toolTimeoutMs: 1000 },
    turn: () => state.turn,
    ended: () => state.done,
    signal: abort.signal,
    callSignal: () => abort.signal,
    inspector,
    now: () => 1000,
    connect: () => caller!,
    envResetCallMs: () => 5000,
    nextTurn: (toolName) => {
      state.turn++;
      return nextTurnOutcome(toolName, state.turn, t.turns[state.turn - 1]!);
    },
    settleScores: (raw, reason, phase) => {
      const s = scoreOf(raw, b.manifest.scores, makeReward(undefined));
      if ('reason' in s) return fail(s.reason, phase, s.message, null);
      Object.assign(state, { done: true, scores: s.scores, reward: s.reward, endReason: reason });
      return scoredOutcome(s.reward, s.scores, reason, TIMINGS);
    },
    fail,
    failFromEnv: async (phase, message, toolName) => fail(state.verdictReason as never, phase, `${message} (the env exited)`, toolName),
    endedOutcome: ending,
    refuseUnlessRunning: () => undefined,
    reportEnd: async (build) => build(),
    verifierRan: () => undefined,
    harnessRan: () => undefined,
  };
  return { host, state, abort };
}

/** an env caller answering each path from `answers` (a function of the body, or a throw) and recording the calls */
export function fakeCaller(
  answers: Record<string, (body: unknown) => { status: number; body: unknown }>,
): EnvCaller & { calls: { path: string; body: unknown }[] } {
  const calls: { path: string; body: unknown }[] = [];
  return {
    calls,
    async request(_method: string, path: string, body: unknown) {
      calls.push({ path, body });
      const answer = answers[path];
      if (!answer) throw new Error(`no answer for ${path}`);
      return answer(body);
    },
  } as EnvCaller & { calls: { path: string; body: unknown }[] };
}

/** a host over an http env whose /reset answers 200 and whose /finish scores `score` */
export function scoringEnv(t: Task, score: number) {
  const caller = fakeCaller({ '/reset': () => ({ status: 200, body: {} }), '/finish': () => ({ status: 200, body: { scores: { score } } }) });
  return { ...fakeHost(t, bundle(), caller), caller };
}

export function playEnvOf(over: Partial<PlayEnv> = {}): PlayEnv {
  return {
    handle: { baseUrl: 'http://env', secret: 's' } as unknown as EnvHandle,
    exec: null,
    shell: null,
    agentUser: null,
    builtin: null,
    companion: async () => {
      throw new Error('no companion');
    },
    ...over,
  };
}
