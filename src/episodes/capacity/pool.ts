/**
 * The warm pool (--warm-pool N): up to N envs deployed ahead of demand, each fresh, in its own
 * network, handed to exactly one episode and never reused or reset between episodes.
 *
 * - Pooled envs hold admission slots, so the cap (--max-concurrent-envs) stays hard: the engine
 *   never runs more env containers than it, pool included. The pool fills only free slots, and
 *   only while no reset waits (Admission.tryAcquire): it never goes ahead of the queue.
 * - A reset takes a ready pooled env of its env kind, checked at hand-out (the engine has not seen
 *   it die, and GET <ready_path> answers): a dead one is discarded and the next tried. Without
 *   one it waits for a slot as before; and while it waits, no pooled env keeps a slot from it: one
 *   of its kind (ready, or still deploying) is promised to it (highest lane first), one of another
 *   kind is evicted (torn down; its slot goes to the waiter the queue names next).
 * - Ids: a pooled env is deployed under its own id, `pool-<uuid>`, labelled on its container and
 *   network. The episode that takes it keeps its own episode id and records the env's id
 *   (Episode.envId): the reconciler counts an id as live while the pool or a live episode holds
 *   it, so a pooled env is never taken for a stray, and a `pool-` leftover of a killed server is
 *   swept at start like any other labelled resource.
 * - Several envs: the pool holds what recent resets needed, each refill deploying the env
 *   furthest below its share (pool-demand.ts); pooled envs of an env nobody asked for lately
 *   give way first to envs of one in demand (discarded, reason stale).
 * - Groups (--warm-pool-group): a reset of an env starts more of that env for the rest of its
 *   group (pool-demand.ts says how many), ahead of other refills, counting what the pool holds of
 *   it; a later reset of the group waits for one still deploying rather than deploy its own; one
 *   nobody took within WARM_POOL.anticipationTtlMs gives way (discarded, reason expired).
 * - The model gateway: a pooled env's door is opened at its deploy with a credential bound to no
 *   episode (PoolDoors); the lease binds it at hand-over; a pooled env discarded has it revoked.
 * - Failing refills: counted as they happen, fewer at once after one, stopped after several in a
 *   row and resumed after a backoff (refill-backoff.ts). When refilling stops, the refills still
 *   deploying that no reset waits for stop too; the pool says why (log, /health, /metrics).
 *
 * Long because the pool's fill, hand-out, promises and eviction share one set of entries and
 * waiters under one invariant (the cap stays hard); its backoff and its split by demand are in
 * files of their own.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { abortError } from '../../util/abort.js';
import type { LoadedBundle } from '../../bundle/index.js';
import { WARM_POOL } from '../../defaults.js';
import { keptConnection, statusOf } from '../../util/http-request.js';
import type { Metrics } from '../../metrics.js';
import { DEFAULT_LANE, laneRank, type Lane } from '../../protocol/lanes.js';
import type { PoolStatus } from '../../protocol/pool.js';
import { probeExec } from '../../sandbox/container-exec.js';
import type { EnvHandle, EnvShell, EnvSpec, ModelDoorHook, Sandbox } from '../../sandbox/sandbox.js';
import type { Admission, Slot } from './admission.js';
import type { DeployLimiter, DeployTicket } from './deploy-limiter.js';
import { PoolDemand, type GroupSize } from './pool-demand.js';
import { RefillBackoff } from './refill-backoff.js';

/** What a reset gets: a slot, and with it a pooled env (a hit) or nothing (deploy one). */
export interface Lease {
  slot: Slot;
  pooled: PooledEnv | null;
}

export interface PooledEnv {
  /** the env's own id, labelled on its resources; the episode tears it down by this id */
  id: string;
  handle: EnvHandle;
  spec: EnvSpec;
  /** how long it waited in the pool, ready, before this hand-out (ms) */
  waitedMs: number;
}

