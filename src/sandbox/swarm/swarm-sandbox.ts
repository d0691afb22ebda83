/**
 * The Docker Swarm backend: per episode, an overlay network of its own (internal, attachable) and
 * a service of one replica of the env's image on it, placed by swarm on any node. The server runs
 * in a container on a manager node, joins each episode's overlay, and reaches the env at its task's
 * own overlay address (endpoint mode dnsrr: no VIP, no IPVS); an env with a model door has it on
 * the server container's own address on its overlay. What every engine backend does alike
 * (images, the instance claim and its loss, the stock, deploy clean-up, teardown, sweep) is the
 * skeleton's (engine/engine-sandbox.ts); images are pushed to the registry every node pulls from.
 * What only the node running an env can tell (what it used, its writable layer, an OOM kill) is
 * asked of that node's engine when the server reaches it (node-engines.ts); so is what the shell
 * toolset and the verifier do in an env's container (`shell`: exec and archive access through the
 * engine of the env's node, the toolbox's volume on each node, a clean verifier's container beside
 * the env: shell.ts).
 *
 * Long because a swarm deploy is one walk of many steps (overlay, service, the task's placement,
 * its node's engine), each undone on failure by the same walk; what is not that walk is in files of
 * its own (tasks.ts, services.ts, node-engines.ts, removal.ts).
 */
import {
  LABELS,
  SandboxError,
  type Companion,
  type EnvDiagnosis,
  type EnvShell,
  type EnvHandle,
  type EnvRuntime,
  type EnvSpec,
  type EnvUsage,
  type EnvUsageReading,
  type ImageBuildRequest,
  type ModelDoorHook,
  withModelDoor,
} from '../sandbox.js';
import { newEnvSecret } from '../env-identity.js';
import { SWARM } from '../../defaults.js';
import { notReadyVerdict } from '../../failures.js';
import { fmtS } from '../../util/time.js';
import { EngineSandbox, type EngineSandboxOptions } from '../engine/engine-sandbox.js';
import { isNotFound, throwIfAborted, toSandboxError } from '../engine/errors.js';
import { apiAtLeast, SWARM_NO_NEW_PRIVILEGES_API, swarmLockdown, type SwarmEngine } from '../engine/hardening.js';
import type { Owner } from '../engine/labels.js';
import type { Owned, RemoveResult } from '../engine/owned.js';
import { waitForHttp, waitForProbe } from '../engine/readiness.js';
import { DockerContainerExec } from '../engine/docker-exec.js';
import { probeExec, type ContainerExec } from '../container-exec.js';
import { toolboxBinary } from '../toolbox.js';
import { createCompanion, removeNodeContainer, sweepCompanions, SwarmToolboxes, UnreachedExec } from './shell.js';
import { sleep } from '../engine/retry.js';
import { readContainerUsage } from '../engine/usage.js';
import { NodeEngines, nodeNames, type NodeEngine } from './node-engines.js';
import { pushToRegistry } from './registry.js';
import { listServices, removeOwned } from './removal.js';
import {
  createEnvService,
  createEpisodeOverlay,
  type EpisodeOverlay,
  imageRejection,
  isImageRejection,
  overlaySubnet,
  ownAddressUp,
  serviceLogTail,
  swarmName,
} from './services.js';
import { DeployStages } from './deploy-stages.js';
import { TaskWatcher } from './task-watch.js';
import { latestTask, listNodes, listTasks, LOST_NODE_STATES, NodeListing, taskAddress, TERMINAL_STATES, whyUnschedulable, type SwarmTask } from './tasks.js';

