/**
 * The Docker backend: one internal bridge network per episode on a subnet of our own pool (made
 * ahead of demand when the network stock has one), one env container on it, readiness over HTTP
 * (a shell env's: an exec that answers) and, when its image declares a HEALTHCHECK, the engine's
 * `healthy` (health.ts), the env's sidecars before it on its network (sidecars.ts), deaths seen in the engine's events, exec and archive
 * access to env containers for the shell toolset (`shell`), what an env used (`usage`). What every engine backend does alike (images, the instance
 * claim, the stock, deploy clean-up, teardown, sweep) is the skeleton's (engine/engine-sandbox.ts).
 *
 * Long because a Docker deploy is one walk (network, egress rules, model door, sidecars, container,
 * readiness, watches) whose clean-up on failure must see every step; each step's own work is in the
 * files beside it.
 */
import {
  LABELS,
  SandboxError,
  type AbandonedSweep,
  type DeadInstances,
  type EnvDiagnosis,
  type EnvHandle,
  type EgressDestination,
  type EnvEgress,
  type EnvSpec,
  type ModelDoorHook,
  withModelDoor,
} from '../sandbox.js';
import { newEnvSecret } from '../env-identity.js';
import { createEnvContainer, inspectState, isStorageOptRefusal, logTail, removeContainer, type ToolboxMount } from './containers.js';
import { findToolboxBinary, removeToolboxVolumes, ToolboxVolume } from '../engine/toolbox-volume.js';
import { newToolboxDir, toolboxBinary } from '../toolbox.js';
import { StorageWatch } from '../engine/storage-watch.js';
import { EPISODE_SUBNET_PREFIX, SUBNET_POOL } from '../../defaults.js';
import { notReadyVerdict } from '../../failures.js';
import { EnvWatcher } from './env-watch.js';
import { EngineSandbox, type EngineSandboxOptions } from '../engine/engine-sandbox.js';
import { isNotFound, throwIfAborted, toSandboxError } from '../engine/errors.js';
import { abandonedInstances, removeLockMarkers } from '../engine/instance-lock.js';
import type { Owner } from '../engine/labels.js';
import type { Owned, RemoveResult } from '../engine/owned.js';
import { waitForHttp, waitForProbe } from '../engine/readiness.js';
import { DockerContainerExec } from '../engine/docker-exec.js';
import { probeExec } from '../container-exec.js';
import type { Companion, EnvPausing, EnvShell, EnvUsage } from '../sandbox.js';
import { hostPids, readContainerUsage } from '../engine/usage.js';
import { createEpisodeNetwork, type EpisodeNetwork } from './bridge-network.js';
import { SubnetPool } from './subnet-pool.js';
import { EgressRules } from './egress-rules.js';
import { listContainers, removeOwned } from './removal.js';
import { notHealthyMessage, waitForHealthy } from './health.js';
import { addSidecarUsage, checkSidecarsRunning, startSidecars } from './sidecars.js';

/**
 * A running env whose cgroup holds at least this share of its pids limit, when a call into it
 * failed, has its processes at the limit: a fork bomb's forks fail, exit and fork again, so its
 * count hovers under the limit (113 of 128 was read between its forks). Its episode ends
 * env_pids_exhausted (src/failures.ts), the model's doing, not the env's.
 */
const PIDS_AT_LIMIT_SHARE = 0.85;

export interface DockerSandboxOptions extends EngineSandboxOptions {
  /** CIDR the episode subnets are carved from (default SUBNET_POOL) */
  subnetPool?: string;
  /** prefix length of one episode subnet (default EPISODE_SUBNET_PREFIX) */
  subnetPrefix?: number;
  /** the static busybox the server runs in env containers (--toolbox); default: the first of TOOLBOX_CANDIDATES */
  toolbox?: string;
  /**
   * the stock's networks are made for shell envs without a model door (hostless, not joined by the
   * server) instead of for http envs: for a bundle whose every env is a shell env, on a server
   * without the model gateway (the runtime decides: stockForShell)
   */
  stockForShell?: boolean;
}