export interface PoolAcquireOptions {
  timeoutMs: number;
  signal?: AbortSignal;
  /** the lane it waits in for a slot (default normal); waiting resets are promised pooled envs highest lane first */
  lane?: Lane;
  /**
   * Called synchronously with a pooled env's id the moment it is handed over, before the lease
   * resolves: the episode records it at once, so no reconcile can find the id owned by nobody.
   */
  adopt: (envId: string) => void;
}

/** The model gateway's side of pooled envs (ModelAccess): a door at deploy, revoked when discarded. */
export interface PoolDoors {
  /** the hook a pooled env's deploy opens its door with: a credential bound to no episode yet */
  pooledDoor(envId: string): ModelDoorHook;
  /** a pooled env left the pool unused: its credential revoked, its door closed */
  revoke(envId: string): Promise<void>;
}

export interface WarmPoolDeps {
  size: number;
  /** --warm-pool-group: envs started for the rest of a reset's group (1: none) */
  group?: GroupSize;
  /** with the model gateway on */
  doors?: PoolDoors;
  bundle: LoadedBundle;
  sandbox: Pick<Sandbox, 'deploy' | 'teardown'>;
  admission: Admission;
  deploys: DeployLimiter;
  envSpec: (envName: string) => Promise<EnvSpec>;
  /**
   * whether the env's image is ready (the env catalog; default: always): refills deploy only such
   * envs, so that no pooled env holds a slot through its image's build; call imagesChanged() when
   * one becomes ready
   */
  imageReady?: (envName: string) => boolean;
  metrics: Metrics;
  log: Logger;
  now?: () => number;
  /** GET <ready_path> of a pooled env at hand-out (a shell env's: an exec in it); true when it answers (injectable for tests) */
  check?: (env: PooledEnv) => Promise<boolean>;
  /** the sandbox's shell part, for the hand-out check of shell envs */
  shell?: EnvShell;
}

interface Entry {
  id: string;
  envName: string;
  slot: Slot;
  state: 'deploying' | 'ready';
  handle: EnvHandle | null;
  spec: EnvSpec | null;
  readyAt: number;
  controller: AbortController;
  ticket: DeployTicket | null;
  /** the waiting reset this env is promised to */
  promisedTo: Waiter | null;
  /** a hand-out check is running on it */
  checking: boolean;
  /** deployed for the rest of a reset's group: gives way once ready this long unused */
  anticipated: boolean;
  expiry: NodeJS.Timeout | null;
}

interface Waiter {
  envName: string;
  lane: Lane;
  settled: boolean;
  /** the pooled env promised to it (ready and being checked, or still deploying) */
  candidate: Entry | null;
  /** in the admission queue */
  queued: boolean;
  deadline: number;
  signal?: AbortSignal;
  adopt: (envId: string) => void;
  /** stops its admission wait once a pooled env is handed to it */
  stopWaiting: AbortController;
  /** stops its wait for a pooled env still deploying, outside the admission queue (groups) */
  cleanup: () => void;
  resolve: (lease: Lease) => void;
  reject: (err: Error) => void;
}

export class WarmPool {
  readonly size: number;
  private readonly entries: Entry[] = [];
  /** ids of pooled envs whose resources may exist: in the pool, being handed out, being removed */
  private readonly known = new Set<string>();
  private readonly waiters: Waiter[] = [];
  private readonly demand: PoolDemand;
  private readonly backoff: RefillBackoff;
  private started = false;
  private closed = false;
  private evicting = 0;
  /** pooled envs being evicted for a reset's demand (anticipate), their slots not back yet */
  private evictingForDemand = 0;
  /** admission slots the pool holds: its entries', and those of envs being removed */
  private held = 0;
  private readonly removals = new Set<Promise<void>>();
  readonly counts = { hits: 0, misses: 0, evictions: 0, refillFailures: 0, discarded: 0 };
  private readonly now: () => number;
  private readonly check: (env: PooledEnv) => Promise<boolean>;

