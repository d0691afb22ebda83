/**
 * The skeleton of a Sandbox on a Docker engine, once for both backends: the open check, env images
 * (built on the engine, published by the backend), the instance claim and its loss, the stock of
 * networks made ahead of demand, deploys (one per id at a time, a failed one cleaned up), teardown,
 * the start sweep, the reconciler's listing and close(). A backend (docker/docker-sandbox.ts,
 * swarm/swarm-sandbox.ts) says only what differs: how the engine answers a ping, how an episode's
 * network and env are made and looked at, and how what it owns is listed and removed.
 *
 * Long because it is the one skeleton both engine backends share (deploys and their clean-up,
 * teardown, the sweep, the instance claim, the stock): each step is short, and their order is the
 * point; the steps' own work is in the files beside it.
 */
import Dockerode from 'dockerode';
import { ENV_LAYER_DEFAULTS } from '../../defaults.js';
import { EnvLifecycles } from '../env-lifecycles.js';
import {
  SandboxError,
  type AheadOfDemand,
  type DeployRequest,
  type EgressDestination,
  type EnvDiagnosis,
  type EnvEgress,
  type EnvHandle,
  type EnvImages,
  type EnvLockdown,
  type EnvRuntime,
  type EnvSpec,
  type ImageBuildRequest,
  type InstanceClaim,
  type ModelDoorHook,
  type Sandbox,
  type SweepResult,
  type TeardownOptions,
} from '../sandbox.js';
import { abortError, engineMessage, toSandboxError } from './errors.js';
import { granted, withLayerDefaults, type LayerDefaults } from '../lockdown.js';
import { buildEnvImage, checkImage } from './image-build.js';
import { pullImage } from './image-pull.js';
import { InstanceLock, type InstanceLockOptions } from './instance-lock.js';
import type { Owner } from './labels.js';
import { silentLogger, type SandboxLogger } from './logger.js';
import { NetworkStock } from './network-stock.js';
import { connectToNetwork } from './networks.js';
import { listOwned, type ListEnvs, type Owned, type RemovalFailure, type RemovalSettings, type RemoveResult } from './owned.js';
import { retry } from './retry.js';

/** A container or network removal is retried this many times, the delay doubling from the base. */
const REMOVAL_RETRY = { attempts: 6, baseDelayMs: 100 } as const;

export interface EngineSandboxOptions {
  /** the engine (a swarm's manager); defaults to the local one (DOCKER_HOST or /var/run/docker.sock) */
  docker?: Dockerode;
  /** this server instance: labels every resource, scopes sweep and listEnvIds */
  instance: string;
  bundleName: string;
  logger?: SandboxLogger;
  /** attempts per removal, and the first backoff delay (doubling) */
  removeAttempts?: number;
  removeBaseDelayMs?: number;
  /**
   * The server's own container when it reaches envs from one (the engine's socket mounted): it
   * joins each episode network (see detectOwnContainerId). null: it reaches them from the host.
   */
  attachContainer?: string | null;
  /** heartbeat of the instance claim */
  instanceLock?: Omit<InstanceLockOptions, 'instance' | 'logger'>;
  /** episode networks kept made ahead of demand once stock.start() was called (default 0: none) */
  networkStock?: number;
  /** what envs run under unless their spec names a runtime (--runtime; default runc) */
  runtime?: EnvRuntime;
  /** the bounds of an env's writable layer where its bundle sets none (--default-storage-mb, --default-max-files; default ENV_LAYER_DEFAULTS) */
  layerDefaults?: LayerDefaults;
  /**
   * A stocked network whose episode ended goes back to the stock, once the backend found it empty
   * (engine/network-stock.ts); false: removed with its episode. Backends that cannot check a
   * network empty never recycle. Default true.
   */
  recycleNetworks?: boolean;
}

/** how a backend's messages and logs name it */
export interface BackendNames {
  /** "the Docker sandbox" */
  sandbox: string;
  /** "the Docker engine", "the swarm" */
  engine: string;
  /** what it stocks: "episode network", "overlay" */
  network: string;
}

/** what watches a backend's deployed envs; an env's own removal is no death to report */
export interface EnvWatch {
  forget(envId: string): void;
  close(): void;
}

