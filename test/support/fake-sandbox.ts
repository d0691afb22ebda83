/**
 * The episode machinery's unit-test rig: an in-memory sandbox whose deploys, teardowns and env
 * answers the test scripts, with no process, container or socket (its images build at once, it
 * holds nothing ahead of demand unless a test makes its stock's stop() wait). Time is the test's too: run it
 * under vi.useFakeTimers() and every clock of the rig (Date.now) and timer moves only when the
 * test advances it. process-sandbox.ts runs real env processes instead, for the server tests.
 */
import { afterEach, beforeAll, beforeEach, vi } from 'vitest';
import { loadBundle, type LoadedBundle } from '../../src/bundle/index.js';
import { abortError } from '../../src/util/abort.js';
import { Admission } from '../../src/episodes/capacity/admission.js';
import { DeployLimiter } from '../../src/episodes/capacity/deploy-limiter.js';
import type { WarmPool } from '../../src/episodes/capacity/pool.js';
import { EnvCallError, type EnvCaller, type EnvResponse } from '../../src/episodes/env-client.js';
import type { EpisodeDeps, EpisodeObserver, EpisodeSettings } from '../../src/episodes/episode.js';
import { makeReward } from '../../src/episodes/reward.js';
import { Metrics } from '../../src/metrics.js';
import type {
  AheadOfDemand,
  DeployRequest,
  EnvDiagnosis,
  EnvHandle,
  EnvImages,
  EnvSpec,
  Sandbox,
  SweepResult,
  TeardownOptions,
} from '../../src/sandbox/sandbox.js';
import { FIXTURE_BUNDLE } from './app.js';
import { captureLog, type CapturedLog } from './log-capture.js';

/** One call an env got: its path and body, and the episode's signal for it. */
export interface EnvCall {
  envId: string;
  path: string;
  body: any;
  signal?: AbortSignal;
}

/** How a fake env answers a call (default: FakeSandbox.answer, the fixture's echo env). */
export type EnvBehaviour = (call: EnvCall) => Promise<EnvResponse>;

interface FakeEnv {
  handle: EnvHandle;
  gone: AbortController;
  state: EnvDiagnosis;
}

const ok = (body: unknown): EnvResponse => ({ status: 200, body });

export class FakeSandbox implements Sandbox {
  /** ids deployed, in order (a deploy that failed or was aborted is not here) */
  readonly deployed: string[] = [];
  /** ids torn down, in order */
  readonly tornDown: string[] = [];
  /** every call any env got */
  readonly calls: EnvCall[] = [];
  readonly envs = new Map<string, FakeEnv>();
  /** ids the engine still lists that no deploy made here (the reconciler's strays) */
  readonly strays = new Set<string>();
  diagnoses = 0;
  /** runs inside every deploy before it succeeds: await something to hold it, throw to fail it */
  beforeDeploy: (req: DeployRequest) => Promise<void> = async () => {};
  /**
   * Runs every teardown of an id that may have resources: `envRemoved()` is the sandbox telling
   * that no env runs any more; throw to fail the removal. Default: removed at once.
   */
  onTeardown: (id: string, envRemoved: () => void) => Promise<void> = async (_id, envRemoved) => envRemoved();
  behaviour: EnvBehaviour = (call) => this.answer(call);
  /** what the drain's stock.stop() waits for (default: nothing made ahead of demand) */
  onUnprepare: () => Promise<void> = async () => {};
  /** what happened when, for tests that assert an order of events */
  readonly events: string[] = [];

  async ping(): Promise<void> {}
  readonly images: EnvImages = {
    build: async (req) => `fake/${req.bundleName}-${req.envName}:test`,
    check: async () => {},
  };
  /** nothing made ahead of demand, but the drain's stop() waits for onUnprepare */
  readonly stock: AheadOfDemand = {
    start: () => {},
    stop: async () => {
      this.events.push('unprepare');
      await this.onUnprepare();
      this.events.push('unprepared');
    },
    stats: () => ({ size: 0, ready: 0, making: 0, made: 0, taken: 0, missed: 0, recycled: 0, out: 0 }),
  };
  async sweep(): Promise<SweepResult> {
    return { containers: [], networks: [] };
  }
  networksInUse(): number {
    return this.envs.size;
  }
  async close(): Promise<void> {}

  async deploy(req: DeployRequest): Promise<EnvHandle> {
    if (req.signal?.aborted) throw abortError('aborted');
    await this.beforeDeploy(req);
    if (req.signal?.aborted) throw abortError('aborted');
    const gone = new AbortController();
    const handle: EnvHandle = {
      envId: req.envId,
      baseUrl: `fake://${req.envId}`,
      containerId: `fake-${req.envId}`,
      networkId: `net-${req.envId}`,
      gone: gone.signal,
    };
    this.envs.set(req.envId, { handle, gone, state: { running: true, exitCode: null, oomKilled: false, logTail: '' } });
    this.deployed.push(req.envId);
    return handle;
  }

  async teardown(episodeId: string, opts: TeardownOptions = {}): Promise<void> {
    let told = false;
    const envRemoved = () => {
      if (told) return;
      told = true;
      this.envs.get(episodeId)?.gone.abort(new Error('the env was removed'));
      this.envs.delete(episodeId);
      opts.onEnvRemoved?.();
    };
    this.events.push(`teardown ${episodeId}`);
    await this.onTeardown(episodeId, envRemoved);
    envRemoved();
    this.strays.delete(episodeId);
    this.tornDown.push(episodeId);
    this.events.push(`torn down ${episodeId}`);
  }

  async diagnose(handle: EnvHandle): Promise<EnvDiagnosis> {
    this.diagnoses++;
    const env = this.envs.get(handle.envId);
    if (!env) throw new Error(`no env ${handle.envId}`);
    return { ...env.state };
  }