  constructor(private readonly deps: WarmPoolDeps) {
    this.size = deps.size;
    this.now = deps.now ?? Date.now;
    this.check = deps.check ?? ((env) => (env.spec.kind === 'shell' ? shellCheck(deps.shell, env) : httpCheck(env)));
    this.demand = new PoolDemand(deps.bundle, deps.group ?? 1, this.now);
    this.backoff = new RefillBackoff(() => {
      this.log().info({ event: 'pool_refill_resumed' }, 'the warm pool tries refilling again');
      this.fill();
    }, this.now);
    deps.admission.onSlotFree(() => this.fill());
  }

  /** Starts filling (once the env images exist). */
  start(): void {
    if (this.closed) return;
    this.started = true;
    this.fill();
  }

  /** an env's image became ready (or failed): the pool may now refill with what it could not */
  imagesChanged(): void {
    this.fill();
  }

  /** an env id the pool is responsible for (the reconciler leaves it alone) */
  holds(id: string): boolean {
    return this.known.has(id);
  }

  /** admission slots held by pooled envs, in the pool or being removed (not by episodes) */
  get slotsHeld(): number {
    return this.held;
  }

  status(): PoolStatus {
    const byEnv: PoolStatus['by_env'] = {};
    for (const name of Object.keys(this.deps.bundle.manifest.envs)) byEnv[name] = { ready: 0, deploying: 0 };
    for (const e of this.entries) byEnv[e.envName]![e.state]++;
    const ready = this.entries.filter((e) => e.state === 'ready').length;
    return {
      target: this.size,
      ready,
      deploying: this.entries.length - ready,
      by_env: byEnv,
      refilling: this.backoff.refilling,
      consecutive_failures: this.backoff.consecutiveFailures,
      last_error: this.backoff.lastError,
      retry_in_s: this.backoff.retryInS(),
      hits: this.counts.hits,
      misses: this.counts.misses,
      evictions: this.counts.evictions,
      refill_failures: this.counts.refillFailures,
    };
  }

  /**
   * A lease for a reset of `envName`: a checked pooled env with its slot, or a slot to deploy
   * into. Rejects as Admission.acquire does (CapacityError, ShuttingDownError, AbortError).
   */
  acquire(envName: string, opts: PoolAcquireOptions): Promise<Lease> {
    this.demand.record(envName);
    if (opts.signal?.aborted) return Promise.reject(abortError('aborted'));
    return new Promise<Lease>((resolve, reject) => {
      const w: Waiter = {
        envName,
        lane: opts.lane ?? DEFAULT_LANE,
        settled: false,
        candidate: null,
        queued: false,
        deadline: this.now() + opts.timeoutMs,
        signal: opts.signal,
        adopt: opts.adopt,
        stopWaiting: new AbortController(),
        cleanup: () => {},
        resolve,
        reject,
      };
      this.enter(w);
      this.anticipate(envName);
    });
  }

  /** a ready env of its kind, else the admission queue */
  private enter(w: Waiter): void {
    const e = this.closed ? undefined : this.entries.find((x) => x.state === 'ready' && !x.promisedTo && x.envName === w.envName);
    if (e) {
      this.promise(e, w);
      return;
    }
    if (this.awaitDeploying(w)) return;
    const admission = this.deps.admission;
    const before = admission.waitingCount;
    const signal = w.signal ? AbortSignal.any([w.signal, w.stopWaiting.signal]) : w.stopWaiting.signal;
    admission.acquire({ timeoutMs: Math.max(0, w.deadline - this.now()), signal, lane: w.lane }).then(
      (slot) => {
        if (w.settled) return slot.release();
        this.settle(w);
        this.counts.misses++;
        this.deps.metrics.poolMisses.inc();
        w.resolve({ slot, pooled: null });
      },
      (err: Error) => {
        if (w.settled) return;
        this.settle(w);
        w.reject(err);
      },
    );
    if (admission.waitingCount > before) {
      w.queued = true;
      // highest lane first, in arrival order within a lane: rebalance promises envs in this order
      const after = this.waiters.findIndex((x) => laneRank(x.lane) > laneRank(w.lane));
      this.waiters.splice(after < 0 ? this.waiters.length : after, 0, w);
      this.rebalance();
    }
  }

