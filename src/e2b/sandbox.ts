/**
 * One E2B sandbox: an episode of another kind. It holds an env slot from the queue (admission's
 * cap and FIFO lanes, within the reset timeout) and an env deployed for it through an env lease,
 * exactly as an episode does (capacity/env-lease.ts): its own network, the lock-down, gVisor when
 * asked, the storage bound, labelled for the reconciler and the reaper. Its life: waiting →
 * deploying → running (↔ paused: the engine's pause) → done, ended by its client's kill, its
 * timeout (kept by a timer; set-timeout and refresh move it), its container's death, or the
 * server's drain; whatever ends it, it ends once and gives its slot back. What it cost is read as
 * its teardown starts; the console sees it as an episode (transport e2b) whose steps are the
 * sandbox's commands and file operations.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { isAbortError } from '../util/abort.js';
import { CapacityError, ShuttingDownError } from '../errors.js';
import { makeFailure } from '../failures.js';
import type { Metrics } from '../metrics.js';
import { EnvLease, type EnvLeaseDeps } from '../episodes/capacity/env-lease.js';
import { EpisodeCostMeter } from '../episodes/episode-cost.js';
import type { Observed } from '../console/history.js';
import type { Action } from '../protocol/frames.js';
import { DEFAULT_LANE } from '../protocol/lanes.js';
import type { EndReason, EpisodeCost, Failure, Phase, StepOutcome, Timings } from '../protocol/observations.js';
import type { ContainerExec } from '../sandbox/container-exec.js';
import type { EgressDestination, EnvHandle, EnvPausing, EnvShell, EnvSpec, EnvUsage } from '../sandbox/sandbox.js';
import { seconds3 } from '../util/time.js';
import { E2bApiError } from './errors.js';
import { ProcessTable, type ProcessRecord } from './processes.js';
import type { ModelAccess } from '../episodes/model-access.js';
import type { GatewayEnd } from '../gateway/index.js';

/** What the console hears of a sandbox (the web console's history is one). */
export interface SandboxObserver {
  onCreated?(s: Observed): void;
  onReset?(s: Observed, outcome: StepOutcome): void;
  onStep?(s: Observed, action: Action, outcome: StepOutcome, startedAt: number): void;
  onEnded?(s: Observed): void;
}

export interface SandboxDeps extends EnvLeaseDeps {
  shell: EnvShell;
  usage?: EnvUsage;
  pausing?: EnvPausing;
  metrics: Metrics;
  log: Logger;
  observer?: SandboxObserver;
  /** --e2b-model-door: the model gateway's door on its network (docs/e2b.md) */
  modelDoor?: { access: ModelAccess; hostName: string | null };
}

/** how a sandbox ended */
export type SandboxEnd = 'killed' | 'timeout' | 'failed' | 'shutdown';

export type SandboxPhase = 'waiting' | 'deploying' | 'running' | 'paused' | 'done';

export interface SandboxParams {
  templateId: string;
  metadata: Record<string, string>;
  envVars: Record<string, string>;
  /** envd calls need its access token (X-Access-Token); false: the sandbox id alone admits them */
  secure: boolean;
  /** from its start, until it is killed */
  timeoutMs: number;
  /** the longest it waits for a slot */
  queueTimeoutMs: number;
  allowInternetAccess: boolean | null;
  network: { allowOut?: string[]; denyOut?: string[] } | null;
  /** what it may reach: its settings within --egress-allow (egress.ts); empty: nothing outside its network */
  egress: EgressDestination[];
}

/** 20 characters of [a-z0-9]: E2B's ids are DNS labels, and this one is not guessed (about 103 bits) */
export function newSandboxId(): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  const bytes = randomBytes(20);
  let id = '';
  for (const b of bytes) id += alphabet[b % 36];
  return id;
}

export class E2bSandbox {
  readonly id = newSandboxId();
  readonly accessToken = randomBytes(24).toString('hex');
  readonly createdAt: number;
  phase: SandboxPhase = 'waiting';
  /** its ops so far (the console's steps) */
  ops = 0;
  /** when it started running, and when it ends unless told otherwise */
  startedAt: number | null = null;
  endAt: number;
  ended: SandboxEnd | null = null;
  failure: Failure | null = null;
  spec: EnvSpec | null = null;
  image: string | null = null;
  readonly tornDown: Promise<void>;
  processes: ProcessTable | null = null;
  private exec_: ContainerExec | null = null;
  private lease: EnvLease | null = null;
  private readonly abort = new AbortController();
  private timer: NodeJS.Timeout | null = null;
  private resolveTornDown!: () => void;
  private teardownStarted = false;
  /** its container is paused on the engine */
  private frozen = false;
  private meter: EpisodeCostMeter | null = null;
  private readonly t: { queued?: number; running?: number; ended?: number } = {};
  private readonly log: Logger;
  private readonly now: () => number;
  /** what the console reads (history.ts's Observed) */
  readonly view: Observed;