  async listEnvIds(): Promise<string[]> {
    return [...this.envs.keys(), ...this.strays];
  }

  /** The env exits (or is OOM-killed) behind the episode's back: its `gone` fires, diagnose says so. */
  kill(envId: string, how: { exitCode?: number; oomKilled?: boolean; logTail?: string } = {}): void {
    const env = this.envs.get(envId);
    if (!env) throw new Error(`no env ${envId}`);
    env.state = { running: false, exitCode: how.exitCode ?? 3, oomKilled: how.oomKilled ?? false, logTail: how.logTail ?? 'bye' };
    env.gone.abort(new Error(`the env exited (code ${env.state.exitCode})`));
  }

  /** How the episode reaches an env: its calls go to `behaviour`, and fail as a dead env's would once it is gone. */
  connect = (handle: EnvHandle): EnvCaller => ({
    request: async (_method, path, body, _timeoutMs, signal) => {
      const call = { envId: handle.envId, path, body, signal };
      this.calls.push(call);
      if (!this.envs.get(handle.envId)?.state.running) throw new EnvCallError('unreachable', `env unreachable on ${path}: ECONNREFUSED`);
      return this.behaviour(call);
    },
  });

  /** The fixture's echo env, in memory: echo, fail, finish_now, and /finish scoring the task's finish_score. */
  async answer(call: EnvCall): Promise<EnvResponse> {
    if (call.path === '/reset') return ok({});
    if (call.path === '/finish') return ok({ scores: { quality: 0.5, steps: 0 } });
    const { name, arguments: args } = call.body as { name: string; arguments: Record<string, unknown> };
    if (name === 'echo') return ok({ text: String(args.text), result: { echoed: args.text } });
    if (name === 'fail') return ok({ text: String(args.message), is_error: true });
    if (name === 'finish_now') return ok({ text: 'finished', done: true, scores: { quality: args.score, steps: 1 } });
    return { status: 404, body: { error: 'tool_not_found', message: `no tool ${name}` } };
  }
}

export interface Rig {
  bundle: LoadedBundle;
  sandbox: FakeSandbox;
  admission: Admission;
  deploys: DeployLimiter;
  metrics: Metrics;
  log: CapturedLog;
  deps: EpisodeDeps;
  spec: EnvSpec;
}

export const RIG_SETTINGS: EpisodeSettings = { resetTimeoutMs: 10_000, splitLanes: new Map(), toolTimeoutMs: 5_000, episodeTimeoutMs: 60_000, maxSteps: 20 };

/** The fixture bundle, loaded once (its tasks, toolsets, scores). */
let fixture: Promise<LoadedBundle> | null = null;
export function fixtureBundle(): Promise<LoadedBundle> {
  return (fixture ??= loadBundle(FIXTURE_BUNDLE));
}

/**
 * For a describe block of rig tests: the fixture loaded first (with real timers), then every test
 * on a fake clock that starts at the same instant and moves only when the test advances it.
 */
export function onRigClock(): void {
  beforeAll(async () => {
    await fixtureBundle();
  });
  beforeEach(() => {
    vi.useFakeTimers({ now: new Date('2026-01-01T00:00:00Z') });
  });
  afterEach(() => {
    vi.useRealTimers();
  });
}

/** A counter's or histogram count's value for `labels` (0 when never touched). */
export async function metricValue(
  m: { get(): Promise<{ values: { labels: Record<string, unknown>; value: number; metricName?: string }[] }> },
  labels: Record<string, string> = {},
  suffix = '',
): Promise<number> {
  const { values } = await m.get();
  const v = values.find((x) => (suffix === '' || x.metricName?.endsWith(suffix)) && Object.entries(labels).every(([k, l]) => x.labels[k] === l));
  return v?.value ?? 0;
}

export async function makeRig(
  opts: { capacity?: number; maxWaiting?: number; deployLimit?: number; settings?: Partial<EpisodeSettings>; observer?: EpisodeObserver; pool?: WarmPool } = {},
): Promise<Rig> {
  const bundle = await fixtureBundle();
  const sandbox = new FakeSandbox();
  const admission = new Admission(opts.capacity ?? 2, opts.maxWaiting ?? 10, () => Date.now());
  const deploys = new DeployLimiter({ limit: opts.deployLimit ?? 4 });
  const metrics = new Metrics(
    { running: () => admission.activeCount, waiting: () => admission.waitingByLane(), capacity: () => admission.capacity, networks: () => 0 },
    'openenv_',
    false,
  );
  const log = captureLog({ level: 'debug' });
  const spec: EnvSpec = {
    name: 'echo',
    image: 'fake/echo',
    port: 8000,
    readyPath: '/health',
    deployTimeoutMs: 30_000,
    resources: { memoryMb: 128, cpus: 0.5, pids: 64 },
    environment: {},
  };
  const deps: EpisodeDeps = {
    bundle,
    sandbox,
    admission,
    deploys,
    pool: opts.pool,
    envSpec: async () => spec,
    settings: { ...RIG_SETTINGS, ...opts.settings },
    reward: makeReward(bundle.manifest.reward),
    log: log.logger,
    metrics,
    observer: opts.observer,
    connect: sandbox.connect,
    now: () => Date.now(),
  };
  return { bundle, sandbox, admission, deploys, metrics, log, deps, spec };
}

/** A promise and the function that settles it, to hold a fake deploy, teardown or env answer. */
export function gate<T = void>(): { promise: Promise<T>; open: (v: T) => void; fail: (e: Error) => void } {
  let open!: (v: T) => void;
  let fail!: (e: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    open = res;
    fail = rej;
  });
  return { promise, open, fail };
}