export class DockerSandbox extends EngineSandbox<EpisodeNetwork> {
  private readonly pool: SubnetPool;
  /** deaths of the deployed env containers, as the engine reports them */
  protected readonly watcher: EnvWatcher;
  protected readonly listEnvs = listContainers(this.docker);
  /** the bounds of envs' writable layers that the engine does not keep: bytes where it cannot limit them, entries always */
  private readonly storage: StorageWatch;
  /** whether the engine limits a container's writable layer (StorageOpt): null until an env with storage_mb was created */
  private storageLimits: boolean | null = null;
  private readonly toolboxPath: string | undefined;
  /** the instance's toolbox volume, once asked for (shell.prepare, a shell env's deploy) */
  private toolbox: Promise<ToolboxVolume> | null = null;
  /** the kind of network the stock makes: a hostless shell env's (true) or an http env's */
  private readonly stockForShell: boolean;

  constructor(opts: DockerSandboxOptions) {
    super(opts, { sandbox: 'the Docker sandbox', engine: 'the Docker engine', network: 'episode network' });
    this.pool = new SubnetPool({ pool: opts.subnetPool ?? SUBNET_POOL, prefix: opts.subnetPrefix ?? EPISODE_SUBNET_PREFIX });
    this.watcher = new EnvWatcher(this.docker, this.log);
    this.storage = new StorageWatch(this.docker, this.log);
    this.toolboxPath = opts.toolbox;
    this.egressRules = new EgressRules(this.instance, this.log);
    this.stockForShell = opts.stockForShell ?? false;
  }

  /** the toolbox volume, made (or found and checked) on the first call; a failure is retried by the next */
  private toolboxVolume(): Promise<ToolboxVolume> {
    this.toolbox ??= (async () => {
      const arch = ((await this.docker.info()) as { Architecture?: string }).Architecture ?? '';
      const volume = new ToolboxVolume(this.docker, this.instance, await findToolboxBinary(this.toolboxPath, arch), this.log);
      await volume.ensure();
      return volume;
    })().catch((err: unknown) => {
      this.toolbox = null;
      throw err;
    });
    return this.toolbox;
  }

  /** where an env's toolbox comes from and goes: every env once the toolbox was asked for, a shell env always */
  private async toolboxMount(env: EnvSpec): Promise<ToolboxMount | undefined> {
    if (env.kind !== 'shell' && this.toolbox === null) return undefined;
    return { volume: (await this.toolboxVolume()).name, dir: newToolboxDir() };
  }

  /**
   * The env's container, its writable layer limited by the engine when it can (the first env with a
   * storage_mb finds out: an engine that refuses StorageOpt is then watched instead, storage-watch.ts).
   */
  private async createContainer(
    owner: Owner,
    env: EnvSpec,
    network: EpisodeNetwork,
    secret: string | undefined,
    toolbox: ToolboxMount | undefined,
    routed: boolean,
  ) {
    const mount = { ...(toolbox ? { toolbox } : {}), noRouteOut: !routed };
    if (env.resources.storageMb === undefined || this.storageLimits === false) return createEnvContainer(this.docker, owner, env, network, secret, mount);
    try {
      const c = await createEnvContainer(this.docker, owner, env, network, secret, { storageLimit: true, ...mount });
      this.storageLimits = true;
      return c;
    } catch (err) {
      if (!isStorageOptRefusal(err)) throw err;
      this.storageLimits = false;
      this.log.info(
        { err: (err as Error).message },
        "the Docker engine cannot limit a container's writable layer (its storage driver): envs' storage_mb is kept by watching their layer",
      );
      return createEnvContainer(this.docker, owner, env, network, secret, mount);
    }
  }

  protected override async removeEnv(envId: string, onEnvRemoved?: () => void, recycle = true): Promise<void> {
    this.storage.forget(envId);
    await super.removeEnv(envId, onEnvRemoved, recycle);
    // once its container is gone: nothing of it sends through them any more
    await this.egressRules.close(envId);
  }

  override async close(): Promise<void> {
    this.storage.close();
    await super.close();
    // after every env is gone: a volume still mounted cannot be removed
    const toolbox = await this.toolbox?.catch(() => null);
    await toolbox?.remove();
  }