export abstract class EngineSandbox<N> implements Sandbox {
  readonly instance: string;
  readonly bundleName: string;
  protected readonly docker: Dockerode;
  protected readonly log: SandboxLogger;
  protected readonly attach: string | null;
  /** how what the backend owns is removed */
  protected readonly removal: RemovalSettings;
  /** networks made ahead of demand; each is handed to one deploy, which it records, and removed with that episode */
  protected readonly networks: NetworkStock<N>;
  /** envs whose spec names no runtime run under this one */
  protected readonly runtime: EnvRuntime;
  /** envs whose spec sets no bound of their writable layer get these */
  private readonly layerDefaults: LayerDefaults;
  private readonly names: BackendNames;
  private readonly lifecycles = new EnvLifecycles();
  private readonly builds = new Map<string, Promise<string>>();
  private readonly lock: InstanceLock;
  private readonly lostListeners: ((why: string) => void)[] = [];
  private closed = false;
  private failedRemovals = 0;

  /** what watches the deployed envs (the engine's events, the swarm's tasks) */
  protected abstract readonly watcher: EnvWatch;

  constructor(opts: EngineSandboxOptions, names: BackendNames) {
    if (!opts.instance) throw new Error(`${names.sandbox} needs an instance id`);
    this.instance = opts.instance;
    this.bundleName = opts.bundleName;
    this.names = names;
    this.docker = opts.docker ?? new Dockerode();
    this.log = opts.logger ?? silentLogger;
    this.attach = opts.attachContainer ?? null;
    this.runtime = opts.runtime ?? 'runc';
    this.layerDefaults = opts.layerDefaults ?? ENV_LAYER_DEFAULTS;
    this.removal = {
      attachContainer: this.attach,
      attempts: opts.removeAttempts ?? REMOVAL_RETRY.attempts,
      baseDelayMs: opts.removeBaseDelayMs ?? REMOVAL_RETRY.baseDelayMs,
      log: this.log,
    };
    this.networks = new NetworkStock<N>({
      size: opts.networkStock ?? 0,
      recycle: (opts.recycleNetworks ?? true) && this.canCheckEmpty(),
      what: names.network,
      log: this.log,
      create: async (key) => {
        try {
          return await this.makeStockedNetwork(this.ownerOf(key, ''));
        } catch (err) {
          // labelled with the key: removed now, or by the start sweep or the reconciler if this fails too
          await this.removeEnv(key).catch(() => undefined);
          throw err;
        }
      },
      remove: (key) => this.removeEnv(key),
    });
    // the instance claim is a labelled volume on the engine (a swarm's manager), as on one host
    this.lock = new InstanceLock(this.docker, {
      ...opts.instanceLock,
      instance: this.instance,
      logger: this.log,
      onLost: (h) => {
        opts.instanceLock?.onLost?.(h);
        const why = `instance "${this.instance}" is held by an older server (host ${h.host}, pid ${h.pid}, since ${new Date(h.since).toISOString()})`;
        for (const fn of this.lostListeners) fn(why);
      },
    });
  }

  // --- what a backend says ---------------------------------------------------------------------

  /** resolves when the engine answers and can run this backend's envs */
  protected abstract checkEngine(): Promise<void>;
  /** a network for the stock, labelled with `owner.episode` (its key), ready for a deploy to take */
  protected abstract makeStockedNetwork(owner: Owner): Promise<N>;
  /**
   * Makes the episode's network (or takes one from `this.networks`) and env, and waits for it to
   * be ready; whatever it throws, what it made is removed by the caller (removeEnv).
   */
  protected abstract deployEnv(
    owner: Owner,
    env: EnvSpec,
    signal: AbortSignal,
    modelDoor?: ModelDoorHook,
    egress?: readonly EgressDestination[],
  ): Promise<EnvHandle>;
  /** true when deployEnv honours a model door (DeployRequest.modelDoor) */
  readonly modelDoors: boolean = false;
  /** the state of a deployed env, to explain a failure */
  protected abstract inspectEnv(handle: EnvHandle): Promise<EnvDiagnosis>;
  /** whether an episode network of the id may exist on the engine (made, or its creation in doubt) */
  protected abstract holdsNetwork(envId: string): boolean;
  /** every network of `envId` (an episode id or a stock key) is gone from the engine */
  protected abstract released(envId: string): void;
  /** lists the backend's envs (containers, services) by label */
  protected abstract readonly listEnvs: ListEnvs;
  /** removes what was listed, envs first; `onEnvRemoved` once no env of it runs any more */
  protected abstract removeOwned(owned: Owned, onEnvRemoved?: () => void): Promise<RemoveResult>;
  abstract networksInUse(): number;