export interface SwarmSandboxOptions extends EngineSandboxOptions {
  /**
   * The server's own container on the manager: it joins each episode's overlay to reach the env.
   * Required in practice: the overlay exists only inside containers, not on any host.
   */
  attachContainer: string | null;
  /** HOST:PORT of a registry every node pulls from; env images are pushed there and run by digest */
  registry?: string | null;
  /** how long a network removal waits for the tasks of its removed service to be gone */
  networkRemovalMs?: number;
  /** how often the deployed envs' tasks and nodes are checked */
  watchIntervalMs?: number;
  /** engines of other nodes the server reaches (`unix:///…`, `tcp://…`; the manager's own is always reached): --swarm-node-engine */
  nodeEngines?: readonly string[];
  /** the static busybox the server runs in env containers (--toolbox); default: the first of TOOLBOX_CANDIDATES */
  toolbox?: string;
}

/** a reading of nothing: the env's node is not one the server reaches */
const NOT_READ: EnvUsageReading = { cpuS: null, peakMemoryBytes: null, bytesWritten: null };

export class SwarmSandbox extends EngineSandbox<EpisodeOverlay> {
  private readonly registry: string | null;
  private readonly networkRemovalMs: number;
  /** episodes whose overlay may exist (created, or creation in doubt) and is not yet removed */
  private readonly overlays = new Set<string>();
  private readonly nodes: NodeListing;
  protected readonly watcher: TaskWatcher;
  protected readonly listEnvs = listServices(this.docker);
  /** the manager's API version and default runtime, asked once (what of the lock-down its services take) */
  private engineFacts: Promise<SwarmEngine> | null = null;
  private readonly nodeEngineAddresses: readonly string[];
  /** the engines of the nodes the server reaches, asked once who they are */
  private nodeEnginesAsked: Promise<NodeEngines> | null = null;
  /** each deployed env's node engine (when the server reaches it) and container there */
  private readonly placed = new Map<string, { engine: NodeEngine; containerId: string }>();
  /** nodes already warned about (an env with a bound of its writable layer placed where the server cannot watch it) */
  private readonly unwatchedNodes = new Set<string>();
  /** the toolbox's volume on each node engine the server reaches */
  private readonly toolboxes: SwarmToolboxes;
  /** the clean verifiers' containers still there, by episode: removed with it */
  private readonly companions = new Map<string, Map<string, () => Promise<void>>>();

  constructor(opts: SwarmSandboxOptions) {
    super(opts, { sandbox: 'the swarm sandbox', engine: 'the swarm', network: 'overlay' });
    this.registry = opts.registry ?? null;
    this.networkRemovalMs = opts.networkRemovalMs ?? SWARM.networkRemovalMs;
    this.nodes = new NodeListing(this.docker, SWARM.nodeListMaxAgeMs);
    this.watcher = new TaskWatcher(this.docker, this.log, opts.watchIntervalMs ?? SWARM.watchIntervalMs);
    this.nodeEngineAddresses = opts.nodeEngines ?? [];
    this.toolboxes = new SwarmToolboxes(this.instance, opts.toolbox, this.log);
  }

  /** the engine answers and is a manager of an active swarm */
  protected async checkEngine(): Promise<void> {
    let info: { Swarm?: { LocalNodeState?: string; ControlAvailable?: boolean } };
    try {
      info = (await this.docker.info()) as typeof info;
    } catch (err) {
      throw toSandboxError(err, 'answering a ping');
    }
    const state = info.Swarm?.LocalNodeState ?? 'inactive';
    if (state !== 'active' || !info.Swarm?.ControlAvailable) {
      throw new SandboxError(
        'engine_failed',
        `--sandbox swarm needs the engine of a swarm manager, and this one is ${state === 'active' ? 'a worker' : `not in a swarm (state: ${state})`}: run the server on a manager node`,
      );
    }
  }

  /** the manager's version and default runtime: asked once */
  private engine(): Promise<SwarmEngine> {
    this.engineFacts ??= Promise.all([this.docker.version(), this.docker.info() as Promise<{ DefaultRuntime?: string }>]).then(
      ([v, i]) => ({ apiVersion: v.ApiVersion, defaultRuntime: i.DefaultRuntime ?? 'runc' }),
      (err) => {
        this.engineFacts = null;
        throw toSandboxError(err, 'answering what version it is');
      },
    );
    return this.engineFacts;
  }

