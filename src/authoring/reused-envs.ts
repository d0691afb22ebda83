/**
 * check's env reuse: a Sandbox in front of the server's own. For an env whose bundle.json says
 * `clean_reset` (a /reset on a container that served episodes starts a clean one), it keeps the
 * container of an episode that ended well (`keepIf`, asked at its teardown) instead of removing
 * it, frees the episode's slot as the teardown would, and hands the container to the next deploy
 * of that env: the next episode then runs its own /reset on a container already up, through the
 * unchanged episode machinery. Anything else (another env, an episode that failed or was closed,
 * a dead container, `fresh` ids, after `release`) deploys and tears down as the inner sandbox does. The containers it keeps are
 * labelled `reuse-<uuid>` under check's instance: the reconciler does not take them for strays,
 * and a killed check's are swept by the next start like any other.
 */
import { randomUUID } from 'node:crypto';
import type { DeployRequest, EnvHandle, Sandbox, TeardownOptions } from '../sandbox/sandbox.js';

/** one container kept across episodes */
interface Kept {
  /** the id its resources are labelled with */
  id: string;
  envName: string;
  handle: EnvHandle;
  /** episodes it has served, the one it serves now included */
  served: number;
}

interface Lent {
  kept: Kept;
  /** the episode's own view of the container's death, so that no episode's listener outlives it */
  stopListening: () => void;
}

export interface ReuseCounts {
  /** containers deployed for episodes of the env (fresh plays included) */
  deployed: number;
  /** episodes that ran on a container which had served another before */
  reused: number;
}

export class ReusedEnvs implements Sandbox {
  private readonly idle = new Map<string, Kept[]>();
  /** episode id → the kept container it runs on */
  private readonly lent = new Map<string, Lent>();
  private readonly toDeployFresh = new Set<string>();
  /** episode id → how many episodes its container had served before it (0: a fresh one) */
  private readonly servedBefore = new Map<string, number>();
  private readonly counts = new Map<string, ReuseCounts>();
  /** ids of containers being deployed to be kept: not strays either */
  private readonly deploying = new Set<string>();
  private released = false;
  /** removals of kept containers under way: release() waits for every one, whoever started it */
  private readonly removing = new Set<Promise<void>>();

  constructor(
    private readonly inner: Sandbox,
    /** env names whose bundle.json says clean_reset */
    private readonly reusable: ReadonlySet<string>,
    /** asked when an episode's env tears down: may its container serve the next episode (it ended well)? */
    private readonly keepIf: (episodeId: string) => boolean,
  ) {}

  /** the episode's env is to be a fresh container, deployed and removed for it alone */
  fresh(episodeId: string): void {
    this.toDeployFresh.add(episodeId);
  }

  /** how many episodes the episode's container had served before it (0: fresh, or not known) */
  servedBeforeOf(episodeId: string): number {
    return this.servedBefore.get(episodeId) ?? 0;
  }

  /** env name → deploys and reuses so far */
  stats(): Map<string, ReuseCounts> {
    return new Map([...this.counts].map(([k, v]) => [k, { ...v }]));
  }

  private count(envName: string): ReuseCounts {
    let c = this.counts.get(envName);
    if (!c) this.counts.set(envName, (c = { deployed: 0, reused: 0 }));
    return c;
  }

  async deploy(req: DeployRequest): Promise<EnvHandle> {
    const name = req.env.name;
    const reusable = this.reusable.has(name) && req.env.kind !== 'shell' && !req.modelDoor && !this.released;
    if (!reusable || this.toDeployFresh.delete(req.envId)) {
      const handle = await this.inner.deploy(req);
      this.count(name).deployed++;
      return handle;
    }
    let kept = this.takeIdle(name);
    if (kept) {
      this.count(name).reused++;
    } else {
      const id = `reuse-${randomUUID()}`;
      this.deploying.add(id);
      let handle: EnvHandle;
      try {
        handle = await this.inner.deploy({ ...req, envId: id });
      } finally {
        this.deploying.delete(id);
      }
      this.count(name).deployed++;
      kept = { id, envName: name, handle, served: 0 };
    }
    this.servedBefore.set(req.envId, kept.served);
    kept.served++;
    return this.lend(req.envId, kept);
  }

  /** an idle container of the env that the engine has not reported dead (dead ones are removed) */
  private takeIdle(envName: string): Kept | null {
    const list = this.idle.get(envName) ?? [];
    for (let k = list.pop(); k; k = list.pop()) {
      if (!k.handle.gone?.aborted) return k;
      void this.remove(k.id).catch(() => undefined);
    }
    return null;
  }

  private lend(episodeId: string, kept: Kept): EnvHandle {
    const base = kept.handle.gone;
    if (!base) {
      this.lent.set(episodeId, { kept, stopListening: () => undefined });
      return kept.handle;
    }
    const own = new AbortController();
    const onGone = () => own.abort(base.reason);
    if (base.aborted) onGone();
    else base.addEventListener('abort', onGone, { once: true });
    this.lent.set(episodeId, { kept, stopListening: () => base.removeEventListener('abort', onGone) });
    return { ...kept.handle, gone: own.signal };
  }

  async teardown(episodeId: string, opts?: TeardownOptions): Promise<void> {
    const lent = this.lent.get(episodeId);
    if (!lent) return this.inner.teardown(episodeId, opts);
    this.lent.delete(episodeId);
    lent.stopListening();
    const keep = !this.released && !lent.kept.handle.gone?.aborted && this.keepIf(episodeId);
    if (!keep) return this.inner.teardown(lent.kept.id, opts);
    const list = this.idle.get(lent.kept.envName) ?? [];
    list.push(lent.kept);
    this.idle.set(lent.kept.envName, list);
    opts?.onEnvRemoved?.();
  }

  private remove(id: string): Promise<void> {
    const p = this.inner.teardown(id).finally(() => this.removing.delete(p));
    this.removing.add(p);
    return p;
  }

  /** Removes every kept container (and waits for the removals already under way); from now on nothing is kept. Idempotent. */
  async release(): Promise<void> {
    this.released = true;
    const all = [...this.idle.values()].flat();
    this.idle.clear();
    for (const k of all) void this.remove(k.id).catch(() => undefined);
    await Promise.all([...this.removing]);
  }

  /** kept containers are ours, not strays: the reconciler does not see them */
  async listEnvIds(): Promise<string[]> {
    const onEngine = await this.inner.listEnvIds();
    // after the listing: a container deployed meanwhile is in one of these by now
    const ours = new Set([...[...this.idle.values()].flat(), ...[...this.lent.values()].map((l) => l.kept)].map((k) => k.id));
    for (const id of this.deploying) ours.add(id);
    return onEngine.filter((id) => !ours.has(id));
  }

  ping() {
    return this.inner.ping();
  }
  diagnose(handle: EnvHandle) {
    return this.inner.diagnose(handle);
  }
  sweep() {
    return this.inner.sweep();
  }
  networksInUse() {
    return this.inner.networksInUse();
  }
  async close(): Promise<void> {
    await this.release();
    await this.inner.close();
  }
  get images() {
    return this.inner.images;
  }
  get modelDoors() {
    return this.inner.modelDoors;
  }
  get instanceClaim() {
    return this.inner.instanceClaim;
  }
  get deadInstances() {
    return this.inner.deadInstances;
  }
  get stock() {
    return this.inner.stock;
  }
  get lockdown() {
    return this.inner.lockdown;
  }
  get shell() {
    return this.inner.shell;
  }
}