  /** the runtime the env really runs under here, and what of its lock-down this engine cannot enforce, each with why (default: its own, nothing) */
  protected onEngine(env: EnvSpec & { runtime: EnvRuntime }): Promise<{ runtime: EnvRuntime; notEnforced: string[] }> {
    return Promise.resolve({ runtime: env.runtime, notEnforced: [] });
  }

  /** the engine can run containers under `runtime` (runc always can); a swarm overrides it: its services cannot choose */
  protected async engineHasRuntime(runtime: EnvRuntime): Promise<void> {
    if (runtime === 'runc') return;
    let runtimes: Record<string, unknown>;
    try {
      runtimes = ((await this.docker.info()) as { Runtimes?: Record<string, unknown> }).Runtimes ?? {};
    } catch (err) {
      throw toSandboxError(err, 'listing its runtimes');
    }
    if (!Object.hasOwn(runtimes, runtime)) {
      throw new SandboxError(
        'engine_failed',
        `${this.names.engine} has no runtime "${runtime}" (it has ${Object.keys(runtimes).join(', ') || 'none'}): ` +
          'register gVisor with it (sudo bash deploy/register-runsc.sh), or serve without --runtime runsc and without envs whose security asks for it',
      );
    }
    // files the server writes into an env from outside (write_file, a verifier's tests) stay unseen
    // inside gVisor when its root is cached as its own (the default, exclusive)
    const args = (runtimes[runtime] as { runtimeArgs?: unknown } | null)?.runtimeArgs;
    if (runtime === 'runsc' && !(Array.isArray(args) && args.includes('--file-access=shared'))) {
      this.log.warn(
        { runtime, runtimeArgs: args ?? [] },
        "the engine runs runsc without --file-access=shared: a file written into an env from outside (write_file, a verifier's tests) may stay unseen inside it; re-register it with deploy/register-runsc.sh",
      );
    }
  }

  /** whether networkIsEmpty answers (a backend that recycles its episode networks overrides both) */
  protected canCheckEmpty(): boolean {
    return false;
  }

  /** the network has no endpoint left on the engine (the server's own container aside) */
  protected networkIsEmpty(_net: N): Promise<boolean> {
    return Promise.resolve(false);
  }

  /** the image reference envs are deployed from, once built (the swarm's: pushed to its registry) */
  protected publishImage(tag: string, _req: ImageBuildRequest): Promise<string> {
    return Promise.resolve(tag);
  }

  // --- the skeleton ----------------------------------------------------------------------------

  protected assertOpen(): void {
    if (this.closed) throw new SandboxError('engine_failed', `${this.names.sandbox} is closed`);
  }

  /** the server's container joins a network, when it reaches envs from one; resolves with how long the engine took */
  protected async join(networkId: string): Promise<number> {
    const t = Date.now();
    if (this.attach) await connectToNetwork(this.docker, networkId, this.attach);
    return Date.now() - t;
  }

  protected ownerOf(envId: string, envName: string): Owner {
    return { instance: this.instance, bundle: this.bundleName, episode: envId, env: envName };
  }

  /** removals that still failed after every retry (their resources stay labelled for the reconciler) */
  get removalFailures(): number {
    return this.failedRemovals;
  }

  async ping(): Promise<void> {
    this.assertOpen();
    await this.checkEngine();
  }

  /** built on the engine (the manager, on a swarm), then published as the backend says */
  readonly images: EnvImages = {
    build: async (req) => {
      this.assertOpen();
      return this.publishImage(await buildEnvImage(this.docker, req, this.builds), req);
    },
    check: async (ref) => {
      this.assertOpen();
      await checkImage(this.docker, ref);
    },
    pull: async (ref, opts) => {
      this.assertOpen();
      await pullImage(this.docker, ref, opts.onProgress ?? (() => {}), opts.signal);
    },
  };