  /**
   * The engine's facts and whether every node's engine gives its containers no-new-privileges
   * (asked only where a service cannot ask for it: below API 1.44), for what an env is granted
   */
  private async lockdownFacts(env: EnvSpec): Promise<SwarmEngine> {
    const engine = await this.engine();
    if (apiAtLeast(engine.apiVersion, SWARM_NO_NEW_PRIVILEGES_API)) return engine;
    const [engines, nodes] = await Promise.all([this.nodeEngines(), this.nodes.get()]);
    return { ...engine, nodesNoNewPrivileges: (await engines.whyNotNoNewPrivileges(nodes, env.image, this.log)) ?? true };
  }

  /** the engines of the nodes the server reaches (the manager's and each --swarm-node-engine), asked who they are once */
  private nodeEngines(): Promise<NodeEngines> {
    this.nodeEnginesAsked ??= NodeEngines.connect(this.docker, this.nodeEngineAddresses, this.log);
    this.nodeEnginesAsked.catch(() => (this.nodeEnginesAsked = null));
    return this.nodeEnginesAsked;
  }

  /** the nodes' default runtime, what the manager's services cannot take, and a storage bound kept only where a node's engine is reached */
  protected override async onEngine(env: EnvSpec & { runtime: EnvRuntime }): Promise<{ runtime: EnvRuntime; notEnforced: string[] }> {
    const l = swarmLockdown({ resources: env.resources, security: env.security, runtime: env.runtime }, await this.lockdownFacts(env));
    const notEnforced = [...l.not_enforced];
    const bounds = layerBoundNames(env);
    if (bounds) {
      const unreached = (await this.nodeEngines()).unreached(await this.nodes.get());
      if (unreached.length > 0)
        notEnforced.push(
          `${bounds}: not watched on ${nodeNames(unreached)}, whose engine the server cannot ask (--swarm-node-engine): an env placed there may write without bound`,
        );
    }
    return { runtime: l.runtime, notEnforced };
  }

  /**
   * A service cannot choose its runtime: its tasks run under the nodes' default-runtime, so gVisor
   * on swarm is the manager's default-runtime (and every node's, which this cannot see).
   */
  protected override async engineHasRuntime(runtime: EnvRuntime): Promise<void> {
    if (runtime === 'runc') return;
    const { defaultRuntime } = await this.engine();
    if (defaultRuntime !== runtime) {
      throw new SandboxError(
        'engine_failed',
        `--sandbox swarm cannot choose a service's runtime, and the manager's default-runtime is ${defaultRuntime}, not ${runtime}: ` +
          `make "${runtime}" the "default-runtime" of every node (/etc/docker/daemon.json), or serve without --runtime ${runtime}`,
      );
    }
  }

  /** pushed to the registry every node pulls from, and run by digest (without one: the manager's own tag) */
  protected override publishImage(tag: string, req: ImageBuildRequest): Promise<string> {
    return this.registry ? pushToRegistry(this.docker, tag, this.registry, req.onProgress) : Promise.resolve(tag);
  }

  /** overlays held by episodes (deploying, live or being removed); the stock's are not counted */
  networksInUse(): number {
    return this.overlays.size;
  }

  protected holdsNetwork(envId: string): boolean {
    return this.overlays.has(envId);
  }

  protected released(envId: string): void {
    this.overlays.delete(envId);
  }

  /**
   * An overlay for the stock, joined by the server's container: the join is the costly part of an
   * overlay (the engine joins one container to its networks one at a time), and a stocked overlay
   * has it done before any reset waits on it.
   */
  protected async makeStockedNetwork(owner: Owner): Promise<EpisodeOverlay> {
    const network = await createEpisodeOverlay(this.docker, owner, swarmName(owner));
    await this.join(network.id);
    return network;
  }

  /** an env's model door on its overlay, the server container's own address there (DeployRequest.modelDoor) */
  override readonly modelDoors = true;

