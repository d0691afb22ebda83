/**
 * The registry of live episodes, shared by every transport (/ws, /episodes, /mcp): it picks the
 * task a reset names, starts episodes through admission, drains them at shutdown, and reconciles
 * the engine's labelled resources with the live episodes.
 */
import type { Logger } from 'pino';
import type { Task } from '../bundle/index.js';
import { BadInputError, CapacityError, DeployFailedError, NotFoundError, ShuttingDownError } from '../errors.js';
import type { ResetData } from '../protocol/frames.js';
import { DEFAULT_LANE } from '../protocol/lanes.js';
import { isAbortError } from '../util/abort.js';
import type { ResetObservation, StepOutcome, Transport } from '../protocol/observations.js';
import { Episode, type EpisodeDeps } from './episode.js';
import { modelAsk } from './model-access.js';

export class EpisodeManager {
  private readonly live = new Map<string, Episode>();
  private draining = false;
  private reconcileTimer: NodeJS.Timeout | null = null;
  private reconciling = false;
  /** teardowns done by the reconciler (strays) */
  straysRemoved = 0;
  /** other owners of labelled env ids (E2B sandboxes, src/e2b/): the reconciler leaves what they hold */
  private readonly holders: ((envId: string) => boolean)[] = [];

  constructor(
    private readonly deps: EpisodeDeps,
    private readonly log: Logger,
    private readonly random: () => number = Math.random,
  ) {}

  get admission() {
    return this.deps.admission;
  }

  get isDraining(): boolean {
    return this.draining;
  }

  /** Which task a reset names: task_id, or split+index, or (neither) the default split by seed or at random. */
  pickTask(data: ResetData): Task {
    const bundle = this.deps.bundle;
    if (data.task_id !== undefined) {
      const t = bundle.byId.get(data.task_id);
      if (!t) throw new NotFoundError(`unknown task_id "${data.task_id}"; GET /tasks lists the bundle's tasks`);
      if (data.split !== undefined && data.split !== t.split) {
        throw new BadInputError('VALIDATION_ERROR', `task "${data.task_id}" is in split "${t.split}", not "${data.split}"`);
      }
      if (data.index !== undefined && data.index !== t.index) {
        throw new BadInputError('VALIDATION_ERROR', `task "${data.task_id}" has index ${t.index}, not ${data.index}`);
      }
      return t;
    }
    const split = data.split ?? bundle.manifest.default_split;
    const tasks = bundle.splits[split];
    if (!tasks) {
      throw new NotFoundError(`unknown split "${split}"; splits: ${Object.keys(bundle.splits).join(', ')}`);
    }
    if (tasks.length === 0) throw new NotFoundError(`split "${split}" has no tasks`);
    let index = data.index;
    if (index === undefined) {
      index = data.seed !== undefined ? data.seed % tasks.length : Math.floor(this.random() * tasks.length);
    }
    const t = tasks[index];
    if (!t) throw new NotFoundError(`split "${split}" has ${tasks.length} tasks (index 0..${tasks.length - 1}); index ${index} is out of range`);
    return t;
  }

  /** Creates the episode (visible in `list()` while it waits) without starting it. */
  create(data: ResetData, transport: Transport): Episode {
    if (this.draining) {
      this.deps.metrics.resets.inc({ outcome: 'shutting_down' });
      throw new ShuttingDownError();
    }
    let task: Task;
    let model;
    try {
      task = this.pickTask(data);
      model = modelAsk(this.deps.modelAccess, data);
    } catch (e) {
      this.deps.metrics.resets.inc({ outcome: 'invalid' });
      throw e;
    }
    // the reset timeout is the wait in the queue for a slot: a reset may ask for less than the server's
    const cap = this.deps.settings.resetTimeoutMs;
    const queueTimeoutMs = data.reset_timeout_s !== undefined ? Math.min(cap, data.reset_timeout_s * 1000) : cap;
    // the lane: the reset's own priority, else its split's (--split-priority), else normal
    const lane = data.priority ?? this.deps.settings.splitLanes.get(task.split) ?? DEFAULT_LANE;
    const ep = new Episode(this.deps, task, data.seed ?? null, transport, queueTimeoutMs, data.episode_id, lane);
    this.deps.modelAccess?.hold(ep.id, model);
    this.live.set(ep.id, ep);
    void ep.tornDown.then(() => this.live.delete(ep.id));
    return ep;
  }

