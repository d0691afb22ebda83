/**
 * What the warm pool should hold in a bundle with several envs: a window of the env kinds of the
 * last WARM_POOL.demandWindow resets (seeded with the default split's tasks before the first
 * reset), and the env furthest below its share of that window, among envs asked for lately (an env
 * none asked for within WARM_POOL.staleAfterMs is stale: refills skip it, its pooled envs give way
 * first). With --warm-pool-group, the groups resets of one env arrive in: the resets of an env each
 * within WARM_POOL.groupGapMs of the previous one are one group, and a group's size is given
 * (--warm-pool-group N) or learnt (auto: the median size of the last groups that closed).
 */
import type { LoadedBundle } from '../../bundle/index.js';
import { WARM_POOL } from '../../defaults.js';

/** --warm-pool-group: a group size, or learnt from how resets arrive; 1 is off */
export type GroupSize = number | 'auto';

interface Run {
  /** resets of the env in its current group */
  seen: number;
  last: number;
}

export class PoolDemand {
  private readonly window: string[] = [];
  /** when each env was last asked for (seeded envs: at start) */
  private readonly lastAsked = new Map<string, number>();
  /** envs a reset asked for (not only seeded) */
  private readonly asked = new Set<string>();
  /** each env's current group of resets */
  private readonly runs = new Map<string, Run>();
  /** sizes of the last groups that closed (auto) */
  private readonly sizes: number[] = [];

  constructor(
    bundle: LoadedBundle,
    private readonly group: GroupSize = 1,
    private readonly now: () => number = Date.now,
  ) {
    const tasks = bundle.splits[bundle.manifest.default_split] ?? [];
    const step = Math.max(1, Math.floor(tasks.length / WARM_POOL.demandWindow));
    for (let i = 0; i < tasks.length && this.window.length < WARM_POOL.demandWindow; i += step) {
      this.window.push(bundle.envOf(tasks[i]!).name);
    }
    if (this.window.length === 0) this.window.push(...Object.keys(bundle.manifest.envs));
    const t = this.now();
    for (const n of this.window) this.lastAsked.set(n, t);
  }

  /** a reset asked for `envName` */
  record(envName: string): void {
    this.window.push(envName);
    if (this.window.length > WARM_POOL.demandWindow) this.window.shift();
    const t = this.now();
    this.lastAsked.set(envName, t);
    this.asked.add(envName);
    const run = this.runs.get(envName);
    if (run && t - run.last <= WARM_POOL.groupGapMs) {
      run.seen++;
      run.last = t;
    } else {
      if (run) this.closed(run.seen);
      this.runs.set(envName, { seen: 1, last: t });
    }
  }

  /** the group size in force: the option's, or the median of the last groups (1 until one closed) */
  groupSize(): number {
    if (this.group !== 'auto') return this.group;
    const t = this.now();
    // groups that ended without a later reset of their env count once their gap has passed
    for (const [name, run] of this.runs) {
      if (t - run.last > WARM_POOL.groupGapMs) {
        this.closed(run.seen);
        this.runs.delete(name);
      }
    }
    if (this.sizes.length === 0) return 1;
    const sorted = [...this.sizes].sort((a, b) => a - b);
    return sorted[Math.floor((sorted.length - 1) / 2)]!;
  }

  /**
   * How many more resets of `envName` its open group is still expected to bring (0: no open
   * group, or it is complete). Back-to-back groups of one env count on: the 9th reset of groups
   * of 8 opens the next.
   */
  expected(envName: string): number {
    const n = this.groupSize();
    const run = this.runs.get(envName);
    if (n <= 1 || !run || this.now() - run.last > WARM_POOL.groupGapMs) return 0;
    return (n - (run.seen % n)) % n;
  }

  /** envs whose groups still expect resets, the most recently asked first */
  openGroups(): string[] {
    return [...this.runs.entries()]
      .filter(([name]) => this.expected(name) > 0)
      .sort((a, b) => b[1].last - a[1].last)
      .map(([name]) => name);
  }

  /** when `envName` was last asked for (-Infinity: never) */
  lastAskedAt(envName: string): number {
    return this.lastAsked.get(envName) ?? -Infinity;
  }

  /**
   * With groups, which pooled envs give way first to the rest of another env's group (lower first):
   * 0, those of an env whose own group is over (asked for, not within the gap) or that is stale;
   * 1, those of an env only the seeding named (a guess at a group still to come); null, those of
   * an env whose group is still arriving (they never give way to another group).
   */
  giveWayRank(envName: string): 0 | 1 | null {
    if (this.isStale(envName)) return 0;
    const run = this.runs.get(envName);
    if (run !== undefined && this.now() - run.last <= WARM_POOL.groupGapMs) return null;
    return this.asked.has(envName) ? 0 : 1;
  }

  /** none asked for it within WARM_POOL.staleAfterMs */
  isStale(envName: string): boolean {
    return this.now() - this.lastAskedAt(envName) > WARM_POOL.staleAfterMs;
  }

  /**
   * the env furthest below its share of `size` pooled envs, given how many of each it `has`, among
   * the `eligible` ones (those whose image is ready); stale envs only when all are; null when no
   * env demand names can be deployed now
   */
  next(size: number, has: (envName: string) => number, eligible: (envName: string) => boolean = () => true): string | null {
    const counts = new Map<string, number>();
    for (const n of this.window) if (eligible(n)) counts.set(n, (counts.get(n) ?? 0) + 1);
    // no env demand names can be deployed now (their images not ready): nothing is guessed beyond
    // demand (an env none named would hold a slot for nobody); the pool fills as their images settle
    if (counts.size === 0) return null;
    // with groups, an env whose group is arriving gets what it needs from its group's count, not by its share
    const fresh = [...counts.keys()].filter((n) => !this.isStale(n) && !this.served(n));
    const among = fresh.length > 0 ? fresh : [...counts.keys()];
    let best: string | null = null;
    let bestGap = -Infinity;
    const counted = [...counts.values()].reduce((a, b) => a + b, 0);
    for (const name of among) {
      const gap = (counts.get(name)! / counted) * size - has(name);
      if (gap > bestGap) {
        bestGap = gap;
        best = name;
      }
    }
    return best;
  }

  /** with groups: the env's group is still arriving (its last reset within the gap): what it needs is started for it, not refilled */
  private served(envName: string): boolean {
    const run = this.runs.get(envName);
    return run !== undefined && this.groupSize() > 1 && this.now() - run.last <= WARM_POOL.groupGapMs;
  }

  private closed(size: number): void {
    this.sizes.push(size);
    if (this.sizes.length > WARM_POOL.groupHistory) this.sizes.shift();
  }
}