  protected async deployEnv(owner: Owner, env: EnvSpec, signal: AbortSignal, modelDoor?: ModelDoorHook): Promise<EnvHandle> {
    // the swarm runs no sidecars yet: a bundle with some is refused at start (env-catalog.ts), a deploy of one here
    if (env.sidecars?.length)
      throw new SandboxError(
        'engine_failed',
        `the swarm sandbox runs no sidecars (env \`${env.name}\`: ${env.sidecars.map((s) => s.name).join(', ')}): serve it with --sandbox docker`,
      );
    const envId = owner.episode;
    const startedAt = Date.now();
    const shell = env.kind === 'shell';
    // where the deploy's time goes, stage by stage (the `env ready` line carries them)
    const stages = new DeployStages(startedAt);
    // the server's container joining the overlay, once it has begun (awaited before any cleanup)
    let joined: Promise<number> | null = null;
    try {
      // a task no node can ever hold would wait in "pending" forever: say so at once
      const nodes = await this.nodes.get().catch((err) => {
        throw toSandboxError(err, 'listing the swarm nodes');
      });
      stages.mark('nodes');
      const impossible = whyUnschedulable(nodes, env.resources.memoryMb, env.resources.cpus);
      if (impossible) throw new SandboxError('unplaceable', `env \`${env.name}\` cannot be placed on any node of the swarm: ${impossible}`);
      // the toolbox (a shell env's always, every env's once it was asked for): its volume on every
      // node the server reaches, and the env kept off the others (shell.ts)
      let toolbox: { volume: string; dir: string } | undefined;
      let constraints: string[] = [];
      if (shell || this.toolboxes.asked) {
        const { volume, nodes: ready } = await this.toolboxes.ensure(await this.nodeEngines());
        constraints = SwarmToolboxes.placement(nodes, ready, env.name);
        toolbox = SwarmToolboxes.mount(volume);
        stages.mark('toolbox');
      }
      throwIfAborted(signal);
      this.overlays.add(envId);
      // The server never reaches a shell env over its overlay (it acts through the engine of the
      // env's node): the server's container does not join it, so the env reaches nothing but
      // itself there; a stocked overlay is joined already, so a shell env makes its own. A shell
      // env with a model door gets an http env's overlay instead, joined: the door listens on the
      // server's own address there (as on one host, docker-sandbox.ts).
      const joins = !shell || modelDoor !== undefined;
      const stocked = joins ? this.networks.take(envId) : null;
      const network = stocked?.net ?? (await createEpisodeOverlay(this.docker, owner, swarmName(owner)));
      stages.mark('overlay');
      throwIfAborted(signal);
      // a stocked overlay is joined already; otherwise the join runs while swarm creates, schedules
      // and starts the task: only the readiness check needs it, and the engine joins one container
      // to its networks one at a time, so in a burst the joins queue behind each other (measured:
      // the largest stage when it ran first)
      joined = stocked || !joins ? Promise.resolve(0) : this.join(network.id);
      joined.catch(() => undefined);
      // the gateway's door on this overlay: the server container's own address there, found by
      // the overlay's subnet once the join is done and the address is up; what it opens goes into
      // the service's environment and hosts, so it is known before the service is made
      if (modelDoor) {
        await joined;
        const subnet = await overlaySubnet(this.docker, network.id);
        await ownAddressUp(subnet, signal);
        const opened = await modelDoor({ subnet });
        env = withModelDoor(env, opened);
        stages.mark('door');
        throwIfAborted(signal);
      }
      const deadline = Date.now() + env.deployTimeoutMs;
      const secret = shell ? undefined : newEnvSecret();
      const serviceId = await createEnvService(this.docker, owner, env, network, env.image, secret, await this.engine(), { toolbox, constraints });
      stages.mark('service');
      const gone = this.watcher.watch(envId, serviceId);
      throwIfAborted(signal);
      const { task, ip, polls, pulledMs } = await this.waitForTask(serviceId, network.id, env, deadline, signal, stages);
      await this.place(envId, task, env);
      const placed = this.placed.get(envId);
      if (toolbox && !placed)
        throw new SandboxError(
          'engine_failed',
          `the task of env \`${env.name}\` runs on node ${task.NodeID?.slice(0, 12) ?? '?'}, whose engine the server does not reach, or which named no container: the server's steps cannot run there`,
        );
      const toolboxAt = toolbox ? toolboxBinary(toolbox.dir) : null;
      const connectMs = await joined;
      stages.mark('attach');
      throwIfAborted(signal);
      const exited = new Promise<number>((resolve) => {
        if (gone.aborted) resolve(-1);
        else gone.addEventListener('abort', () => resolve(-1), { once: true });
      });
      const baseUrl = shell ? '' : `http://${ip}:${env.port}`;
      // the image pull's time is the node's, not the env's: the readiness keeps what the pull took;
      // a shell env is ready when an exec in it answers, through its node's engine
      const probing = placed ? new DockerContainerExec(placed.engine.docker, placed.containerId, toolboxAt) : null;
      const outcome =
        shell && probing
          ? await waitForProbe((ms, s) => probeExec(probing, ms, s), { deadline: deadline + pulledMs, exited, signal })
          : await waitForHttp({ url: `${baseUrl}${env.readyPath}`, deadline: deadline + pulledMs, exited, signal });
      if (outcome.kind === 'ready') {
        throwIfAborted(signal);
        stages.mark('ready');
        this.log.info(
          {
            episode: envId,
            env: env.name,
            service: serviceId.slice(0, 12),
            task: task.ID.slice(0, 12),
            node: task.NodeID?.slice(0, 12),
            address: ip,
            stockedOverlay: stocked !== null,
            ...stages.fields(),
            connectMs,
            taskPolls: polls,
            deployMs: Date.now() - startedAt,
          },
          'env ready',
        );
        return {
          envId,
          baseUrl,
          containerId: serviceId,
          networkId: network.id,
          ...(secret ? { secret } : {}),
          ...(toolboxAt ? { toolbox: toolboxAt } : {}),
          gone,
          stagesMs: stages.byStage(),
        };
      }
      if (outcome.kind === 'exited') {
        const storageEnd = this.storageEnd(envId);
        if (storageEnd)
          throw new SandboxError('storage_exceeded', `env \`${env.name}\`: ${storageEnd} before it was ready`, {
            logTail: await serviceLogTail(this.docker, serviceId),
          });
        const latest = latestTask(await listTasks(this.docker, [serviceId]).catch(() => []), serviceId) ?? task;
        throw await this.endedError(latest, serviceId, env);
      }
      const verdict = notReadyVerdict(outcome, { env, runs: 'task', at: ip });
      throw new SandboxError(verdict.fact, verdict.message, { exitCode: null, logTail: await serviceLogTail(this.docker, serviceId) });
    } finally {
      // a join still in flight would land after the cleanup's disconnect and hold the overlay
      await joined?.catch(() => undefined);
    }
  }