  /**
   * With groups: a pooled env of its kind still deploying is promised to the reset (promoted to a
   * reset's deploy turn), which waits for it outside the admission queue rather than deploy its
   * own. At its deadline it goes to the queue (which refuses it at once if no slot is free).
   */
  private awaitDeploying(w: Waiter): boolean {
    // past its deadline it goes to the queue, which answers at once
    if (this.closed || this.demand.groupSize() <= 1 || w.deadline <= this.now()) return false;
    const e = this.entries.find((x) => x.state === 'deploying' && !x.promisedTo && x.envName === w.envName);
    if (!e) return false;
    const timer = setTimeout(
      () => {
        if (w.settled) return;
        w.cleanup();
        this.unpromise(w);
        this.enter(w);
      },
      Math.max(0, w.deadline - this.now()),
    );
    timer.unref?.();
    const onAbort = () => {
      if (w.settled) return;
      this.settle(w);
      w.reject(abortError('aborted'));
    };
    w.signal?.addEventListener('abort', onAbort, { once: true });
    w.cleanup = () => {
      clearTimeout(timer);
      w.signal?.removeEventListener('abort', onAbort);
      w.cleanup = () => {};
    };
    this.promise(e, w);
    return true;
  }

  /** the waiter's candidate (not being checked) goes back to the pool */
  private unpromise(w: Waiter): void {
    const c = w.candidate;
    w.candidate = null;
    if (c && !c.checking) {
      c.promisedTo = null;
      this.rebalance();
    }
  }

  /** the candidate a waiter was promised is gone: it finds another (in the queue, or anew) */
  private lostCandidate(w: Waiter | null, e: Entry): void {
    if (!w) return;
    if (w.candidate === e) w.candidate = null;
    if (w.settled) return;
    if (w.queued) this.rebalance();
    else {
      w.cleanup();
      this.enter(w);
    }
  }

  /** the waiter has its outcome: out of the queue, its candidate (if any) back to the pool */
  private settle(w: Waiter): void {
    w.cleanup();
    w.settled = true;
    const i = this.waiters.indexOf(w);
    if (i >= 0) this.waiters.splice(i, 1);
    const c = w.candidate;
    w.candidate = null;
    if (c && !c.checking) {
      c.promisedTo = null;
      this.rebalance();
    }
  }

  private promise(e: Entry, w: Waiter): void {
    e.promisedTo = w;
    w.candidate = e;
    if (e.state === 'ready') void this.handOut(w, e);
    else e.ticket?.promote();
  }

  /** Checks a ready env and hands it to the waiter, or discards it and finds the waiter another way. */
  private async handOut(w: Waiter, e: Entry): Promise<void> {
    e.checking = true;
    const env: PooledEnv = { id: e.id, handle: e.handle!, spec: e.spec!, waitedMs: 0 };
    const alive = !e.handle!.gone?.aborted && (await this.check(env).catch(() => false));
    e.checking = false;
    if (!alive) {
      this.log().warn(
        { event: 'pool_discard', env_id: e.id, env: e.envName, reason: 'dead at hand-out' },
        'a pooled env did not answer at hand-out: discarded, trying the next',
      );
      this.discard(e, 'dead');
      this.lostCandidate(w, e);
      this.fill();
      return;
    }
    if (w.settled || w.signal?.aborted || this.closed) {
      // it got a slot meanwhile, or gave up: the env goes back to the pool
      e.promisedTo = null;
      if (w.candidate === e) w.candidate = null;
      if (!w.settled && w.signal?.aborted) {
        this.settle(w);
        w.reject(abortError('aborted'));
      }
      if (this.closed) {
        this.discard(e, 'closed');
        // not in the admission queue yet: there the drain refuses it
        if (!w.settled && !w.queued) {
          w.cleanup();
          this.enter(w);
        }
      }
      this.rebalance();
      return;
    }
    this.removeEntry(e);
    this.settle(w);
    w.stopWaiting.abort();
    env.waitedMs = this.now() - e.readyAt;
    this.counts.hits++;
    this.deps.metrics.poolHits.inc();
    this.held--;
    w.adopt(e.id);
    this.known.delete(e.id);
    w.resolve({ slot: e.slot, pooled: env });
    this.fill();
  }