  /** Starts an episode made by `create` (which took the reset's data) and counts how the reset went. */
  async start(ep: Episode): Promise<StepOutcome<ResetObservation>> {
    const metrics = this.deps.metrics;
    try {
      const out = await ep.start();
      metrics.resets.inc({ outcome: 'started' });
      return out;
    } catch (e) {
      const outcome =
        e instanceof CapacityError
          ? 'capacity'
          : e instanceof ShuttingDownError
            ? 'shutting_down'
            : e instanceof DeployFailedError
              ? 'deploy_failed'
              : isAbortError(e)
                ? 'aborted'
                : 'error';
      metrics.resets.inc({ outcome });
      throw e;
    }
  }

  get(id: string): Episode | undefined {
    return this.live.get(id);
  }

  list(): Episode[] {
    return [...this.live.values()];
  }

  /** Shutdown: no new episodes, waiting resets refused, every episode torn down (bounded). */
  async drain(timeoutMs: number): Promise<{ tornDown: number; timedOut: boolean }> {
    this.draining = true;
    this.deps.admission.drain(new ShuttingDownError());
    this.stopReconciler();
    const eps = this.list();
    const all = Promise.all([...eps.map((e) => e.close()), this.deps.pool?.close()]);
    let timedOut = false;
    // the drain's budget is what ends a drain that hangs: it keeps the process alive until then
    let budget: NodeJS.Timeout | undefined;
    await Promise.race([
      all,
      new Promise<void>((r) => {
        budget = setTimeout(() => {
          timedOut = true;
          r();
        }, timeoutMs);
      }),
    ]);
    clearTimeout(budget);
    return { tornDown: eps.length, timedOut };
  }

  /** `holds` says which env ids another owner than the episodes holds (the reconciler removes only what nobody holds) */
  addHolder(holds: (envId: string) => boolean): void {
    this.holders.push(holds);
  }

  startReconciler(intervalMs: number): void {
    if (this.reconcileTimer) return;
    this.reconcileTimer = setInterval(() => void this.reconcile(), intervalMs);
    this.reconcileTimer.unref?.();
  }

  stopReconciler(): void {
    if (this.reconcileTimer) clearInterval(this.reconcileTimer);
    this.reconcileTimer = null;
  }

  /** Removes labelled resources of this instance that belong to no live episode. */
  async reconcile(): Promise<string[]> {
    if (this.reconciling || this.draining) return [];
    this.reconciling = true;
    try {
      const onEngine = await this.deps.sandbox.listEnvIds();
      // an id is live while an episode's env carries it (its own id, or a pooled env's) or the
      // warm pool holds it
      const envIds = new Set([...this.live.values()].map((e) => e.envId));
      const strays = onEngine.filter((id) => !this.live.has(id) && !envIds.has(id) && !this.deps.pool?.holds(id) && !this.holders.some((h) => h(id)));
      for (const id of strays) {
        try {
          await this.deps.sandbox.teardown(id);
          this.straysRemoved++;
          this.log.warn({ event: 'stray_removed', episode_id: id }, 'removed resources of an episode that is no longer live');
        } catch (e) {
          this.log.error({ event: 'stray_removal_failed', episode_id: id, err: (e as Error).message }, 'could not remove a stray episode');
        }
      }
      return strays;
    } catch (e) {
      this.log.warn({ err: (e as Error).message }, 'reconcile failed; will retry');
      return [];
    } finally {
      this.reconciling = false;
    }
  }
}