  /**
   * Notes the node engine and container of the env's running task, when the server reaches that
   * node, and watches its writable layer there if the env has a bound of it (bytes, entries).
   */
  private async place(envId: string, task: SwarmTask, env: EnvSpec): Promise<void> {
    // (asked at start already: a failure now costs this env its watch, not its deploy)
    const engine = (await this.nodeEngines().catch(() => null))?.of(task.NodeID) ?? null;
    const containerId = task.Status?.ContainerStatus?.ContainerID;
    if (engine && containerId) {
      this.placed.set(envId, { engine, containerId });
      engine.storage.watch(envId, containerId, {
        storageMb: env.resources.storageMb ?? null,
        maxFiles: env.resources.maxFiles ?? null,
        ...(env.resources.defaulted ? { defaulted: env.resources.defaulted } : {}),
      });
    } else if (layerBoundNames(env) && task.NodeID && !this.unwatchedNodes.has(task.NodeID)) {
      this.unwatchedNodes.add(task.NodeID);
      this.log.warn(
        { episode: envId, env: env.name, node: task.NodeID.slice(0, 12) },
        `an env with ${layerBoundNames(env)} runs on a node whose engine the server cannot ask (--swarm-node-engine): its writable layer is not watched`,
      );
    }
  }

  /** why the sandbox stopped the episode's env for what it wrote, or null */
  private storageEnd(envId: string): string | null {
    const p = this.placed.get(envId);
    return p ? p.engine.storage.exceeded(p.containerId) : null;
  }