  /**
   * No waiting reset goes without while a pooled env holds a slot: each gets one of its kind
   * (ready or deploying), and for the rest, pooled envs of other kinds are evicted.
   */
  private rebalance(): void {
    if (this.closed) return;
    let unserved = 0;
    for (const w of this.waiters) {
      if (w.settled || w.candidate) continue;
      const e =
        this.entries.find((x) => !x.promisedTo && x.state === 'ready' && x.envName === w.envName) ??
        this.entries.find((x) => !x.promisedTo && x.state === 'deploying' && x.envName === w.envName);
      if (e) this.promise(e, w);
      else unserved++;
    }
    let toEvict = unserved - this.evicting;
    while (toEvict > 0) {
      // the least sunk cost first: refills not yet deploying, then deploying, then ready ones, of the env asked for least lately
      const free = this.entries.filter((x) => !x.promisedTo);
      const victim = free.find((x) => x.state === 'deploying') ?? this.stalest(free);
      if (!victim) break;
      this.counts.evictions++;
      this.deps.metrics.poolEvictions.inc();
      this.log().info({ event: 'pool_evict', env_id: victim.id, env: victim.envName }, 'evicted a pooled env for a waiting reset of another env');
      this.evicting++;
      this.discard(victim, 'evicted', () => {
        // after the waiter this slot went to has run its continuation
        void Promise.resolve().then(() => {
          this.evicting--;
          this.rebalance();
        });
      });
      toEvict--;
    }
  }

  /** of `among`, the entry whose env was asked for least lately (the first such) */
  private stalest(among: Entry[]): Entry | undefined {
    let best: Entry | undefined;
    for (const x of among) if (!best || this.demand.lastAskedAt(x.envName) < this.demand.lastAskedAt(best.envName)) best = x;
    return best;
  }

  /** unpromised pooled envs of `envName`, ready or deploying */
  private spareOf(envName: string): number {
    return this.entries.filter((x) => x.envName === envName && !x.promisedTo).length;
  }

  /**
   * A reset of `envName` arrived: when the pool is full, pooled envs that give way are evicted
   * for it, the stalest env's first: with groups, as many as the rest of its group wants, among
   * envs that may give way; without, one, of an env nobody asked for within
   * WARM_POOL.staleAfterMs, when the pool holds none of `envName`. With groups: those of envs whose
   * groups are over (or stale) first, then those only the seeding guessed, never those of a group
   * still arriving (PoolDemand.giveWayRank). Their slots come back to
   * fill(), which deploys the group's envs first. Never while a reset waits (rebalance evicts then).
   */
  private anticipate(envName: string): void {
    if (!this.started || this.closed || !this.backoff.refilling || this.waiters.length > 0) return;
    const grouped = this.demand.groupSize() > 1;
    const wanted = grouped ? this.demand.expected(envName) - this.spareOf(envName) : this.spareOf(envName) === 0 ? 1 : 0;
    const { admission } = this.deps;
    // envs promised to resets are leaving the pool: their room is the group's once they have
    const staying = this.entries.filter((x) => !x.promisedTo).length;
    const available = Math.min(this.size - staying, admission.capacity - admission.activeCount + this.evictingForDemand);
    let over = wanted - available;
    while (over > 0) {
      const free = this.entries.filter((x) => !x.promisedTo && !x.checking && x.envName !== envName);
      const victim = grouped
        ? (this.stalest(free.filter((x) => this.demand.giveWayRank(x.envName) === 0)) ??
          this.stalest(free.filter((x) => this.demand.giveWayRank(x.envName) === 1)))
        : this.stalest(free.filter((x) => this.demand.isStale(x.envName)));
      if (!victim) break;
      this.log().info(
        { event: 'pool_evict', env_id: victim.id, env: victim.envName, reason: 'stale', for_env: envName },
        'evicted a pooled env of an env asked for least lately, for an env in demand',
      );
      this.evictingForDemand++;
      this.discard(victim, 'stale', () => {
        this.evictingForDemand--;
        this.fill();
      });
      over--;
    }
    this.fill();
  }