  protected async checkEngine(): Promise<void> {
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

  /** episode networks held by episodes (deploying, live or being removed); the stock's are not counted */
  networksInUse(): number {
    return this.pool.inUse - this.networks.held;
  }

  protected holdsNetwork(envId: string): boolean {
    return this.pool.holds(envId);
  }

  /** each subnet goes back once no network of its holder is left */
  protected released(envId: string): void {
    this.pool.release(envId);
  }

  protected makeStockedNetwork(owner: Owner): Promise<EpisodeNetwork> {
    return this.makeNetwork(owner, { forShell: this.stockForShell });
  }

  protected override canCheckEmpty(): boolean {
    return true;
  }

  /** no container on the bridge any more, the server's own (when it joined) aside */
  protected override async networkIsEmpty(net: EpisodeNetwork): Promise<boolean> {
    const info = (await this.docker.getNetwork(net.id).inspect()) as { Containers?: Record<string, unknown> };
    return Object.keys(info.Containers ?? {}).every((id) => id === this.attach);
  }

  /**
   * An episode network on a fresh subnet, joined by the server's container when it has one
   * (labelled: removed with its owner's id). With a container set, episode bridges get no host
   * address, so envs cannot reach services on the host either.
   */
  private async makeNetwork(owner: Owner, opts: { forShell?: boolean; routed?: boolean } = {}): Promise<EpisodeNetwork> {
    const network = await createEpisodeNetwork(this.docker, this.pool, owner, this.log, {
      hostless: !opts.routed && (this.attach !== null || opts.forShell === true),
      routed: opts.routed === true,
    });
    if (!opts.forShell) await this.join(network.id);
    return network;
  }

  /** the egress allowlist's host rules (egress-rules.ts) */
  private readonly egressRules: EgressRules;

  override readonly egress: EnvEgress = { check: () => this.egressRules.check() };

  override async sweep() {
    const swept = await super.sweep();
    await this.egressRules.sweep();
    return swept;
  }

  override readonly modelDoors = true;
  /** an env's sidecars run beside it on its episode network (sidecars.ts) */
  readonly sidecars = true;
  readonly e2bSandboxes = true;

  protected async deployEnv(
    owner: Owner,
    env: EnvSpec,
    signal: AbortSignal,
    modelDoor?: ModelDoorHook,
    egress?: readonly EgressDestination[],
  ): Promise<EnvHandle> {
    const envId = owner.episode;
    const startedAt = Date.now();
    throwIfAborted(signal);
    // The server never reaches a shell env over its network (it acts through the engine's exec
    // API): its network gives the host no address and the server's container does not join it,
    // so the env reaches nothing but itself, not even what listens on the host. (A stocked
    // network is made for http envs: joined, or with a host address.) A shell env with a model
    // door gets an http env's network instead: the door needs the server's address on it, and
    // the door's source check, the API's guard and the lock-down keep the rest closed, as for
    // every http env (docs/gateway.md).
    const shell = env.kind === 'shell';
    // an env with an egress allowlist gets a routed network of its own, its rules set before it starts
    const routed = (egress?.length ?? 0) > 0;
    // an env given rules with a door reaches its door and nothing else of this host; from a
    // container the door is the container's own address on a hostless network: no host to close
    const rules = routed || (egress !== undefined && modelDoor !== undefined && !this.attach);
    const hostless = shell && !modelDoor && !routed;
    // the stock holds one kind of network (stockForShell): a deploy takes one of its own kind only
    const stocked = routed || hostless !== this.stockForShell ? null : this.networks.take(envId);
    const network = stocked?.net ?? (await this.makeNetwork(owner, routed ? { forShell: shell, routed: true } : { forShell: hostless }));
    throwIfAborted(signal);
    // the gateway's door on this network: on the host, the bridge's own address; from a container
    // joined to it, the container's address there (the door finds it by the subnet)
    let door: EgressDestination | null = null;
    if (modelDoor) {
      const opened = await modelDoor({ subnet: network.subnet.cidr, ...(this.attach ? {} : { address: network.subnet.gateway }) });
      env = withModelDoor(env, opened);
      door = opened.door;
    }
    throwIfAborted(signal);
    if (rules) await this.egressRules.open(envId, network.subnet.cidr, [...(egress ?? []), ...(door ? [door] : [])]);
    throwIfAborted(signal);
    // listening before the container exists, so no death of it goes unseen
    await this.watcher.start();
    // the env's sidecars first, on its network, each running (and healthy, when it has a check) before it is made (sidecars.ts)
    const sidecarsAt = Date.now();
    const sidecars = env.sidecars?.length
      ? await startSidecars(this.docker, owner, { name: env.name, runtime: env.runtime ?? this.runtime, sidecars: env.sidecars }, network, {
          noRouteOut: !routed,
          deadline: sidecarsAt + env.deployTimeoutMs,
          signal,
        })
      : [];
    throwIfAborted(signal);
    const createdAt = Date.now();
    const deadline = sidecarsAt + env.deployTimeoutMs;
    const secret = shell ? undefined : newEnvSecret();
    const toolbox = await this.toolboxMount(env);
    throwIfAborted(signal);
    const container = await this.createContainer(owner, env, network, secret, toolbox, routed);
    const toolboxAt = toolbox ? toolboxBinary(toolbox.dir) : null;
    const gone = this.watcher.watch(envId, container.id, network.id);
    throwIfAborted(signal);
    const startAt = Date.now();
    try {
      await container.start();
    } catch (err) {
      throw toSandboxError(err, `starting the container of env \`${env.name}\``);
    }
    // the bytes where the engine does not limit them; the entries always (no engine limits those)
    this.storage.watch(envId, container.id, {
      storageMb: env.resources.storageMb !== undefined && !this.storageLimits ? env.resources.storageMb : null,
      maxFiles: env.resources.maxFiles ?? null,
      ...(env.resources.defaulted ? { defaulted: env.resources.defaulted } : {}),
    });
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
      const baseUrl = shell ? '' : `http://${state.ip}:${env.port}`;
      const probing = new DockerContainerExec(this.docker, container.id, toolboxAt);
      let outcome = !state.ip
        ? { kind: 'exited' as const, exitCode: state.exitCode ?? -1 }
        : shell
          ? await waitForProbe((ms, s) => probeExec(probing, ms, s), { deadline, exited, signal })
          : await waitForHttp({ url: `${baseUrl}${env.readyPath}`, deadline, exited, signal });
      if (outcome.kind === 'ready') {
        // and, when its image declares a HEALTHCHECK, once the engine says it is healthy (health.ts)
        const health = await waitForHealthy(this.docker, container.id, { deadline, signal }).catch((err: unknown) => {
          throwIfAborted(signal);
          throw toSandboxError(err, `reading the health of the container of env \`${env.name}\``);
        });
        if (health.kind === 'not_healthy' && health.why === 'exited') outcome = { kind: 'exited', exitCode: await exited.catch(() => -1) };
        else if (health.kind === 'not_healthy')
          throw new SandboxError('not_ready_in_time', notHealthyMessage(env, health), { logTail: await logTail(this.docker, container.id) });
      }
      if (outcome.kind === 'ready') {
        // an abort that lands as the env gets ready still wins: the caller gave up on it
        throwIfAborted(signal);
        if (sidecars.length) await checkSidecarsRunning(this.docker, sidecars, { name: env.name, sidecars: env.sidecars! });
        const readyAt = Date.now();
        // where the deploy's time went: network, container create, start, readiness
        const stagesMs = {
          network: sidecarsAt - startedAt,
          ...(sidecars.length ? { sidecars: createdAt - sidecarsAt } : {}),
          create: startAt - createdAt,
          start: runningAt - startAt,
          ready: readyAt - runningAt,
        };
        this.log.info(
          {
            episode: envId,
            env: env.name,
            container: container.id.slice(0, 12),
            subnet: network.subnet.cidr,
            stockedNetwork: stocked !== null,
            ...Object.fromEntries(Object.entries(stagesMs).map(([k, v]) => [`${k}Ms`, v])),
            deployMs: readyAt - startedAt,
          },
          'env ready',
        );
        return {
          envId,
          baseUrl,
          containerId: container.id,
          networkId: network.id,
          ...(secret ? { secret } : {}),
          ...(toolboxAt ? { toolbox: toolboxAt } : {}),
          gone,
          stagesMs,
          ...(sidecars.length ? { sidecars } : {}),
        };
      }
      const tail = await logTail(this.docker, container.id);
      // once it stopped, the engine says its exit code and whether the kernel killed it for its memory
      const after = outcome.kind === 'exited' ? await inspectState(this.docker, container.id).catch(() => null) : null;
      const seen =
        outcome.kind === 'exited'
          ? // under gVisor the engine does not always see an OOM kill: not seeing one there is not knowing
            {
              kind: 'exited' as const,
              exitCode: after?.exitCode ?? outcome.exitCode,
              oomKilled: after && (after.oomKilled || env.runtime !== 'runsc') ? after.oomKilled : null,
            }
          : outcome;
      const storageEnd = outcome.kind === 'exited' ? this.storage.exceeded(container.id) : null;
      if (storageEnd !== null) throw new SandboxError('storage_exceeded', `env \`${env.name}\`: ${storageEnd} before it was ready`, { logTail: tail });
      const verdict = notReadyVerdict(seen, { env, runs: 'container' });
      throw new SandboxError(verdict.fact, verdict.message, { exitCode: seen.kind === 'exited' ? seen.exitCode : null, logTail: tail });
    } finally {
      stopWaiting.abort();
    }
  }