  constructor(
    private readonly deps: SandboxDeps,
    readonly params: SandboxParams,
  ) {
    this.now = deps.now ?? Date.now;
    this.createdAt = this.now();
    this.endAt = this.createdAt + params.timeoutMs;
    this.log = deps.log.child({ sandbox_id: this.id, template_id: params.templateId });
    this.tornDown = new Promise((r) => (this.resolveTornDown = r));
    this.view = this.makeView();
    this.notify((o) => o.onCreated?.(this.view));
  }

  /** it holds an env slot now (from its grant until its env is removed) */
  get holdsSlot(): boolean {
    return this.lease?.holdsSlot ?? false;
  }

  /** its env, once deployed */
  get handle(): EnvHandle | null {
    return this.lease?.handle ?? null;
  }

  get templateId(): string {
    return this.params.templateId;
  }

  get state(): 'running' | 'paused' {
    return this.phase === 'paused' ? 'paused' : 'running';
  }

  get live(): boolean {
    return this.phase === 'running' || this.phase === 'paused';
  }

  /** the env's container, for envd's calls; throws an E2bApiError when the sandbox cannot take them */
  get exec(): ContainerExec {
    if (this.phase === 'paused') throw new E2bApiError(502, `sandbox ${this.id} is paused: resume it (Sandbox.connect) before calling it`);
    if (this.phase !== 'running' || !this.exec_)
      throw new E2bApiError(502, `sandbox ${this.id} is not running (it was killed, timed out or is still starting)`);
    return this.exec_;
  }

  private notify(call: (o: SandboxObserver) => void): void {
    const o = this.deps.observer;
    if (!o) return;
    try {
      call(o);
    } catch (e) {
      this.log.error({ err: (e as Error)?.message }, 'a sandbox observer threw; ignored');
    }
  }

  /**
   * Waits for a slot and deploys `spec` (its image there: templates.ts). Rejects with an
   * E2bApiError (capacity: 429 with Retry-After; the drain: 503; a failed deploy: 500) or an
   * AbortError when `signal` (the client gone) aborts first; the sandbox is then torn down.
   */
  async start(resolveSpec: (signal: AbortSignal) => Promise<EnvSpec>, clientGone: AbortSignal): Promise<void> {
    const signal = AbortSignal.any([this.abort.signal, clientGone]);
    const { deps } = this;
    try {
      const spec = await resolveSpec(signal);
      this.spec = spec;
      this.image = spec.image;
      this.lease = new EnvLease({ ...deps, pool: undefined, envSpec: () => Promise.resolve(spec) }, this.id, spec.name, this.log);
      this.meter = new EpisodeCostMeter({
        usage: deps.usage,
        env: () => ({ handle: this.lease?.handle ?? null, since: this.lease?.envSince ?? null }),
        now: this.now,
        log: this.log,
        metrics: deps.metrics,
        split: 'e2b',
      });
      this.log.info({ event: 'sandbox_queued', waiting: deps.admission.waitingCount, active: deps.admission.activeCount }, 'sandbox waits for a slot');
      await this.lease.takeSlot({ queueTimeoutMs: this.params.queueTimeoutMs, signal, lane: DEFAULT_LANE });
      this.t.queued = this.now();
      deps.metrics.queueWait.observe({ lane: DEFAULT_LANE }, (this.t.queued - this.createdAt) / 1000);
      this.phase = 'deploying';
      const door = deps.modelDoor?.access.sandboxDoor(this.id, { hostName: deps.modelDoor.hostName, isLive: () => this.phase !== 'done' }) ?? undefined;
      const handle = await this.lease.env(signal, door, this.params.egress);
      this.attach(handle);
    } catch (e) {
      this.t.queued ??= this.now();
      const err = this.startFailure(e, signal);
      const deployFailed = err instanceof E2bApiError && err.status >= 500 && err.status !== 503;
      this.end(deployFailed ? 'failed' : 'killed', deployFailed ? makeFailure('engine_error', 'deploy', err.message, this.ids) : null);
      void this.teardown();
      throw err;
    }
  }