  /**
   * Deploys pooled envs into free slots, while no reset waits, up to the pool's size (the rest of
   * groups first); while the last refill failed, only WARM_POOL.refillsAfterFailure at a time.
   */
  private fill(): void {
    if (!this.started || this.closed || !this.backoff.refilling) return;
    const maxDeploying = this.backoff.maxDeploying(this.size);
    const ready = this.deps.imageReady ?? (() => true);
    while (this.entries.length < this.size && this.waiters.length === 0 && this.refillsDeploying() < maxDeploying) {
      // what to deploy before the slot: an env whose image is not ready is not deployed ahead of demand
      const group = this.demand.openGroups().find((name) => ready(name) && this.demand.expected(name) > this.spareOf(name));
      const envName = group ?? this.pickEnv(ready);
      if (envName === null) return;
      const slot = this.deps.admission.tryAcquire();
      if (!slot) return;
      this.held++;
      this.deployEntry(slot, envName, group !== undefined);
    }
  }

  /** refills deploying that no waiting reset is promised */
  private refillsDeploying(): number {
    return this.entries.filter((e) => e.state === 'deploying' && !e.promisedTo).length;
  }

  private pickEnv(eligible: (envName: string) => boolean): string | null {
    return this.demand.next(this.size, (name) => this.entries.filter((e) => e.envName === name).length, eligible);
  }

  private deployEntry(slot: Slot, envName: string, anticipated: boolean): void {
    const e: Entry = {
      id: `pool-${randomUUID()}`,
      envName,
      slot,
      state: 'deploying',
      handle: null,
      spec: null,
      readyAt: 0,
      controller: new AbortController(),
      ticket: null,
      promisedTo: null,
      checking: false,
      anticipated,
      expiry: null,
    };
    this.entries.push(e);
    this.known.add(e.id);
    const { sandbox, deploys, envSpec } = this.deps;
    const modelDoor = this.deps.doors?.pooledDoor(e.id);
    void (async () => {
      try {
        const spec = await envSpec(envName);
        const deploy = () => sandbox.deploy({ envId: e.id, env: spec, signal: e.controller.signal, ...(modelDoor ? { modelDoor } : {}) });
        const handle = await deploys.run(deploy, {
          priority: e.promisedTo ? 'reset' : 'refill',
          signal: e.controller.signal,
          ticket: (t) => (e.ticket = t),
        });
        if (e.controller.signal.aborted || !this.entries.includes(e)) return;
        e.handle = handle;
        e.spec = spec;
        e.state = 'ready';
        e.readyAt = this.now();
        e.ticket = null;
        this.backoff.succeeded();
        handle.gone?.addEventListener(
          'abort',
          () => {
            if (this.entries.includes(e) && !e.promisedTo && !e.checking) {
              this.log().warn(
                { event: 'pool_discard', env_id: e.id, env: e.envName, reason: 'died in the pool' },
                'a pooled env died while waiting: discarded',
              );
              this.discard(e, 'dead');
              this.fill();
            }
          },
          { once: true },
        );
        if (e.anticipated) {
          e.expiry = setTimeout(() => {
            if (!this.entries.includes(e) || e.promisedTo || e.checking) return;
            this.log().info(
              { event: 'pool_discard', env_id: e.id, env: e.envName, reason: 'expired' },
              'an env deployed for the rest of a group went untaken: discarded',
            );
            this.discard(e, 'expired');
            this.fill();
          }, WARM_POOL.anticipationTtlMs);
          e.expiry.unref?.();
        }
        if (e.promisedTo) void this.handOut(e.promisedTo, e);
        else this.rebalance();
        // after a failure refills ran one at a time: this success lets the rest go
        this.fill();
      } catch (err) {
        if (e.controller.signal.aborted || !this.entries.includes(e)) return;
        this.refillFailed(e, err as Error);
      }
    })();
  }

