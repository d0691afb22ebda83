/**
 * The Docker Swarm implementation of Sandbox: per episode, an overlay network of its own
 * (internal, attachable) and a service of one replica of the env's image on it, placed by swarm on
 * any node. The server runs in a container on a manager node, joins each episode's overlay, and
 * reaches the env at its task's own overlay address (endpoint mode dnsrr: no VIP, no IPVS).
 * Readiness, labels, errors, images and the instance claim are the Docker sandbox's own modules.
 */
import Dockerode from 'dockerode';
import {
  SandboxError,
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
import { REMOVAL_RETRY, SWARM } from '../../defaults.js';
import { notReadyVerdict } from '../../failures.js';
import { fmtS } from '../../time.js';
import { abortError, engineMessage, isNotFound, throwIfAborted, toSandboxError } from '../engine/errors.js';
import { buildEnvImage, checkImage } from '../engine/image-build.js';
import { InstanceLock, type InstanceLockOptions } from '../engine/instance-lock.js';
import { labelFilters, type Owner } from '../engine/labels.js';
import { silentLogger, type SandboxLogger } from '../engine/logger.js';
import { connectToNetwork, disconnectFromNetwork, removeNetwork } from '../engine/networks.js';
import { waitForHttp } from '../engine/readiness.js';
import { retry, sleep } from '../engine/retry.js';
import { LABELS } from '../sandbox.js';
import { pushToRegistry } from './registry.js';
import { NetworkStock } from '../engine/network-stock.js';
import {
  createEnvService,
  createEpisodeOverlay,
  type EpisodeOverlay,
  imageRejection,
  isImageRejection,
  removeService,
  serviceLogTail,
  stopService,
  swarmName,
} from './services.js';
import { DeployStages } from './deploy-stages.js';
import { TaskWatcher } from './task-watch.js';
import { latestTask, listNodes, listTasks, LOST_NODE_STATES, NodeListing, taskAddress, TERMINAL_STATES, whyUnschedulable, type SwarmTask } from './tasks.js';

export interface SwarmSandboxOptions {
  /** a manager of the swarm (DOCKER_HOST or /var/run/docker.sock by default) */
  docker?: Dockerode;
  instance: string;
  bundleName: string;
  /**
   * The server's own container on the manager: it joins each episode's overlay to reach the env.
   * Required in practice: the overlay exists only inside containers, not on any host.
   */
  attachContainer: string | null;
  /** HOST:PORT of a registry every node pulls from; env images are pushed there and run by digest */
  registry?: string | null;
  logger?: SandboxLogger;
  removeAttempts?: number;
  removeBaseDelayMs?: number;
  /** how long a network removal waits for the tasks of its removed service to be gone */
  networkRemovalMs?: number;
  /** how often the deployed envs' tasks and nodes are checked */
  watchIntervalMs?: number;
  /** overlays kept made, and joined by the server's container, once prepare() was called (default 0: none) */
  networkStock?: number;
  instanceLock?: Omit<InstanceLockOptions, 'instance' | 'logger'>;
}

interface Owned {
  services: Array<{ id: string; episode: string }>;
  networks: Array<{ id: string; episode: string }>;
}

export class SwarmSandbox implements Sandbox {
  readonly instance: string;
  readonly bundleName: string;
  private readonly docker: Dockerode;
  private readonly attach: string | null;
  private readonly registry: string | null;
  private readonly log: SandboxLogger;
  private readonly removeAttempts: number;
  private readonly removeBaseDelayMs: number;
  private readonly networkRemovalMs: number;
  private readonly lifecycles = new EnvLifecycles();
  private readonly builds = new Map<string, Promise<string>>();
  /** episodes whose overlay may exist (created, or creation in doubt) and is not yet removed */
  private readonly overlays = new Set<string>();
  private readonly watcher: TaskWatcher;
  private readonly nodes: NodeListing;
  /** overlays made and joined ahead of demand; each is handed to one deploy and removed with its episode */
  private readonly stock: NetworkStock<EpisodeOverlay>;
  private readonly lock: InstanceLock;
  private closed = false;

  constructor(opts: SwarmSandboxOptions) {
    if (!opts.instance) throw new Error('SwarmSandbox needs an instance id');
    this.instance = opts.instance;
    this.bundleName = opts.bundleName;
    this.docker = opts.docker ?? new Dockerode();
    this.attach = opts.attachContainer;
    this.registry = opts.registry ?? null;
    this.log = opts.logger ?? silentLogger;
    this.removeAttempts = opts.removeAttempts ?? REMOVAL_RETRY.attempts;
    this.removeBaseDelayMs = opts.removeBaseDelayMs ?? REMOVAL_RETRY.baseDelayMs;
    this.networkRemovalMs = opts.networkRemovalMs ?? SWARM.networkRemovalMs;
    this.nodes = new NodeListing(this.docker, SWARM.nodeListMaxAgeMs);
    this.stock = new NetworkStock<EpisodeOverlay>({
      size: opts.networkStock ?? 0,
      what: 'overlay',
      log: this.log,
      create: (key) => this.makeStockedOverlay(key),
      remove: (key) => this.removeEpisode(key),
    });
    this.watcher = new TaskWatcher(this.docker, this.log, opts.watchIntervalMs ?? SWARM.watchIntervalMs);
    // the instance claim is a labelled volume on the manager's engine, as on one host
    this.lock = new InstanceLock(this.docker, { ...opts.instanceLock, instance: this.instance, logger: this.log });
  }

  private assertOpen(): void {
    if (this.closed) throw new SandboxError('engine_failed', 'the swarm sandbox is closed');
  }

  /** the engine answers and is a manager of an active swarm */
  async ping(): Promise<void> {
    this.assertOpen();
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

  async buildImage(req: ImageBuildRequest): Promise<string> {
    this.assertOpen();
    const tag = await buildEnvImage(this.docker, req, this.builds);
    if (!this.registry) return tag;
    return pushToRegistry(this.docker, tag, this.registry, req.onProgress);
  }

  async checkImage(ref: string): Promise<void> {
    this.assertOpen();
    await checkImage(this.docker, ref);
  }

  /** overlays held by episodes (deploying, live or being removed); the stock's are not counted */
  networksInUse(): number {
    return this.overlays.size;
  }

  /** the overlay stock's figures (for /metrics) */
  networkStock(): ReturnType<NetworkStock<EpisodeOverlay>['stats']> {
    return this.stock.stats();
  }

  /** begins making overlays ahead of demand; after the start sweep, which would remove them */
  prepare(turn?: StockTurn): void {
    this.assertOpen();
    this.stock.start(turn);
  }

  /** stops the stock and removes its overlays (the drain calls it; close() waits for the same removal) */
  unprepare(): Promise<void> {
    return this.stock.close();
  }

  /**
   * An overlay for the stock, joined by the server's container: the join is the costly part of an
   * overlay (the engine joins one container to its networks one at a time), and a stocked overlay
   * has it done before any reset waits on it. A join that fails removes the overlay.
   */
  private async makeStockedOverlay(key: string): Promise<EpisodeOverlay> {
    const owner: Owner = { instance: this.instance, bundle: this.bundleName, episode: key, env: '' };
    const network = await createEpisodeOverlay(this.docker, owner, swarmName(owner));
    try {
      await this.join(network.id);
    } catch (err) {
      // labelled with the key: the start sweep or the reconciler removes it if this fails too
      await this.removeEpisode(key).catch(() => undefined);
      throw err;
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

  async deploy(req: DeployRequest): Promise<EnvHandle> {
    this.assertOpen();
    return this.lifecycles.deploy(
      req,
      (id) => this.overlays.has(id),
      (signal) => this.runDeploy(req.episodeId, req.env, signal),
    );
  }

  private async runDeploy(episodeId: string, env: EnvSpec, signal: AbortSignal): Promise<EnvHandle> {
    const owner: Owner = { instance: this.instance, bundle: this.bundleName, episode: episodeId, env: env.name };
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
      const stocked = this.stock.take(episodeId);
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
      const serviceId = await createEnvService(this.docker, owner, env, network, env.image, secret);
      stages.mark('service');
      const gone = this.watcher.watch(episodeId, serviceId);
      throwIfAborted(signal);
      const { task, ip, polls } = await this.waitForTask(serviceId, network.id, env, deadline, signal, stages);
      const connectMs = await joined;
      stages.mark('attach');
      throwIfAborted(signal);
      const exited = new Promise<number>((resolve) => {
        if (gone.aborted) resolve(-1);
        else gone.addEventListener('abort', () => resolve(-1), { once: true });
      });
      const baseUrl = `http://${ip}:${env.port}`;
      const outcome = await waitForHttp({ url: `${baseUrl}${env.readyPath}`, deadline, exited, signal });
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
        return { episodeId, baseUrl, containerId: serviceId, networkId: network.id, secret, gone };
      }
      if (outcome.kind === 'exited') {
        const latest = latestTask(await listTasks(this.docker, [serviceId]).catch(() => []), serviceId) ?? task;
        throw await this.endedError(latest, serviceId, env);
      }
      const verdict = notReadyVerdict(outcome, { env, runs: 'task', at: ip });
      throw new SandboxError(verdict.fact, verdict.message, { exitCode: null, logTail: await serviceLogTail(this.docker, serviceId) });
    } catch (err) {
      const cause = signal.aborted ? abortError(signal.reason) : toSandboxError(err, `deploying env \`${env.name}\``);
      // a join still in flight would land after the cleanup's disconnect and hold the overlay
      await joined?.catch(() => undefined);
      try {
        await this.removeEpisode(episodeId);
      } catch (cleanupErr) {
        this.log.error({ episode: episodeId, err: (cleanupErr as Error).message }, 'could not remove what a failed deploy created; the reconciler will retry');
      }
      if (!signal.aborted) this.log.warn({ episode: episodeId, env: env.name, reason: (cause as SandboxError).reason, msg: cause.message }, 'deploy failed');
      throw cause;
    }
  }

  /** the server's container joins the overlay; resolves with how long the engine took */
  private async join(networkId: string): Promise<number> {
    const t = Date.now();
    if (this.attach) await connectToNetwork(this.docker, networkId, this.attach);
    return Date.now() - t;
  }

  /** polls the service's task until it runs with an address on the overlay, ends, or the deadline passes */
  private async waitForTask(
    serviceId: string,
    networkId: string,
    env: EnvSpec,
    deadline: number,
    signal: AbortSignal,
    stages: DeployStages,
  ): Promise<{ task: SwarmTask; ip: string; polls: number }> {
    let delay = 50;
    let last: SwarmTask | undefined;
    for (let polls = 1; ; polls++) {
      throwIfAborted(signal);
      const tasks = await listTasks(this.docker, [serviceId]).catch((err) => {
        throw toSandboxError(err, `listing the task of env \`${env.name}\``);
      });
      last = latestTask(tasks, serviceId) ?? last;
      const state = last?.Status?.State ?? '';
      if (last?.NodeID && !stages.has('schedule')) stages.mark('schedule');
      if (last && state === 'running') {
        if (!stages.has('start')) stages.mark('start');
        const ip = taskAddress(last, networkId);
        if (ip) {
          stages.mark('address');
          return { task: last, ip, polls };
        }
      }
      if (last && TERMINAL_STATES.has(state)) throw await this.endedError(last, serviceId, env);
      if (Date.now() >= deadline) {
        const err = last?.Status?.Err;
        const where = last?.NodeID ? ` on node ${last.NodeID.slice(0, 12)}` : '';
        throw new SandboxError(
          'not_ready_in_time',
          `env \`${env.name}\` did not start within its deploy timeout (${fmtS(env.deployTimeoutMs)}): its task is still ${state || 'unscheduled'}${where}` +
            (state === 'pending' && err ? ` (the scheduler says: ${err}; every node may be full of other reservations)` : err ? `: ${err}` : '') +
            (state === 'preparing' ? ' (pulling the image)' : ''),
        );
      }
      await sleep(Math.max(0, Math.min(delay, deadline - Date.now())), signal);
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

  async diagnose(handle: EnvHandle): Promise<EnvDiagnosis> {
    this.assertOpen();
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

  teardown(episodeId: string, opts: TeardownOptions = {}): Promise<void> {
    return this.lifecycles.teardown(episodeId, () => this.removeEpisode(episodeId, opts.onEnvRemoved), opts.onEnvRemoved);
  }

  /** removes the episode's labelled resources, and the stocked overlay it took (labelled with that overlay's key) */
  private async removeEpisode(episodeId: string, onEnvRemoved?: () => void): Promise<void> {
    this.watcher.forget(episodeId);
    const key = this.stock.keyTakenBy(episodeId);
    const owned = await this.list(episodeId);
    // under the episode's id, so that its service's node is known when the overlay is removed
    if (key) owned.networks.push(...(await this.list(key)).networks.map((n) => ({ ...n, episode: episodeId })));
    const failed = await this.remove(owned, onEnvRemoved);
    if (failed.length > 0) throw this.removalError(failed, `episode ${episodeId}`);
    this.overlays.delete(episodeId);
    this.stock.forget(episodeId);
  }

  async sweep(): Promise<SweepResult> {
    this.assertOpen();
    const owned = await this.list();
    const failed = await this.remove(owned);
    const left = new Set(failed.map((f) => f.id));
    const removed = {
      containers: owned.services.map((s) => s.id).filter((id) => !left.has(id)),
      networks: owned.networks.map((n) => n.id).filter((id) => !left.has(id)),
    };
    for (const n of owned.networks) if (!left.has(n.id)) this.overlays.delete(n.episode);
    if (removed.containers.length + removed.networks.length > 0)
      this.log.info({ instance: this.instance, services: removed.containers, networks: removed.networks }, 'swept leftover env services and networks');
    if (failed.length > 0) throw this.removalError(failed, `instance ${this.instance}`);
    return removed;
  }

  /** a stocked overlay nobody took is no episode's; one an episode took is reported as that episode's */
  async listEpisodeIds(): Promise<string[]> {
    this.assertOpen();
    const owned = await this.list();
    return this.stock.episodeIdsOf([...owned.services, ...owned.networks].map((r) => r.episode));
  }

  private async list(episodeId?: string): Promise<Owned> {
    const filters = JSON.stringify(labelFilters(this.instance, episodeId));
    try {
      return await retry(
        async () => {
          const [services, networks] = await Promise.all([
            this.docker.listServices({ filters }) as Promise<unknown> as Promise<Array<{ ID: string; Spec?: { Labels?: Record<string, string> } }>>,
            this.docker.listNetworks({ filters }),
          ]);
          return {
            services: services.map((s) => ({ id: s.ID, episode: s.Spec?.Labels?.[LABELS.episode] ?? '' })),
            // a manager lists swarm-scoped overlays; only ours carry the labels
            networks: networks.map((n) => ({ id: n.Id, episode: n.Labels?.[LABELS.episode] ?? '' })),
          };
        },
        { attempts: 3, baseDelayMs: this.removeBaseDelayMs },
      );
    } catch (err) {
      throw toSandboxError(err, `listing the services and networks of ${episodeId ? `episode ${episodeId}` : `instance ${this.instance}`}`);
    }
  }

  /**
   * Services first (swarm then stops their tasks on whichever node they run), then the overlays,
   * which swarm refuses to remove while a task of them is still around: retried until the tasks
   * are gone, within networkRemovalMs. A task on a node that is down stays until the node comes
   * back or is removed from the swarm (`docker node rm`); its overlay is then left for the
   * reconciler, and reported.
   */
  /**
   * Services scaled to nothing (their nodes report each task's end once its container stopped),
   * then removed, then the overlays; `onEnvGone` once all of it is gone, so the slot is never
   * freed while the env may still run on its node (the cap holds on every node).
   */
  private async remove(owned: Owned, onEnvGone?: () => void): Promise<Array<{ kind: 'service' | 'network'; id: string; episode: string; error: unknown }>> {
    const failed: Array<{ kind: 'service' | 'network'; id: string; episode: string; error: unknown }> = [];
    const attempt = <T>(fn: () => Promise<T>) => retry(fn, { attempts: this.removeAttempts, baseDelayMs: this.removeBaseDelayMs });
    const serviceIds = owned.services.map((s) => s.id);
    const tasks = await listTasks(this.docker, serviceIds).catch(() => [] as SwarmTask[]);
    const nodes = tasks.length ? await listNodes(this.docker).catch(() => []) : [];
    const lostNodes = new Set(nodes.filter((n) => LOST_NODE_STATES.has(n.state)).map((n) => n.id));
    const episodesOnLostNodes = new Set(
      owned.services
        .filter((s) => tasks.some((t) => t.ServiceID === s.id && t.NodeID && lostNodes.has(t.NodeID) && !TERMINAL_STATES.has(t.Status?.State ?? '')))
        .map((s) => s.episode),
    );
    // scaled to nothing first: while the service exists its task's end is reported by its node once
    // the container has stopped, so the slot is held until then (the cap holds on the nodes too),
    // except on a node that is down, where nothing stops; then the service goes
    await Promise.all(owned.services.map((s) => attempt(() => stopService(this.docker, s.id)).catch(() => undefined)));
    await this.waitForTasksToStop(serviceIds, lostNodes);
    await Promise.all(
      owned.services.map(async (s) => {
        try {
          await attempt(() => removeService(this.docker, s.id));
        } catch (error) {
          failed.push({ kind: 'service', ...s, error });
        }
      }),
    );
    await Promise.all(
      owned.networks.map(async (n) => {
        const until = Date.now() + (episodesOnLostNodes.has(n.episode) ? 0 : this.networkRemovalMs);
        for (let i = 0; ; i++) {
          try {
            if (this.attach) await disconnectFromNetwork(this.docker, n.id, this.attach);
            await removeNetwork(this.docker, n.id);
            return;
          } catch (error) {
            const inUse = /in use|active endpoints/i.test(engineMessage(error));
            if ((inUse && Date.now() < until) || (!inUse && i + 1 < this.removeAttempts)) {
              await sleep(inUse ? SWARM.taskPollMaxMs : this.removeBaseDelayMs * 2 ** i);
              continue;
            }
            const why = episodesOnLostNodes.has(n.episode)
              ? new Error(
                  `${engineMessage(error)} (its task is on a node that is down: it goes when the node comes back or is removed with \`docker node rm\`)`,
                )
              : error;
            failed.push({ kind: 'network', ...n, error: why });
            return;
          }
        }
      }),
    );
    if (failed.length === 0) onEnvGone?.();
    return failed;
  }

  private async waitForTasksToStop(serviceIds: string[], lostNodes: Set<string>): Promise<void> {
    if (serviceIds.length === 0) return;
    const until = Date.now() + this.networkRemovalMs;
    while (Date.now() < until) {
      const tasks = await listTasks(this.docker, serviceIds).catch(() => [] as SwarmTask[]);
      const live = tasks.filter((t) => !TERMINAL_STATES.has(t.Status?.State ?? '') && !(t.NodeID && lostNodes.has(t.NodeID)));
      // a task still waiting for a node never started anything
      if (live.every((t) => (t.Status?.State ?? '') === 'pending' || !t.NodeID)) return;
      await sleep(SWARM.taskPollMaxMs / 2);
    }
    this.log.warn(
      { services: serviceIds.map((id) => id.slice(0, 12)) },
      'the tasks of removed services did not all stop in time; removing their networks anyway',
    );
  }

  private removalError(failed: Array<{ kind: string; id: string; episode: string; error: unknown }>, what: string): SandboxError {
    const details = failed.map((f) => `${f.kind} ${f.id.slice(0, 12)}: ${engineMessage(f.error)}`).join('; ');
    this.log.error(
      { failed: failed.map((f) => ({ kind: f.kind, id: f.id, episode: f.episode, err: engineMessage(f.error) })) },
      `could not remove every resource of ${what}`,
    );
    return new SandboxError('engine_failed', `the swarm did not remove every resource of ${what}: ${details}`);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await Promise.all([this.unprepare(), this.lifecycles.close('the swarm sandbox is closing')]);
    this.watcher.close();
    await this.lock.release().catch((err) => this.log.warn({ err: (err as Error).message }, 'could not release the instance name; it goes stale on its own'));
    this.closed = true;
  }
}
