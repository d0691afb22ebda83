/**
 * The Docker Swarm backend: per episode, an overlay network of its own (internal, attachable) and
 * a service of one replica of the env's image on it, placed by swarm on any node. The server runs
 * in a container on a manager node, joins each episode's overlay, and reaches the env at its task's
 * own overlay address (endpoint mode dnsrr: no VIP, no IPVS). What every engine backend does alike
 * (images, the instance claim and its loss, the stock, deploy clean-up, teardown, sweep) is the
 * skeleton's (engine/engine-sandbox.ts); images are pushed to the registry every node pulls from.
 */
import { SandboxError, type EnvDiagnosis, type EnvHandle, type EnvRuntime, type EnvSpec, type ImageBuildRequest } from '../sandbox.js';
import { newEnvSecret } from '../env-identity.js';
import { SWARM } from '../../defaults.js';
import { notReadyVerdict } from '../../failures.js';
import { fmtS } from '../../time.js';
import { EngineSandbox, type EngineSandboxOptions } from '../engine/engine-sandbox.js';
import { isNotFound, throwIfAborted, toSandboxError } from '../engine/errors.js';
import { swarmLockdown, type SwarmEngine } from '../engine/hardening.js';
import type { Owner } from '../engine/labels.js';
import type { Owned, RemoveResult } from '../engine/owned.js';
import { waitForHttp } from '../engine/readiness.js';
import { sleep } from '../engine/retry.js';
import { pushToRegistry } from './registry.js';
import { listServices, removeOwned } from './removal.js';
import { createEnvService, createEpisodeOverlay, type EpisodeOverlay, imageRejection, isImageRejection, serviceLogTail, swarmName } from './services.js';
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
}

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

  constructor(opts: SwarmSandboxOptions) {
    super(opts, { sandbox: 'the swarm sandbox', engine: 'the swarm', network: 'overlay' });
    this.registry = opts.registry ?? null;
    this.networkRemovalMs = opts.networkRemovalMs ?? SWARM.networkRemovalMs;
    this.nodes = new NodeListing(this.docker, SWARM.nodeListMaxAgeMs);
    this.watcher = new TaskWatcher(this.docker, this.log, opts.watchIntervalMs ?? SWARM.watchIntervalMs);
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

  /** the nodes' default runtime, what the manager's services cannot take, and a storage bound nothing watches on swarm */
  protected override async onEngine(env: EnvSpec & { runtime: EnvRuntime }): Promise<{ runtime: EnvRuntime; notEnforced: string[] }> {
    const l = swarmLockdown({ resources: env.resources, security: env.security, runtime: env.runtime }, await this.engine());
    const notEnforced = [...l.not_enforced];
    if (env.resources.storageMb !== undefined)
      notEnforced.push("storage_mb: on swarm the writable layer is neither limited nor watched (the task's container may be on any node)");
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

  protected holdsNetwork(episodeId: string): boolean {
    return this.overlays.has(episodeId);
  }

  protected released(episodeId: string): void {
    this.overlays.delete(episodeId);
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

  protected async deployEnv(owner: Owner, env: EnvSpec, signal: AbortSignal): Promise<EnvHandle> {
    const episodeId = owner.episode;
    const startedAt = Date.now();
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
      throwIfAborted(signal);
      this.overlays.add(episodeId);
      const stocked = this.networks.take(episodeId);
      const network = stocked?.net ?? (await createEpisodeOverlay(this.docker, owner, swarmName(owner)));
      stages.mark('overlay');
      throwIfAborted(signal);
      // a stocked overlay is joined already; otherwise the join runs while swarm creates, schedules
      // and starts the task: only the readiness check needs it, and the engine joins one container
      // to its networks one at a time, so in a burst the joins queue behind each other (measured:
      // the largest stage when it ran first)
      joined = stocked ? Promise.resolve(0) : this.join(network.id);
      joined.catch(() => undefined);
      const deadline = Date.now() + env.deployTimeoutMs;
      const secret = newEnvSecret();
      const serviceId = await createEnvService(this.docker, owner, env, network, env.image, secret, await this.engine());
      stages.mark('service');
      const gone = this.watcher.watch(episodeId, serviceId);
      throwIfAborted(signal);
      const { task, ip, polls, pulledMs } = await this.waitForTask(serviceId, network.id, env, deadline, signal, stages);
      const connectMs = await joined;
      stages.mark('attach');
      throwIfAborted(signal);
      const exited = new Promise<number>((resolve) => {
        if (gone.aborted) resolve(-1);
        else gone.addEventListener('abort', () => resolve(-1), { once: true });
      });
      const baseUrl = `http://${ip}:${env.port}`;
      // the image pull's time is the node's, not the env's: the readiness keeps what the pull took
      const outcome = await waitForHttp({ url: `${baseUrl}${env.readyPath}`, deadline: deadline + pulledMs, exited, signal });
      if (outcome.kind === 'ready') {
        throwIfAborted(signal);
        stages.mark('ready');
        this.log.info(
          {
            episode: episodeId,
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
        return { episodeId, baseUrl, containerId: serviceId, networkId: network.id, secret, gone, stagesMs: stages.byStage() };
      }
      if (outcome.kind === 'exited') {
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

  /** OOM is visible only on the node that ran the container: known when that node is this manager (null: not known) */
  private async oomKilledHere(task: SwarmTask): Promise<boolean | null> {
    const id = task.Status?.ContainerStatus?.ContainerID;
    if (!id) return null;
    try {
      return Boolean((await this.docker.getContainer(id).inspect()).State.OOMKilled);
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
    return { running, exitCode, oomKilled, logTail: await serviceLogTail(this.docker, serviceId) };
  }

  protected removeOwned(owned: Owned, onEnvRemoved?: () => void): Promise<RemoveResult> {
    return removeOwned(this.docker, owned, { ...this.removal, networkRemovalMs: this.networkRemovalMs, onEnvRemoved });
  }
}