  /** what an env used, read from its node's engine (its stats and writable layer); nothing when the server cannot reach that node */
  readonly usage: EnvUsage = {
    read: (handle, signal) => {
      const p = this.placed.get(handle.envId);
      return p ? readContainerUsage(p.engine.docker, p.containerId, signal, { hostFiles: false }) : Promise.resolve(NOT_READ);
    },
  };

  /** the env containers' processes and files, through the engine of each env's node; the server's steps through the toolbox */
  readonly shell: EnvShell = {
    prepare: async () => {
      await this.toolboxes.ensure(await this.nodeEngines());
    },
    exec: (handle) => this.execIn(handle),
    companion: (handle, env, signal) => this.companion(handle, env, signal),
  };

  /** the env's task container, through its node's engine (an env the server placed nowhere it reaches: every call says so) */
  private execIn(handle: { envId: string; toolbox?: string }): ContainerExec {
    const p = this.placed.get(handle.envId);
    return p
      ? new DockerContainerExec(p.engine.docker, p.containerId, handle.toolbox ?? null)
      : new UnreachedExec(handle.envId, `env ${handle.envId} runs on a node whose engine the server does not reach (--swarm-node-engine), or is gone`);
  }

  /** a clean verifier's container, made by the engine of the env's node (shell.ts) */
  private async companion(handle: EnvHandle, env: EnvSpec, signal?: AbortSignal): Promise<Companion> {
    const p = this.placed.get(handle.envId);
    if (!p) throw new SandboxError('engine_failed', `the clean verifier of env \`${env.name}\` needs the engine of its node, which the server does not reach`);
    const { volume } = await this.toolboxes.ensure(await this.nodeEngines());
    const mount = SwarmToolboxes.mount(volume);
    const docker = p.engine.docker;
    let id: string;
    try {
      id = (await createCompanion(docker, this.ownerOf(handle.envId, `${env.name}-verifier`), { ...env, kind: 'shell' }, mount)).id;
    } catch (err) {
      throw toSandboxError(err, `creating the clean verifier's container of env \`${env.name}\` on node ${p.engine.nodeId.slice(0, 12)}`);
    }
    const held = this.companions.get(handle.envId) ?? new Map<string, () => Promise<void>>();
    this.companions.set(handle.envId, held);
    const remove = async () => {
      held.delete(id);
      await removeNodeContainer(docker, id);
    };
    held.set(id, remove);
    try {
      await docker.getContainer(id).start();
      const exec = new DockerContainerExec(docker, id, toolboxBinary(mount.dir));
      const probe = await waitForProbe((ms, s) => probeExec(exec, ms, s), {
        deadline: Date.now() + env.deployTimeoutMs,
        exited: new Promise<number>(() => {}),
        signal: signal ?? new AbortController().signal,
      });
      if (probe.kind !== 'ready')
        throw new SandboxError('not_ready_in_time', `the clean verifier's container of env \`${env.name}\` did not answer within ${fmtS(env.deployTimeoutMs)}`);
      return { exec, remove };
    } catch (err) {
      await remove().catch(() => undefined);
      throw err instanceof SandboxError ? err : toSandboxError(err, `starting the clean verifier's container of env \`${env.name}\``);
    }
  }

  /** the clean verifiers' containers of the episode, removed */
  private async removeCompanions(envId: string): Promise<void> {
    const held = this.companions.get(envId);
    this.companions.delete(envId);
    await Promise.all([...(held?.values() ?? [])].map((remove) => remove().catch(() => undefined)));
  }