  private startFailure(e: unknown, signal: AbortSignal): Error {
    if (e instanceof E2bApiError) return e;
    if (e instanceof CapacityError) {
      return new E2bApiError(429, `${e.message} (the server runs at most --max-concurrent-envs sandboxes and episodes at once)`, e.capacity.retry_after_s);
    }
    if (e instanceof ShuttingDownError) return new E2bApiError(503, 'the server is shutting down: create the sandbox on another one');
    if (isAbortError(e) || signal.aborted) return e instanceof Error ? e : new Error(String(e));
    return new E2bApiError(500, `the sandbox could not be deployed: ${(e as Error)?.message ?? String(e)}`);
  }

  private attach(handle: EnvHandle): void {
    this.exec_ = this.deps.shell.exec(handle);
    this.processes = new ProcessTable(this.exec_, (r) => this.onProcessEnded(r), this.now);
    this.phase = 'running';
    this.t.running = this.now();
    this.startedAt = this.t.running;
    this.endAt = this.t.running + this.params.timeoutMs;
    this.armTimer();
    this.deps.metrics.deploy.observe((this.t.running - this.t.queued!) / 1000);
    handle.gone?.addEventListener('abort', () => void this.onGone((handle.gone!.reason as Error)?.message ?? 'its container is gone'), { once: true });
    this.log.info({ event: 'sandbox_running', image: this.image, queued_s: this.timings().queued_s, deploy_s: this.timings().deploy_s }, 'sandbox running');
    const what = this.params.metadata && Object.keys(this.params.metadata).length ? ` metadata ${JSON.stringify(this.params.metadata)}` : '';
    this.notify((o) =>
      o.onReset?.(this.view, {
        observation: {
          messages: [{ role: 'system', content: `E2B sandbox ${this.id}: template ${this.templateId}, image ${this.image}${what}` }],
          tools: [],
        } as never,
        reward: null,
        done: false,
      }),
    );
  }

  private async onGone(why: string): Promise<void> {
    if (!this.live) return;
    this.log.warn({ event: 'sandbox_gone', why }, 'the sandbox container died');
    await this.close('failed', makeFailure('env_crashed', 'tool', `the sandbox's container ended: ${why}`, this.ids));
  }

