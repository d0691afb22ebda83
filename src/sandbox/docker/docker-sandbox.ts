/**
 * The Docker implementation of Sandbox: one internal bridge network per episode on a subnet of
 * our own pool (made ahead of demand when the network stock has one), one env container on it,
 * readiness over HTTP, teardown and sweep by label.
 * The only module of the server that knows dockerode.
 */
import Dockerode from 'dockerode';
import {
  LABELS,
  SandboxError,
  type AbandonedSweep,
  type DeployRequest,
  type EnvDiagnosis,
  type EnvHandle,
  type EnvSpec,
  type ImageBuildRequest,
  type Sandbox,
  type StockTurn,
  type SweepResult,
  type TeardownOptions,
} from '../sandbox.js';
import { newEnvSecret } from '../env-identity.js';
import { EnvLifecycles } from '../env-lifecycles.js';
import { createEnvContainer, inspectState, logTail } from './containers.js';
import { EPISODE_SUBNET_PREFIX, REMOVAL_RETRY, SUBNET_POOL } from '../../defaults.js';
import { notReadyVerdict } from '../../failures.js';
import { EnvWatcher } from './env-watch.js';
import { abortError, engineMessage, isNotFound, throwIfAborted, toSandboxError } from '../engine/errors.js';
import { buildEnvImage, checkImage } from '../engine/image-build.js';
import { abandonedInstances, InstanceLock, removeLockMarkers, type InstanceLockOptions } from '../engine/instance-lock.js';
import type { Owner } from '../engine/labels.js';
import { silentLogger, type SandboxLogger } from '../engine/logger.js';
import { connectToNetwork } from '../engine/networks.js';
import { createEpisodeNetwork, type EpisodeNetwork } from './bridge-network.js';
import { NetworkStock, STOCK_KEY_PREFIX } from '../engine/network-stock.js';
import { waitForHttp } from '../engine/readiness.js';
import { retry } from '../engine/retry.js';
import { SubnetPool } from './subnet-pool.js';
import { listOwned, removeOwned, type Owned, type RemoveResult } from './removal.js';

export interface DockerSandboxOptions {
  /** defaults to the local engine (DOCKER_HOST or /var/run/docker.sock) */
  docker?: Dockerode;
  /** this server instance: labels every resource, scopes sweep and listEpisodeIds */
  instance: string;
  bundleName: string;
  /** CIDR the episode subnets are carved from (default SUBNET_POOL) */
  subnetPool?: string;
  /** prefix length of one episode subnet (default EPISODE_SUBNET_PREFIX) */
  subnetPrefix?: number;
  /**
   * The server's own container id when it runs in a container with the engine socket mounted:
   * it joins each episode network to reach the env (see detectOwnContainerId). null: the server
   * runs on the engine's host and reaches container addresses directly. With a container set,
   * episode bridges get no host address, so envs cannot reach services on the host either.
   */
  attachContainer?: string | null;
  logger?: SandboxLogger;
  /** attempts per container or network removal, and the first backoff delay (doubling) */
  removeAttempts?: number;
  removeBaseDelayMs?: number;
  /** heartbeat of the instance claim (claimInstance) */
  instanceLock?: Omit<InstanceLockOptions, 'instance' | 'logger'>;
  /** episode networks kept made ahead of demand once prepare() was called (default 0: none) */
  networkStock?: number;
}

export class DockerSandbox implements Sandbox {
  readonly instance: string;
  readonly bundleName: string;
  private readonly docker: Dockerode;
  private readonly pool: SubnetPool;
  private readonly attach: string | null;
  private readonly log: SandboxLogger;
  private readonly removeAttempts: number;
  private readonly removeBaseDelayMs: number;
  private readonly lifecycles = new EnvLifecycles();
  private readonly builds = new Map<string, Promise<string>>();
  private closed = false;
  private failedRemovals = 0;
  /** deaths of the deployed env containers, as the engine reports them */
  private readonly watcher: EnvWatcher;
  private readonly lock: InstanceLock;
  private readonly lostListeners: ((why: string) => void)[] = [];
  /** networks made ahead of demand; each is handed to one deploy and removed with its episode */
  private readonly stock: NetworkStock<EpisodeNetwork>;