  /** a labelled volume on the engine (a swarm's manager) with a heartbeat: engine/instance-lock.ts */
  readonly instanceClaim: InstanceClaim = {
    claim: async () => {
      this.assertOpen();
      await this.lock.claim();
    },
    release: () => this.lock.release(),
    onLost: (fn) => {
      this.lostListeners.push(fn);
    },
  };

  /** the episode networks made ahead of demand (--network-stock), after the start sweep, which would remove them */
  readonly stock: AheadOfDemand = {
    start: (turn) => {
      this.assertOpen();
      this.networks.start(turn);
    },
    stop: () => this.networks.close(),
    stats: () => this.networks.stats(),
  };

  /** every env locked down (engine/hardening.ts), under its spec's runtime or the sandbox's */
  readonly lockdown: EnvLockdown = this.lockdownPart();

  private lockdownPart(): EnvLockdown {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the getter reads the runtime set in the constructor, after field initialisers
    const sandbox = this;
    return {
      get runtime() {
        return sandbox.runtime;
      },
      granted: async (env) => {
        const spec = sandbox.asRun(env);
        const here = await sandbox.onEngine(spec);
        return granted({ resources: spec.resources, security: spec.security, runtime: here.runtime }, here.notEnforced);
      },
      checkRuntime: (runtime) => {
        sandbox.assertOpen();
        return sandbox.engineHasRuntime(runtime);
      },
    };
  }

  /** the spec as it runs here: under its own runtime, else the sandbox's; with the sandbox's bounds of its writable layer where it sets none */
  protected asRun(env: EnvSpec): EnvSpec & { runtime: EnvRuntime } {
    return { ...env, runtime: env.runtime ?? this.runtime, resources: withLayerDefaults(env.resources, this.layerDefaults) };
  }

  async deploy(req: DeployRequest): Promise<EnvHandle> {
    this.assertOpen();
    if (req.modelDoor && !this.modelDoors) throw new SandboxError('engine_failed', `${this.names.sandbox} opens no model gateway door on its networks`);
    if (req.egress?.length && !this.egress) throw new SandboxError('engine_failed', `${this.names.sandbox} opens no egress to chosen destinations`);
    return this.lifecycles.deploy(
      req,
      (id) => this.holdsNetwork(id) || this.networks.keyTakenBy(id) !== undefined,
      (signal) => this.deployOrCleanUp(req.envId, this.asRun(req.env), signal, req.modelDoor, req.egress),
    );
  }

  /** the backend's egress allowlist, when it has one */
  readonly egress?: EnvEgress;

  private async deployOrCleanUp(
    envId: string,
    env: EnvSpec,
    signal: AbortSignal,
    modelDoor?: ModelDoorHook,
    egress?: readonly EgressDestination[],
  ): Promise<EnvHandle> {
    try {
      // Creation steps are not interrupted mid-call: an engine call cut off may still complete
      // on the engine's side, and its resource would then escape this cleanup.
      return await this.deployEnv(this.ownerOf(envId, env.name), env, signal, modelDoor, egress);
    } catch (err) {
      const cause = signal.aborted ? abortError(signal.reason) : toSandboxError(err, `deploying env \`${env.name}\``);
      try {
        // a network a failed deploy used is not trusted to the next one: removed, never recycled
        await this.removeEnv(envId, undefined, false);
      } catch (cleanupErr) {
        this.log.error({ episode: envId, err: cleanupErr }, 'could not remove what a failed deploy created; the reconciler will retry');
      }
      // not logged here: whoever asked for the deploy (an episode, a pool refill) logs its failure once
      throw cause;
    }
  }

  async diagnose(handle: EnvHandle): Promise<EnvDiagnosis> {
    this.assertOpen();
    return this.inspectEnv(handle);
  }

  teardown(envId: string, opts: TeardownOptions = {}): Promise<void> {
    return this.lifecycles.teardown(envId, () => this.removeEnv(envId, opts.onEnvRemoved), opts.onEnvRemoved);
  }