  /** the env containers' processes and files, through the engine's exec and archive APIs, the server's steps through the toolbox */
  readonly shell: EnvShell = {
    prepare: async () => {
      await this.toolboxVolume();
    },
    exec: (handle) => new DockerContainerExec(this.docker, handle.containerId, handle.toolbox ?? null),
    companion: (handle, env, signal) => this.companion(handle, env, signal),
  };

  /** a clean verifier's container: the env's image as a shell env, on no network, labelled as the env's */
  private async companion(handle: EnvHandle, env: EnvSpec, signal?: AbortSignal): Promise<Companion> {
    const spec: EnvSpec = { ...env, kind: 'shell' };
    const toolbox = (await this.toolboxMount(spec))!;
    const container = await createEnvContainer(this.docker, this.ownerOf(handle.envId, `${env.name}-verifier`), spec, null, undefined, { toolbox });
    const remove = () => removeContainer(this.docker, container.id);
    try {
      await container.start();
      const exec = new DockerContainerExec(this.docker, container.id, toolboxBinary(toolbox.dir));
      const stop = new AbortController();
      const onAbort = () => stop.abort();
      signal?.addEventListener('abort', onAbort, { once: true });
      try {
        const probe = await waitForProbe((ms, s) => probeExec(exec, ms, s), {
          deadline: Date.now() + env.deployTimeoutMs,
          exited: new Promise<number>(() => {}),
          signal: stop.signal,
        });
        if (probe.kind !== 'ready')
          throw new SandboxError(
            'not_ready_in_time',
            `the clean verifier's container of env \`${env.name}\` did not answer within ${env.deployTimeoutMs / 1000} s`,
          );
      } finally {
        signal?.removeEventListener('abort', onAbort);
      }
      return { exec, remove };
    } catch (err) {
      await remove().catch(() => undefined);
      throw err instanceof SandboxError ? err : toSandboxError(err, `starting the clean verifier's container of env \`${env.name}\``);
    }
  }