  constructor(opts: DockerSandboxOptions) {
    if (!opts.instance) throw new Error('DockerSandbox needs an instance id');
    this.instance = opts.instance;
    this.bundleName = opts.bundleName;
    this.docker = opts.docker ?? new Dockerode();
    this.pool = new SubnetPool({ pool: opts.subnetPool ?? SUBNET_POOL, prefix: opts.subnetPrefix ?? EPISODE_SUBNET_PREFIX });
    this.attach = opts.attachContainer ?? null;
    this.log = opts.logger ?? silentLogger;
    this.removeAttempts = opts.removeAttempts ?? REMOVAL_RETRY.attempts;
    this.removeBaseDelayMs = opts.removeBaseDelayMs ?? REMOVAL_RETRY.baseDelayMs;
    this.watcher = new EnvWatcher(this.docker, this.log);
    this.stock = new NetworkStock<EpisodeNetwork>({
      size: opts.networkStock ?? 0,
      what: 'episode network',
      log: this.log,
      create: (key) => this.makeNetwork({ instance: this.instance, bundle: this.bundleName, episode: key, env: '' }),
      remove: (key) => this.removeEpisode(key),
    });
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

  /** removals that still failed after every retry (their resources stay labelled for the reconciler) */
  get removalFailures(): number {
    return this.failedRemovals;
  }

  private assertOpen(): void {
    if (this.closed) throw new SandboxError('engine_failed', 'the Docker sandbox is closed');
  }

  async ping(): Promise<void> {
    this.assertOpen();
    try {
      await this.docker.ping();
    } catch (err) {
      if ((err as { code?: string }).code === 'EACCES') {
        // the server runs as a non-root user (the image's uid 1000): it needs the socket's group
        const who = typeof process.getgid === 'function' ? `uid ${process.getuid?.()}, groups ${process.getgroups?.().join(',')}` : 'this user';
        throw new SandboxError(
          'engine_failed',
          `permission denied on the Docker socket (${who}): run the server in the socket's group (compose: DOCKER_GID=$(stat -c %g /var/run/docker.sock); docker run: --group-add <that gid>)`,
        );
      }
      throw toSandboxError(err, 'answering a ping');
    }
  }

  async buildImage(req: ImageBuildRequest): Promise<string> {
    this.assertOpen();
    return buildEnvImage(this.docker, req, this.builds);
  }

  async checkImage(ref: string): Promise<void> {
    this.assertOpen();
    await checkImage(this.docker, ref);
  }

  /** episode networks held by episodes (deploying, live or being removed); the stock's are not counted */
  networksInUse(): number {
    return this.pool.inUse - this.stock.held;
  }

  /** the network stock's figures (for /metrics) */
  networkStock(): ReturnType<NetworkStock<EpisodeNetwork>['stats']> {
    return this.stock.stats();
  }

  /** begins making networks ahead of demand; after the start sweep, which would remove them */
  prepare(turn?: StockTurn): void {
    this.assertOpen();
    this.stock.start(turn);
  }

  /** stops the stock and removes the networks nobody took (the drain calls it first; close() does it too) */
  unprepare(): Promise<void> {
    return this.stock.close();
  }

  /** an episode network on a fresh subnet, joined by the server's container when it has one */
  private async makeNetwork(owner: Owner): Promise<EpisodeNetwork> {
    const network = await createEpisodeNetwork(this.docker, this.pool, owner, this.log, { hostless: this.attach !== null });
    if (this.attach) {
      try {
        await connectToNetwork(this.docker, network.id, this.attach);
      } catch (err) {
        // the network is labelled: whoever cleans up the owner's id removes it
        if (owner.episode.startsWith(STOCK_KEY_PREFIX)) await this.removeEpisode(owner.episode).catch(() => {});
        throw err;
      }
    }
    return network;
  }

  async claimInstance(): Promise<void> {
    this.assertOpen();
    await this.lock.claim();
  }

  async releaseInstance(): Promise<void> {
    await this.lock.release();
  }

  onInstanceLost(fn: (why: string) => void): void {
    this.lostListeners.push(fn);
  }

  async deploy(req: DeployRequest): Promise<EnvHandle> {
    this.assertOpen();
    return this.lifecycles.deploy(
      req,
      (id) => this.pool.holds(id) || this.stock.keyTakenBy(id) !== undefined,
      (signal) => this.runDeploy(req.episodeId, req.env, signal),
    );
  }

  private async runDeploy(episodeId: string, env: EnvSpec, signal: AbortSignal): Promise<EnvHandle> {
    const owner: Owner = { instance: this.instance, bundle: this.bundleName, episode: episodeId, env: env.name };
    const startedAt = Date.now();
    try {
      throwIfAborted(signal);
      // Creation steps are not interrupted mid-call: an engine call cut off may still complete
      // on the engine's side, and its resource would then escape this deploy's cleanup.
      const stocked = this.stock.take(episodeId);
      const network = stocked?.net ?? (await this.makeNetwork(owner));
      throwIfAborted(signal);
      // listening before the container exists, so no death of it goes unseen
      await this.watcher.start();
      const createdAt = Date.now();
      const deadline = createdAt + env.deployTimeoutMs;
      const secret = newEnvSecret();
      const container = await createEnvContainer(this.docker, owner, env, network, secret);
      const gone = this.watcher.watch(episodeId, container.id, network.id);
      throwIfAborted(signal);
      const startAt = Date.now();
      try {
        await container.start();
      } catch (err) {
        throw toSandboxError(err, `starting the container of env \`${env.name}\``);
      }
      throwIfAborted(signal);
      const runningAt = Date.now();
      const stopWaiting = new AbortController();
      const exited = container.wait({ condition: 'not-running', abortSignal: stopWaiting.signal }).then((r: { StatusCode: number }) => r.StatusCode);
      exited.catch(() => {});
      try {
        const state = await inspectState(this.docker, container.id, network.name).catch((err) => {
          throw toSandboxError(err, `inspecting the container of env \`${env.name}\``);
        });
        if (!state.ip && state.running) {
          throw new SandboxError('engine_failed', `the container of env \`${env.name}\` got no address on its episode network`);
        }
        const baseUrl = `http://${state.ip}:${env.port}`;
        const outcome = state.ip
          ? await waitForHttp({ url: `${baseUrl}${env.readyPath}`, deadline, exited, signal })
          : { kind: 'exited' as const, exitCode: state.exitCode ?? -1 };
        if (outcome.kind === 'ready') {
          // an abort that lands as the env gets ready still wins: the caller gave up on it
          throwIfAborted(signal);
          this.log.info(
            {
              episode: episodeId,
              env: env.name,
              container: container.id.slice(0, 12),
              subnet: network.subnet.cidr,
              stockedNetwork: stocked !== null,
              // where the deploy's time went: network, container create, start, readiness
              networkMs: createdAt - startedAt,
              createMs: startAt - createdAt,
              startMs: runningAt - startAt,
              readyMs: Date.now() - runningAt,
              deployMs: Date.now() - startedAt,
            },
            'env ready',
          );
          return { episodeId, baseUrl, containerId: container.id, networkId: network.id, secret, gone };
        }
        const tail = await logTail(this.docker, container.id);
        // once it stopped, the engine says its exit code and whether the kernel killed it for its memory
        const after = outcome.kind === 'exited' ? await inspectState(this.docker, container.id).catch(() => null) : null;
        const seen =
          outcome.kind === 'exited'
            ? { kind: 'exited' as const, exitCode: after?.exitCode ?? outcome.exitCode, oomKilled: after ? after.oomKilled : null }
            : outcome;
        const verdict = notReadyVerdict(seen, { env, runs: 'container' });
        throw new SandboxError(verdict.fact, verdict.message, { exitCode: seen.kind === 'exited' ? seen.exitCode : null, logTail: tail });
      } finally {
        stopWaiting.abort();
      }
    } catch (err) {
      const cause = signal.aborted ? abortError(signal.reason) : toSandboxError(err, `deploying env \`${env.name}\``);
      try {
        await this.removeEpisode(episodeId);
      } catch (cleanupErr) {
        this.log.error({ episode: episodeId, err: cleanupErr }, 'could not remove what a failed deploy created; the reconciler will retry');
      }
      if (!signal.aborted) this.log.warn({ episode: episodeId, env: env.name, reason: (cause as SandboxError).reason, msg: cause.message }, 'deploy failed');
      throw cause;
    }
  }

  async diagnose(handle: EnvHandle): Promise<EnvDiagnosis> {
    this.assertOpen();
    let state;
    try {
      state = await inspectState(this.docker, handle.containerId);
    } catch (err) {
      if (isNotFound(err)) return { running: false, exitCode: this.watcher.exitCodeOf(handle.containerId), oomKilled: false, logTail: '' };
      throw toSandboxError(err, `inspecting the env container ${handle.containerId.slice(0, 12)}`);
    }
    return { running: state.running, exitCode: state.exitCode, oomKilled: state.oomKilled, logTail: await logTail(this.docker, handle.containerId) };
  }

  teardown(episodeId: string, opts: TeardownOptions = {}): Promise<void> {
    return this.lifecycles.teardown(episodeId, () => this.removeEpisode(episodeId, opts.onEnvRemoved), opts.onEnvRemoved);
  }

  /**
   * Removes the episode's labelled resources, and the stocked network it took (labelled with that
   * network's key); each subnet goes back once no network of it is left.
   */
  private async removeEpisode(episodeId: string, onContainersRemoved?: () => void): Promise<void> {
    // its own removal is no death to report
    this.watcher.forget(episodeId);
    const key = this.stock.keyTakenBy(episodeId);
    const owned = await this.list(episodeId);
    if (key) owned.networks.push(...(await this.list(key)).networks);
    const result = await this.remove(owned, onContainersRemoved);
    if (result.failed.length > 0) throw this.removalError(result, `episode ${episodeId}`);
    this.pool.release(episodeId);
    if (key) {
      this.pool.release(key);
      this.stock.forget(episodeId);
    }
  }

  async sweep(): Promise<SweepResult> {
    this.assertOpen();
    const owned = await this.list();
    const result = await this.remove(owned);
    const stillThere = new Set(result.failed.filter((f) => f.kind === 'network').map((f) => f.episode));
    for (const n of result.removed.networks) if (!stillThere.has(n.episode)) this.pool.release(n.episode);
    const removed = { containers: result.removed.containers.map((c) => c.id), networks: result.removed.networks.map((n) => n.id) };
    if (removed.containers.length + removed.networks.length > 0) this.log.info({ instance: this.instance, ...removed }, 'swept leftover env resources');
    if (result.failed.length > 0) throw this.removalError(result, `instance ${this.instance}`);
    return removed;
  }

  /**
   * Removes what dead servers of instance names starting with `prefix` left (containers, networks,
   * lock markers), sparing every name a live server holds and this sandbox's own.
   */
  async sweepAbandoned(prefix: string): Promise<AbandonedSweep> {
    this.assertOpen();
    const filters = JSON.stringify({ label: [`${LABELS.managed}=1`] });
    let found;
    try {
      const [containers, networks] = await Promise.all([this.docker.listContainers({ all: true, filters }), this.docker.listNetworks({ filters })]);
      const seen = [...containers, ...networks].map((r) => r.Labels?.[LABELS.instance]).filter((i): i is string => typeof i === 'string');
      found = (await abandonedInstances(this.docker, prefix, seen)).filter((a) => a.instance !== this.instance);
    } catch (err) {
      throw toSandboxError(err, `looking for what dead "${prefix}*" instances left`);
    }
    const out: AbandonedSweep = { instances: [], containers: [], networks: [] };
    for (const { instance, markers } of found) {
      const owned = await retry(() => listOwned(this.docker, instance), { attempts: 3, baseDelayMs: this.removeBaseDelayMs });
      const result = await this.remove(owned);
      if (result.failed.length > 0) throw this.removalError(result, `abandoned instance ${instance}`);
      await removeLockMarkers(this.docker, markers);
      out.instances.push(instance);
      out.containers.push(...result.removed.containers.map((c) => c.id));
      out.networks.push(...result.removed.networks.map((n) => n.id));
    }
    if (out.instances.length > 0) this.log.info({ ...out }, 'removed what dead servers left under instance names nobody holds');
    return out;
  }

  /** a stocked network nobody took is no episode's; one an episode took is reported as that episode's */
  async listEpisodeIds(): Promise<string[]> {
    this.assertOpen();
    const owned = await this.list();
    return this.stock.episodeIdsOf([...owned.containers, ...owned.networks].map((r) => r.episode));
  }

  private async list(episodeId?: string): Promise<Owned> {
    try {
      // no abort signal: cleanups started by close() must still get to finish
      return await retry(() => listOwned(this.docker, this.instance, episodeId), { attempts: 3, baseDelayMs: this.removeBaseDelayMs });
    } catch (err) {
      throw toSandboxError(err, `listing the resources of ${episodeId ? `episode ${episodeId}` : `instance ${this.instance}`}`);
    }
  }

  private remove(owned: Owned, onContainersRemoved?: () => void): Promise<RemoveResult> {
    return removeOwned(this.docker, owned, {
      onContainersRemoved,
      attachContainer: this.attach,
      attempts: this.removeAttempts,
      baseDelayMs: this.removeBaseDelayMs,
      log: this.log,
    });
  }

  private removalError(result: RemoveResult, what: string): SandboxError {
    this.failedRemovals += result.failed.length;
    const details = result.failed.map((f) => `${f.kind} ${f.id.slice(0, 12)}: ${engineMessage(f.error)}`).join('; ');
    this.log.error(
      { failed: result.failed.map((f) => ({ kind: f.kind, id: f.id, episode: f.episode, err: engineMessage(f.error) })) },
      `could not remove every resource of ${what}`,
    );
    return new SandboxError('engine_failed', `the Docker engine did not remove every resource of ${what} after ${this.removeAttempts} attempts: ${details}`);
  }

  /** stops deploys in flight (they remove what they created), waits for teardowns, then refuses further calls */
  async close(): Promise<void> {
    if (this.closed) return;
    await Promise.all([this.stock.close(), this.lifecycles.close('the Docker sandbox is closing')]);
    this.watcher.close();
    await this.lock.release().catch((err) => this.log.warn({ err: (err as Error).message }, 'could not release the instance name; it goes stale on its own'));
    this.closed = true;
  }
}
