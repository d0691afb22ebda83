/**
 * An env lease: one episode's env slot and the env in it, the one owner of both. It takes a slot
 * (from admission, or with a pooled env through the warm pool), gets the env (the pooled one, or
 * one deployed under the deploy limiter), and gives the slot back once the sandbox says the env is
 * gone (TeardownOptions.onEnvRemoved), or at the end of a teardown that failed, so a slot never
 * leaks. The warm pool's own refills hold their slots in pool.ts until a lease takes one over.
 */
import type { Logger } from 'pino';
import { throwIfAborted } from '../../util/abort.js';
import type { Metrics } from '../../metrics.js';
import type { Lane } from '../../protocol/lanes.js';
import type { EgressDestination, EnvHandle, EnvSpec, ModelDoorHook, Sandbox } from '../../sandbox/sandbox.js';
import { seconds3 } from '../../util/time.js';
import type { Admission, Slot } from './admission.js';
import type { DeployLimiter } from './deploy-limiter.js';
import type { WarmPool } from './pool.js';

export interface EnvLeaseDeps {
  /** what a lease asks of the sandbox: deploy its env, remove it */
  sandbox: Pick<Sandbox, 'deploy' | 'teardown'>;
  admission: Admission;
  /** --max-concurrent-deploys; absent: deploys are not limited */
  deploys?: DeployLimiter;
  /** --warm-pool above 0: slots come with pooled envs when one is ready */
  pool?: WarmPool;
  /** the env's spec once its image is ready: at once when it is, else waits for it (within `wait.timeoutMs`), saying so through `wait.onWait` */
  envSpec: (envName: string, wait?: ImageWait) => EnvSpec | Promise<EnvSpec>;
  metrics: Metrics;
  now?: () => number;
  /** with the model gateway and a warm pool: a pooled env's credential bound to the episode at hand-over (ModelAccess) */
  modelAccess?: { handOver(envId: string, episodeId: string): void; dropDoor(episodeId: string): Promise<void> };
}

/** how a lease waits for its env's image (EnvCatalog.spec) */
export interface ImageWait {
  timeoutMs?: number;
  signal?: AbortSignal;
  onWait?: (state: string) => void;
}

export class EnvLease {
  /**
   * The id the env's resources are labelled with: the episode's own id for an env deployed for it,
   * the pooled env's id (`pool-…`) for one taken from the warm pool.
   */
  envId: string;
  /** set while the env is one taken from the warm pool: how long it waited there (ms) */
  pooled: { waitedMs: number } | null = null;
  /** how long the reset waited for its env's image (ms), when it did (said `waiting_for_image`); null when it was ready */
  imageWaitedMs: number | null = null;
  /** the env, once there is one */
  handle: EnvHandle | null = null;
  spec: EnvSpec | null = null;
  /**
   * when the env became this episode's (its clock): its deploy's start, or its hand-out from the
   * warm pool; null until then. An episode's cost counts its wall time from here.
   */
  envSince: number | null = null;
  private slot: Slot | null = null;
  /** resources may exist under envId: a deploy started, or a pooled env was adopted */
  private envStarted = false;
  private pooledEnv: { handle: EnvHandle; spec: EnvSpec } | null = null;
  /** the env's spec, its image ready, before the slot is taken (takeSlot) */
  private readySpec: EnvSpec | null = null;
  /** why its image is not there (takeSlot): what env() throws, the episode failing its deploy with it */
  private imageFailed: { error: unknown } | null = null;
  private released: Promise<void> | null = null;
  private readonly now: () => number;

  constructor(
    private readonly deps: EnvLeaseDeps,
    readonly episodeId: string,
    readonly envName: string,
    private readonly log: Logger,
  ) {
    this.envId = episodeId;
    this.now = deps.now ?? Date.now;
  }

  /** whether it holds its slot now (taken, and not given back yet) */
  get holdsSlot(): boolean {
    return this.slot !== null;
  }

  /** true when the server has a warm pool (timings then say where the env came from) */
  get withPool(): boolean {
    return this.deps.pool !== undefined;
  }

  /**
   * Waits for the env's image, then in the queue for a slot, in `lane` (default normal), both
   * within `queueTimeoutMs` (the reset timeout; docs/images.md). The image first: a build can take
   * minutes, and a slot held meanwhile would starve the resets whose images are ready; the wait is
   * said in the episode's log. An image that failed, is missing or was not ready in time takes no
   * slot: env() throws the catalog's error. With a warm pool, the slot may come with a pooled env.
   * Rejects as Admission.acquire does (CapacityError, ShuttingDownError, AbortError).
   */
  async takeSlot(opts: { queueTimeoutMs: number; signal: AbortSignal; lane?: Lane }): Promise<void> {
    const { admission, pool } = this.deps;
    let timeoutMs = opts.queueTimeoutMs;
    let waited = false;
    const onWait = (state: string) => {
      waited = true;
      this.log.info({ event: 'waiting_for_image', env: this.envName, image_state: state }, `waiting for its image (env "${this.envName}": ${state})`);
    };
    // at once when the image is ready: the slot's queue keeps the resets' arrival order
    const spec = this.deps.envSpec(this.envName, { timeoutMs, signal: opts.signal, onWait });
    if (spec instanceof Promise) {
      const started = this.now();
      try {
        this.readySpec = await spec;
      } catch (error) {
        // no slot: env() throws it, and the episode fails its deploy with it
        this.imageFailed = { error };
        return;
      } finally {
        // told in the reset's timings when it was told in its log
        if (waited) this.imageWaitedMs = this.now() - started;
      }
      timeoutMs = Math.max(0, timeoutMs - (this.now() - started));
    } else this.readySpec = spec;
    if (!pool) {
      this.slot = await admission.acquire({ timeoutMs, signal: opts.signal, lane: opts.lane });
      return;
    }
    const grant = await pool.acquire(this.envName, {
      timeoutMs,
      signal: opts.signal,
      lane: opts.lane,
      // synchronous with the hand-over: no reconcile can find the pooled id owned by nobody
      adopt: (envId) => {
        this.envId = envId;
        this.envStarted = true;
        // its model calls are this episode's from the hand-over on
        this.deps.modelAccess?.handOver(envId, this.episodeId);
      },
    });
    this.slot = grant.slot;
    if (grant.pooled) {
      this.pooled = { waitedMs: grant.pooled.waitedMs };
      this.pooledEnv = { handle: grant.pooled.handle, spec: grant.pooled.spec };
    }
  }