  /**
   * Removes the episode's labelled resources, and the stocked network it took (labelled with that
   * network's key, removed under the episode's id so that the backend knows whose it is), unless
   * that network goes back to the stock: its env removed, found empty on the engine, and the stock
   * wanting it (engine/network-stock.ts). `recycle` false: removed in any case.
   */
  protected async removeEnv(envId: string, onEnvRemoved?: () => void, recycle = true): Promise<void> {
    this.watcher.forget(envId);
    const stocked = this.networks.takenBy(envId);
    const owned = await this.list(envId);
    const stockedNetworks = async () => (stocked ? (await this.list(stocked.key)).networks.map((n) => ({ ...n, episode: envId })) : []);
    const mayGoBack = recycle && stocked !== undefined && this.networks.wantsBack();
    if (!mayGoBack) owned.networks.push(...(await stockedNetworks()));
    const result = await this.removeOwned(owned, onEnvRemoved);
    if (result.failed.length > 0) throw this.removalError(result.failed, `episode ${envId}`);
    this.released(envId);
    if (!stocked) return;
    if (mayGoBack) {
      if ((await this.networkIsEmpty(stocked.net).catch(() => false)) && this.networks.giveBack(envId)) return;
      // not empty, or the stock full or closing meanwhile: removed as any other
      const rest = await this.removeOwned({ envs: [], networks: await stockedNetworks() });
      if (rest.failed.length > 0) throw this.removalError(rest.failed, `episode ${envId}`);
    }
    this.released(stocked.key);
    this.networks.forget(envId);
  }

  async sweep(): Promise<SweepResult> {
    this.assertOpen();
    const result = await this.removeOwned(await this.list());
    const stillThere = new Set(result.failed.filter((f) => f.kind === 'network').map((f) => f.episode));
    for (const n of result.removed.networks) if (!stillThere.has(n.episode)) this.released(n.episode);
    const removed = { containers: result.removed.envs.map((c) => c.id), networks: result.removed.networks.map((n) => n.id) };
    if (removed.containers.length + removed.networks.length > 0) this.log.info({ instance: this.instance, ...removed }, 'swept leftover env resources');
    if (result.failed.length > 0) throw this.removalError(result.failed, `instance ${this.instance}`);
    return removed;
  }

  /** a stocked network nobody took is no episode's; one an episode took is reported as that episode's */
  async listEnvIds(): Promise<string[]> {
    this.assertOpen();
    const owned = await this.list();
    return this.networks.envIdsOf([...owned.envs, ...owned.networks].map((r) => r.episode));
  }

  /** what this instance (or another: a dead one's) has on the engine, by label, optionally one episode's */
  protected async list(envId?: string, instance = this.instance): Promise<Owned> {
    try {
      // no abort signal: cleanups started by close() must still get to finish
      return await retry(() => listOwned(this.docker, this.listEnvs, instance, envId), { attempts: 3, baseDelayMs: this.removal.baseDelayMs });
    } catch (err) {
      throw toSandboxError(err, `listing the resources of ${envId ? `episode ${envId}` : `instance ${instance}`}`);
    }
  }

  protected removalError(failed: RemovalFailure[], what: string): SandboxError {
    this.failedRemovals += failed.length;
    const details = failed.map((f) => `${f.kind} ${f.id.slice(0, 12)}: ${engineMessage(f.error)}`).join('; ');
    this.log.error(
      { failed: failed.map((f) => ({ kind: f.kind, id: f.id, episode: f.episode, err: engineMessage(f.error) })) },
      `could not remove every resource of ${what}`,
    );
    return new SandboxError(
      'engine_failed',
      `${this.names.engine} did not remove every resource of ${what} after ${this.removal.attempts} attempts: ${details}`,
    );
  }

  /** stops deploys in flight (they remove what they created), waits for teardowns and the stock's removal, then refuses further calls */
  async close(): Promise<void> {
    if (this.closed) return;
    await Promise.all([this.networks.close(), this.lifecycles.close(`${this.names.sandbox} is closing`)]);
    this.watcher.close();
    await this.lock.release().catch((err) => this.log.warn({ err: (err as Error).message }, 'could not release the instance name; it goes stale on its own'));
    this.closed = true;
  }
}