  private refillFailed(e: Entry, err: Error): void {
    this.counts.refillFailures++;
    this.deps.metrics.poolRefillFailures.inc();
    const w = e.promisedTo;
    // a failed deploy leaves nothing behind (Sandbox.deploy): only the slot goes back
    this.discard(e, 'failed');
    if (w && !w.queued) this.lostCandidate(w, e);
    else if (w && w.candidate === e) w.candidate = null;
    const delay = this.backoff.failed(err.message);
    const failures = this.backoff.consecutiveFailures;
    if (delay !== null) {
      this.log().error(
        { event: 'pool_refill_stopped', consecutive_failures: failures, err: err.message, retry_in_s: delay / 1000 },
        `the warm pool stopped refilling after ${failures} failed refills in a row (last: ${err.message}); retrying in ${delay / 1000} s`,
      );
      // the refills still deploying would most likely fail the same way: stopped, not counted
      for (const x of this.entries.filter((y) => y.state === 'deploying' && !y.promisedTo)) this.discard(x, 'stopped');
    } else {
      this.log().warn({ event: 'pool_refill_failed', consecutive_failures: failures, err: err.message }, 'a warm pool refill failed');
    }
    this.rebalance();
    this.fill();
  }

  private removeEntry(e: Entry): void {
    const i = this.entries.indexOf(e);
    if (i >= 0) this.entries.splice(i, 1);
    if (e.expiry) clearTimeout(e.expiry);
    e.expiry = null;
  }

  /**
   * Out of the pool: its deploy aborted, its resources removed, then its slot freed (after the
   * container is gone, before the network is: the network holds no env). `onFreed` runs once the
   * slot is back.
   */
  private discard(e: Entry, reason: 'dead' | 'evicted' | 'stale' | 'expired' | 'failed' | 'stopped' | 'closed', onFreed?: () => void): void {
    this.removeEntry(e);
    this.counts.discarded++;
    this.deps.metrics.poolDiscarded.inc({ reason });
    e.controller.abort(new Error(`pooled env ${reason}`));
    let freed = false;
    const free = () => {
      if (freed) return;
      freed = true;
      this.held--;
      e.slot.release();
      onFreed?.();
    };
    const doors = this.deps.doors;
    const p = (doors ? doors.revoke(e.id).catch(() => undefined) : Promise.resolve())
      .then(() => this.deps.sandbox.teardown(e.id, { onEnvRemoved: free }))
      .catch((err: Error) =>
        this.log().error({ event: 'teardown_failed', env_id: e.id, err: err.message }, 'could not remove a pooled env; the reconciler will retry'),
      )
      .finally(() => {
        free();
        this.known.delete(e.id);
        this.removals.delete(p);
      });
    this.removals.add(p);
  }

  /** Drain: no more refills; every pooled env torn down (waiting resets were refused by admission). */
  async close(): Promise<void> {
    this.closed = true;
    this.backoff.close();
    for (const e of [...this.entries]) {
      if (e.checking) continue;
      const w = e.promisedTo;
      this.discard(e, 'closed');
      // a reset waiting for it outside the queue goes there, which the drain refuses
      if (w && !w.queued) this.lostCandidate(w, e);
    }
    while (this.removals.size > 0 || this.entries.length > 0) {
      await Promise.all([...this.removals]);
      if (this.removals.size === 0 && this.entries.length > 0) await new Promise((r) => setTimeout(r, 10));
    }
  }

  private log(): Logger {
    return this.deps.log;
  }
}

async function shellCheck(shell: EnvShell | undefined, env: PooledEnv): Promise<boolean> {
  if (!shell) return false;
  const stop = AbortSignal.timeout(WARM_POOL.handoutCheckMs);
  return (await probeExec(shell.exec(env.handle), WARM_POOL.handoutCheckMs, stop)).ok;
}

async function httpCheck(env: PooledEnv): Promise<boolean> {
  // a redirect is not followed (it is a broken env)
  // over the env's kept connection, which the episode's client then reuses for its /reset
  return (await statusOf(`${env.handle.baseUrl}${env.spec.readyPath}`, WARM_POOL.handoutCheckMs, keptConnection(env.handle))) === 200;
}