  /** the engine's pause: the env's processes frozen (its cgroup's freezer), its container and network kept */
  readonly pausing: EnvPausing = {
    pause: async (handle) => {
      await this.docker
        .getContainer(handle.containerId)
        .pause()
        .catch((err: unknown) => {
          throw toSandboxError(err, `pausing the env container ${handle.containerId.slice(0, 12)}`);
        });
    },
    unpause: async (handle) => {
      await this.docker
        .getContainer(handle.containerId)
        .unpause()
        .catch((err: unknown) => {
          throw toSandboxError(err, `resuming the env container ${handle.containerId.slice(0, 12)}`);
        });
    },
  };

  /** what an env container used: its cgroup's figures and its writable layer (usage.ts) */
  readonly usage: EnvUsage = {
    read: async (handle, signal) => {
      const own = readContainerUsage(this.docker, handle.containerId, signal, { toolbox: handle.toolbox ?? null });
      if (!handle.sidecars?.length) return own;
      // its sidecars' count too (sidecars.ts)
      const theirs = handle.sidecars.map((id) =>
        readContainerUsage(this.docker, id, signal).catch(() => ({ cpuS: null, peakMemoryBytes: null, bytesWritten: null })),
      );
      return addSidecarUsage(await own, await Promise.all(theirs));
    },
  };