  /** also the clean verifiers' containers a killed server of this instance left on the nodes it reaches */
  override async sweep() {
    const swept = await super.sweep();
    const engines = await this.nodeEngines().catch(() => null);
    const companions = engines ? await sweepCompanions(engines.all(), this.instance, LABELS.instance) : [];
    return companions.length ? { ...swept, containers: [...swept.containers, ...companions] } : swept;
  }

  protected override async removeEnv(envId: string, onEnvRemoved?: () => void, recycle = true): Promise<void> {
    await this.removeCompanions(envId);
    const p = this.placed.get(envId);
    p?.engine.storage.forget(envId);
    this.placed.delete(envId);
    return super.removeEnv(envId, onEnvRemoved, recycle);
  }

  /** then the clean verifiers' containers left, and the toolbox's volume on every node */
  override async close(): Promise<void> {
    await super.close();
    await Promise.all([...this.companions.keys()].map((envId) => this.removeCompanions(envId)));
    await this.toolboxes.removeAll();
    await this.nodeEnginesAsked?.then((e) => e.close()).catch(() => undefined);
  }

  /**
   * polls the service's task until it runs with an address on the overlay, ends, or the deadline
   * passes; the time the task spends preparing (its node pulling the image) moves the deadline, up
   * to SWARM.pullBudgetMs, and is returned as `pulledMs`
   */
  private async waitForTask(
    serviceId: string,
    networkId: string,
    env: EnvSpec,
    deadline: number,
    signal: AbortSignal,
    stages: DeployStages,
  ): Promise<{ task: SwarmTask; ip: string; polls: number; pulledMs: number }> {
    let delay = 50;
    let last: SwarmTask | undefined;
    let pulledMs = 0;
    let polledAt = Date.now();
    for (let polls = 1; ; polls++) {
      throwIfAborted(signal);
      const tasks = await listTasks(this.docker, [serviceId]).catch((err) => {
        throw toSandboxError(err, `listing the task of env \`${env.name}\``);
      });
      last = latestTask(tasks, serviceId) ?? last;
      const state = last?.Status?.State ?? '';
      const now = Date.now();
      if (state === 'preparing') pulledMs = Math.min(SWARM.pullBudgetMs, pulledMs + (now - polledAt));
      polledAt = now;
      if (last?.NodeID && !stages.has('schedule')) stages.mark('schedule');
      if (last && state === 'running') {
        if (!stages.has('start')) stages.mark('start');
        const ip = taskAddress(last, networkId);
        if (ip) {
          stages.mark('address');
          return { task: last, ip, polls, pulledMs };
        }
      }
      if (last && TERMINAL_STATES.has(state)) throw await this.endedError(last, serviceId, env);
      if (Date.now() >= deadline + pulledMs) {
        const err = last?.Status?.Err;
        const where = last?.NodeID ? ` on node ${last.NodeID.slice(0, 12)}` : '';
        throw new SandboxError(
          'not_ready_in_time',
          `env \`${env.name}\` did not start within its deploy timeout (${fmtS(env.deployTimeoutMs)}${pulledMs > 0 ? `, and ${fmtS(pulledMs)} of image pull beside it` : ''}): its task is still ${state || 'unscheduled'}${where}` +
            (state === 'pending' && err ? ` (the scheduler says: ${err}; every node may be full of other reservations)` : err ? `: ${err}` : '') +
            (state === 'preparing' ? ' (pulling the image)' : ''),
        );
      }
      await sleep(Math.max(0, Math.min(delay, deadline + pulledMs - Date.now())), signal);
      delay = Math.min(delay * 1.5, SWARM.taskPollMaxMs);
    }
  }