  private armTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.onTimeout(), Math.max(0, this.endAt - this.now()));
    this.timer.unref?.();
  }

  private async onTimeout(): Promise<void> {
    if (!this.live) return;
    this.log.info({ event: 'sandbox_timeout' }, 'the sandbox reached its timeout');
    await this.close(
      'timeout',
      makeFailure(
        'episode_timeout',
        'tool',
        `the sandbox reached its timeout (${seconds3(this.params.timeoutMs)} s from its start, or as set since)`,
        this.ids,
      ),
    );
  }

  /** it ends `ms` from now (set-timeout, connect, refresh) */
  setTimeoutMs(ms: number): void {
    if (!this.live) throw new E2bApiError(404, `sandbox ${this.id} does not exist any more`);
    this.endAt = this.now() + ms;
    this.armTimer();
  }

  async pause(): Promise<void> {
    if (this.phase === 'paused') throw new E2bApiError(409, `sandbox ${this.id} is already paused`);
    if (this.phase !== 'running' || !this.lease?.handle) throw new E2bApiError(404, `sandbox ${this.id} does not exist any more`);
    if (!this.deps.pausing) throw new E2bApiError(501, 'pausing does not exist on this sandbox backend (the Docker backend has it)');
    await this.deps.pausing.pause(this.lease.handle);
    this.phase = 'paused';
    this.frozen = true;
    this.log.info({ event: 'sandbox_paused' }, 'sandbox paused');
  }

  async resume(): Promise<void> {
    if (this.phase !== 'paused' || !this.lease?.handle) return;
    await this.deps.pausing!.unpause(this.lease.handle);
    this.frozen = false;
    this.phase = 'running';
    this.log.info({ event: 'sandbox_resumed' }, 'sandbox resumed');
  }

  /**
   * Its model access ended on its own (a budget, the upstream: the gateway's reasons): its harness
   * is refused from now on. The sandbox lives on (its client owns its life); the console says why.
   */
  modelAccessEnded(end: GatewayEnd): void {
    this.log.info({ event: 'sandbox_model_access_ended', reason: end.reason }, end.message);
    this.record('model.access_ended', {}, { reason: end.reason, message: end.message }, null, this.now());
  }

  /** an operation of envd's, for the console (its arguments and result, bounded there) */
  record(tool: string, args: unknown, result: unknown, error: unknown, startedAt: number): void {
    this.ops++;
    this.notify((o) =>
      o.onStep?.(
        this.view,
        { type: 'call_tool', tool_name: tool, arguments: args },
        { observation: { result, error } as never, reward: null, done: false },
        startedAt,
      ),
    );
  }

  private onProcessEnded(r: ProcessRecord): void {
    const cmd =
      r.spec.cmd === '/bin/bash' && r.spec.args[0] === '-l' && r.spec.args[1] === '-c'
        ? r.spec.args.slice(2).join(' ')
        : [r.spec.cmd, ...r.spec.args].join(' ');
    const args = { cmd, user: r.spec.user, cwd: r.spec.cwd ?? null, envs: Object.keys(r.spec.envs), pid: r.pid, timeout_ms: r.spec.timeoutMs };
    const result = {
      exit_code: r.end.exitCode,
      status: r.end.status,
      stdout: r.stdout.text,
      stderr: r.stderr.text,
      stdout_bytes: r.stdout.totalBytes,
      stderr_bytes: r.stderr.totalBytes,
    };
    this.record('commands.run', args, result, r.end.exited && r.end.exitCode === 0 ? null : (r.end.error ?? null), this.now() - r.ms);
  }

  /** Ends the sandbox (once) and tears it down. */
  async close(how: SandboxEnd, failure: Failure | null = null): Promise<void> {
    this.end(how, failure);
    await this.teardown();
  }

  private end(how: SandboxEnd, failure: Failure | null): void {
    if (this.phase === 'done') return;
    const wasLive = this.live;
    this.phase = 'done';
    this.ended = how;
    this.failure = failure;
    this.t.ended = this.now();
    if (this.timer) clearTimeout(this.timer);
    this.abort.abort();
    if (wasLive) this.deps.metrics.sandboxesEnded.inc({ end: how });
    this.log.info({ event: 'sandbox_ended', end: how, ...(failure ? { failure_reason: failure.reason } : {}), ...this.timings() }, 'sandbox ended');
    this.notify((o) => o.onEnded?.(this.view));
  }

  private teardown(): Promise<void> {
    if (this.teardownStarted) return this.tornDown;
    this.teardownStarted = true;
    void (async () => {
      try {
        // a paused container is thawed first: the engine removes it either way, but its stop must reach it
        if (this.frozen && this.lease?.handle) await this.deps.pausing?.unpause(this.lease.handle).catch(() => undefined);
        const cost = this.meter?.read();
        this.processes?.closeAll();
        await cost;
        // its model calls in flight are cut short (each recorded in its transcript) and its door closes before its env goes
        await this.deps.modelDoor?.access
          .revoke(this.id)
          .catch((e: unknown) => this.log.warn({ err: (e as Error)?.message }, 'revoking the model door failed'));
        await this.lease?.release();
      } finally {
        this.resolveTornDown();
      }
    })();
    return this.tornDown;
  }

  get cost(): EpisodeCost | null {
    return this.meter?.value ?? null;
  }

  get ids(): { episode_id: string; task_id: string } {
    return { episode_id: this.id, task_id: this.templateId };
  }

  timings(): Timings {
    const s = (a?: number, b?: number) => (a === undefined ? 0 : seconds3((b ?? this.now()) - a));
    return {
      queued_s: s(this.createdAt, this.t.queued),
      deploy_s: s(this.t.queued, this.t.running ?? this.t.ended),
      running_s: s(this.t.running, this.t.ended),
    };
  }

  private makeView(): Observed {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the view reads the sandbox's state as it changes
    const sb = this;
    const endReasons: Record<SandboxEnd, EndReason> = { killed: 'closed', timeout: 'env_failed', failed: 'env_failed', shutdown: 'closed' };
    return {
      id: sb.id,
      createdAt: sb.createdAt,
      clientLabel: undefined,
      transport: 'e2b',
      seed: null,
      lane: DEFAULT_LANE,
      task: { task_id: sb.params.templateId, split: 'e2b', index: 0, toolset: 'e2b', groups: {} },
      get phase(): Phase {
        return sb.phase === 'paused' ? 'running' : sb.phase;
      },
      get steps() {
        return sb.ops;
      },
      turn: 1,
      get endReason() {
        return sb.ended === null ? null : endReasons[sb.ended];
      },
      reward: null,
      scores: null,
      get failure() {
        return sb.failure;
      },
      get cost() {
        return sb.cost;
      },
      envId: sb.id,
      answering: false,
      tornDown: sb.tornDown,
      timings: () => sb.timings(),
    };
  }
}