  protected async inspectEnv(handle: EnvHandle): Promise<EnvDiagnosis> {
    let state;
    try {
      state = await inspectState(this.docker, handle.containerId);
    } catch (err) {
      if (isNotFound(err))
        return { running: false, exitCode: this.watcher.exitCodeOf(handle.containerId), oomKilled: false, logTail: '', ...this.storageEnd(handle) };
      throw toSandboxError(err, `inspecting the env container ${handle.containerId.slice(0, 12)}`);
    }
    return {
      running: state.running,
      exitCode: state.exitCode,
      oomKilled: state.oomKilled,
      logTail: await logTail(this.docker, handle.containerId),
      ...this.storageEnd(handle),
      ...(state.pid !== null ? await pidsEnd(state.pid) : {}),
      ...this.killedFromInside(handle, state),
    };
  }

  /**
   * A shell env whose keeper (process 1) died of a signal while the engine, heard throughout,
   * sent it none and saw no OOM: only a process of the env's own could have sent it (under runc
   * the kernel refuses that; gVisor lets a process signal 1).
   */
  private killedFromInside(
    handle: EnvHandle,
    state: { running: boolean; exitCode: number | null; oomKilled: boolean; keeper: boolean },
  ): {
    killedFromInside?: string;
  } {
    if (state.running || !state.keeper || state.oomKilled || state.exitCode === null || state.exitCode <= 128) return {};
    const kills = this.watcher.killsOf(handle.containerId);
    if (!kills || !kills.heardAll || kills.engineKill !== null || this.storage.exceeded(handle.containerId) !== null) return {};
    return {
      killedFromInside: `its process 1 (the server's keeper) was killed by signal ${state.exitCode - 128}, which the engine did not send: a process in the env sent it`,
    };
  }

  /** the env was killed for what it wrote past a bound of its writable layer */
  private storageEnd(handle: EnvHandle): { storageExceeded?: string } {
    const why = this.storage.exceeded(handle.containerId);
    return why === null ? {} : { storageExceeded: why };
  }

  protected removeOwned(owned: Owned, onEnvRemoved?: () => void): Promise<RemoveResult> {
    return removeOwned(this.docker, owned, { ...this.removal, onEnvRemoved });
  }

  /** what dead servers left under instance names nobody holds: containers, networks, lock markers */
  readonly deadInstances: DeadInstances = { sweep: (prefix) => this.sweepDeadInstances(prefix) };

  /**
   * Removes what dead servers of instance names starting with `prefix` left (containers, networks,
   * lock markers), sparing every name a live server holds and this sandbox's own.
   */
  private async sweepDeadInstances(prefix: string): Promise<AbandonedSweep> {
    this.assertOpen();
    const filters = JSON.stringify({ label: [`${LABELS.managed}=1`] });
    let found;
    try {
      const [containers, networks] = await Promise.all([this.listEnvs(filters), this.docker.listNetworks({ filters })]);
      const seen = [...containers.map((c) => c.labels), ...networks.map((n) => n.Labels)]
        .map((l) => l?.[LABELS.instance])
        .filter((i): i is string => typeof i === 'string');
      found = (await abandonedInstances(this.docker, prefix, seen)).filter((a) => a.instance !== this.instance);
    } catch (err) {
      throw toSandboxError(err, `looking for what dead "${prefix}*" instances left`);
    }
    const out: AbandonedSweep = { instances: [], containers: [], networks: [] };
    for (const { instance, markers } of found) {
      const result = await this.removeOwned(await this.list(undefined, instance));
      if (result.failed.length > 0) throw this.removalError(result.failed, `abandoned instance ${instance}`);
      await removeLockMarkers(this.docker, markers);
      await removeToolboxVolumes(this.docker, instance);
      out.instances.push(instance);
      out.containers.push(...result.removed.envs.map((c) => c.id));
      out.networks.push(...result.removed.networks.map((n) => n.id));
    }
    if (out.instances.length > 0) this.log.info({ ...out }, 'removed what dead servers left under instance names nobody holds');
    return out;
  }
}

/**
 * A running env whose processes hold its pids limit (PIDS_AT_LIMIT_SHARE of it or more: a fork
 * bomb's count hovers under it), read from its cgroup on this host; nothing when that cannot be
 * read.
 */
async function pidsEnd(pid: number): Promise<{ pidsAtLimit?: string }> {
  const p = await hostPids(pid);
  if (p === null || p.current < p.max * PIDS_AT_LIMIT_SHARE) return {};
  return { pidsAtLimit: `its processes held ${p.current} of its pids limit of ${p.max}: no new process could start` };
}