  /** what swarm says of a task that ended (or whose node went away) before the env was ready */
  private async endedError(task: SwarmTask, serviceId: string, env: EnvSpec): Promise<SandboxError> {
    const state = task.Status?.State ?? '';
    const err = task.Status?.Err ?? task.Status?.Message ?? '';
    const node = await this.nodeOf(task);
    if (node && LOST_NODE_STATES.has(node.state)) {
      return new SandboxError('node_gone', `the node env \`${env.name}\` ran on (${node.id.slice(0, 12)}, ${node.addr}) is ${node.state} before it was ready`);
    }
    if (state === 'rejected') {
      if (isImageRejection(err)) return imageRejection(env, env.image, err);
      return new SandboxError('engine_failed', `the node ${task.NodeID?.slice(0, 12) ?? '?'} rejected the task of env \`${env.name}\`: ${err}`);
    }
    const logTail = await serviceLogTail(this.docker, serviceId);
    const exitCode = task.Status?.ContainerStatus?.ExitCode ?? null;
    if (state === 'failed' || state === 'complete') {
      const verdict = notReadyVerdict({ kind: 'exited', exitCode, oomKilled: await this.oomKilledHere(task) }, { env, runs: 'task' });
      return new SandboxError(verdict.fact, verdict.message, { exitCode, logTail });
    }
    return new SandboxError('engine_failed', `the task of env \`${env.name}\` is ${state} before it was ready${err ? `: ${err}` : ''}`, { exitCode, logTail });
  }

  private async nodeOf(task: SwarmTask): Promise<{ id: string; state: string; addr: string } | null> {
    if (!task.NodeID) return null;
    const nodes = await listNodes(this.docker).catch(() => []);
    return nodes.find((n) => n.id === task.NodeID) ?? null;
  }

  /** OOM is visible only on the node that ran the container: known when the server reaches that node's engine (null: not known) */
  private async oomKilledHere(task: SwarmTask): Promise<boolean | null> {
    const id = task.Status?.ContainerStatus?.ContainerID;
    if (!id) return null;
    const engine = (await this.nodeEngines().catch(() => null))?.of(task.NodeID);
    try {
      return Boolean((await (engine?.docker ?? this.docker).getContainer(id).inspect()).State.OOMKilled);
    } catch {
      return null;
    }
  }

  protected async inspectEnv(handle: EnvHandle): Promise<EnvDiagnosis> {
    const serviceId = handle.containerId;
    let tasks: SwarmTask[];
    try {
      tasks = await listTasks(this.docker, [serviceId]);
    } catch (err) {
      if (isNotFound(err)) return { running: false, exitCode: null, oomKilled: false, logTail: '' };
      throw toSandboxError(err, `listing the task of service ${serviceId.slice(0, 12)}`);
    }
    const task = latestTask(tasks, serviceId);
    if (!task) return { running: false, exitCode: null, oomKilled: false, logTail: '' };
    const node = await this.nodeOf(task);
    if (node && LOST_NODE_STATES.has(node.state)) {
      return {
        running: false,
        exitCode: null,
        oomKilled: false,
        logTail: '',
        nodeGone: `the node it ran on (${node.id.slice(0, 12)}, ${node.addr}) is ${node.state}`,
      };
    }
    const state = task.Status?.State ?? '';
    const running = state === 'running';
    const exitCode = running ? null : (task.Status?.ContainerStatus?.ExitCode ?? null);
    const oomKilled = !running && (await this.oomKilledHere(task)) === true;
    const storageExceeded = this.storageEnd(handle.envId);
    return { running, exitCode, oomKilled, logTail: await serviceLogTail(this.docker, serviceId), ...(storageExceeded ? { storageExceeded } : {}) };
  }

  protected removeOwned(owned: Owned, onEnvRemoved?: () => void): Promise<RemoveResult> {
    return removeOwned(this.docker, owned, { ...this.removal, networkRemovalMs: this.networkRemovalMs, onEnvRemoved });
  }
}

/** the bounds of the env's writable layer that a node's engine is asked to watch, as the bundle names them ("storage_mb and max_files"), or null */
function layerBoundNames(env: EnvSpec): string | null {
  const names = [env.resources.storageMb !== undefined ? 'storage_mb' : null, env.resources.maxFiles !== undefined ? 'max_files' : null].filter(
    (n) => n !== null,
  );
  return names.length ? names.join(' and ') : null;
}