  /**
   * The env in the slot: the pooled one, or one deployed now (under the deploy limiter), with the
   * model gateway's door if given, and the destinations it may reach (an E2B sandbox's egress).
   */
  async env(signal: AbortSignal, modelDoor?: ModelDoorHook, egress?: readonly EgressDestination[]): Promise<EnvHandle> {
    if (this.imageFailed) throw this.imageFailed.error;
    if (this.pooledEnv) {
      throwIfAborted(signal);
      this.envSince = this.now();
      this.handle = this.pooledEnv.handle;
      this.spec = this.pooledEnv.spec;
      this.pooledEnv = null;
      return this.handle;
    }
    return this.deployFresh(signal, modelDoor, egress);
  }

  /**
   * A pooled env that died before the episode's first observation is the server's loss, not the
   * episode's: it is removed and a fresh env deployed in the same slot, under the episode's own id
   * (within that deploy's own budget), with a door of its own (`modelDoor`) when the episode has
   * model access. Only for a pooled env, and at most once.
   */
  async replaceDeadPooledEnv(signal: AbortSignal, modelDoor?: ModelDoorHook): Promise<EnvHandle> {
    if (!this.pooled) throw new Error('only an env taken from the warm pool is replaced');
    const deadId = this.envId;
    this.log.warn({ event: 'pooled_env_replaced', env_id: deadId }, 'the pooled env died before the first observation: deploying a fresh one');
    this.deps.metrics.poolDiscarded.inc({ reason: 'dead' });
    this.handle = null;
    await this.deps.sandbox.teardown(deadId);
    if (modelDoor) await this.deps.modelAccess?.dropDoor(this.episodeId);
    this.pooled = null;
    this.envId = this.episodeId;
    return this.deployFresh(signal, modelDoor);
  }

  private async deployFresh(signal: AbortSignal, modelDoor?: ModelDoorHook, egress?: readonly EgressDestination[]): Promise<EnvHandle> {
    const { sandbox, deploys, envSpec } = this.deps;
    const spec = this.readySpec ?? (await envSpec(this.envName));
    throwIfAborted(signal);
    this.spec = spec;
    this.envStarted = true;
    this.envSince = this.now();
    const asked = this.now();
    let turnMs = 0;
    const deploy = () => {
      turnMs = this.now() - asked;
      return sandbox.deploy({ envId: this.envId, env: spec, signal, ...(modelDoor ? { modelDoor } : {}), ...(egress ? { egress } : {}) });
    };
    this.handle = await (deploys ? deploys.run(deploy, { priority: 'reset', signal }) : deploy());
    // where this deploy's time went: its wait for a turn, then the sandbox's own stages
    const { deployStage } = this.deps.metrics;
    if (deploys) deployStage.observe({ stage: 'turn' }, turnMs / 1000);
    for (const [stage, ms] of Object.entries(this.handle.stagesMs ?? {})) deployStage.observe({ stage }, ms / 1000);
    return this.handle;
  }

  /**
   * Removes the env (when there may be one) and gives the slot back as soon as the sandbox says
   * the env is gone, before its network is removed. A failed removal is logged (the reconciler
   * retries it) and the slot is freed anyway. Idempotent: every call gets the same promise.
   */
  release(): Promise<void> {
    return (this.released ??= this.runRelease());
  }

  private async runRelease(): Promise<void> {
    const { sandbox, metrics } = this.deps;
    const started = this.now();
    try {
      if (!this.envStarted) return;
      let envRemovedAt: number | null = null;
      await sandbox.teardown(this.envId, {
        onEnvRemoved: () => {
          envRemovedAt = this.now();
          metrics.teardownStage.observe({ stage: 'env_removed' }, (envRemovedAt - started) / 1000);
          this.freeSlot();
        },
      });
      const done = this.now();
      metrics.teardown.observe({ outcome: 'ok' }, (done - started) / 1000);
      if (envRemovedAt !== null) metrics.teardownStage.observe({ stage: 'network_removed' }, (done - envRemovedAt) / 1000);
      this.log.info(
        { event: 'torn_down', teardown_s: seconds3(done - started), ...(envRemovedAt !== null ? { env_removed_s: seconds3(envRemovedAt - started) } : {}) },
        'episode torn down',
      );
    } catch (e) {
      // the reconciler retries what is left; the slot must not leak meanwhile
      metrics.teardown.observe({ outcome: 'failed' }, (this.now() - started) / 1000);
      this.log.error({ event: 'teardown_failed', err: (e as Error).message }, 'teardown failed; the reconciler will retry');
    } finally {
      this.freeSlot();
    }
  }

  private freeSlot(): void {
    this.slot?.release();
    this.slot = null;
  }
}
