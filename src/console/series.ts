/**
 * The console's time series, kept in memory in one-minute buckets (SERIES below bounds
 * how many minutes and how many values per minute): episodes ended, end reasons, failures by
 * reason, deploy latency and queue wait (in all and per lane), and per split the rewards, failures, steps and turns,
 * and per split and task group the counts, rewards and what the episodes cost (by the minute their
 * teardown read it). Counts, sums and means are exact; the
 * percentiles come from the values kept, which are all of them up to SERIES.samplesPerMinute
 * episodes a minute (beyond that, an even sample of the minute's).
 *
 * `view(window)` answers the buckets from the window's start or the first data kept, whichever
 * is later, to now: a few minutes of data fill the chart instead of hugging its right edge.
 */
import type { Distribution, GroupStats, Series, SeriesWindow } from '../protocol/console.js';
import { LANES, type Lane } from '../protocol/lanes.js';
import { CostSums } from './cost-means.js';
import { ScoreSums } from './score-means.js';
import type { EpisodeCost, Scores } from '../protocol/observations.js';

/**
 * The console's time series (src/console/series.ts): one-minute buckets kept for a day; in each,
 * at most samplesPerMinute values of each kind (rewards per split, deploy, queue wait) for the
 * percentiles (counts, sums and means stay exact beyond it). Worst case about 12 MB at sustained
 * rates above 200 episodes a minute per split. A chart gets at most maxPoints buckets (long
 * windows fold minutes together).
 */
const SERIES = { minutesKept: 24 * 60, samplesPerMinute: 200, maxPoints: 120 } as const;

/** reward histogram: below 0, ten bins over [0, 1] (1 itself in the last), above 1 */
export const REWARD_BIN_EDGES = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1];
export const BUCKET_MS = 60_000;

/** each window's span in minutes ('all': every minute kept) */
const WINDOW_MINUTES: Record<SeriesWindow, number> = { '15m': 15, '1h': 60, '6h': 360, all: SERIES.minutesKept };

function rewardBin(r: number): number {
  if (r < 0) return 0;
  if (r > 1) return REWARD_BIN_EDGES.length; // 11
  return 1 + Math.min(9, Math.floor(r * 10));
}

/** exact n, sum, max; the values themselves up to a bound (then a uniform reservoir sample) */
class Samples {
  n = 0;
  sum = 0;
  max = -Infinity;
  readonly values: number[] = [];
  constructor(private readonly cap: number) {}
  add(x: number): void {
    this.n++;
    this.sum += x;
    if (x > this.max) this.max = x;
    if (this.values.length < this.cap) this.values.push(x);
    else {
      const j = Math.floor(Math.random() * this.n);
      if (j < this.cap) this.values[j] = x;
    }
  }
}

interface GroupAcc {
  ended: number;
  failed: number;
  n: number;
  sum: number;
  scores: ScoreSums;
  costs: CostSums;
}

interface SplitBucket {
  ended: number;
  failed: number;
  reward: Samples;
  bins: number[];
  steps: number;
  turns: number;
  /** group name → value → counts */
  groups: Map<string, Map<string, GroupAcc>>;
}

interface Bucket {
  /** minute number: floor(ms / BUCKET_MS) */
  minute: number;
  ended: number;
  endReasons: Record<string, number>;
  failures: Record<string, number>;
  deploy: Samples;
  queue: Samples;
  /** the same queue waits, per lane (lanes that had one this minute) */
  queueByLane: Map<Lane, Samples>;
  splits: Map<string, SplitBucket>;
}

/** What the series need of an episode that ended. */
export interface EndedEpisode {
  split: string;
  groups: Readonly<Record<string, string>>;
  endReason: string;
  failureReason: string | null;
  reward: number | null;
  /** the env's scores of a scored episode */
  scores: Readonly<Scores> | null;
  steps: number;
  turns: number;
  /** the queue wait of an episode that never started (a started one counted it at its start) */
  queuedWithoutStart: number | null;
  /** the lane its reset waited in */
  lane: Lane;
}

/** What an episode cost, as its teardown read it (after it ended). */
export interface CostedEpisode {
  split: string;
  groups: Readonly<Record<string, string>>;
  cost: EpisodeCost;
}

export class EpisodeSeries {
  private readonly buckets: Bucket[] = [];
  private readonly now: () => number;
  private readonly minutesKept: number;
  private readonly samplesPerMinute: number;

  constructor(opts: { now?: () => number; minutesKept?: number; samplesPerMinute?: number } = {}) {
    this.now = opts.now ?? Date.now;
    this.minutesKept = opts.minutesKept ?? SERIES.minutesKept;
    this.samplesPerMinute = opts.samplesPerMinute ?? SERIES.samplesPerMinute;
  }

  /** an episode got its env: how long it waited for a slot (in `lane`), how long the deploy took */
  started(queuedS: number, deployS: number, lane: Lane): void {
    const b = this.bucket();
    this.queued(b, queuedS, lane);
    b.deploy.add(deployS);
  }

  private queued(b: Bucket, s: number, lane: Lane): void {
    b.queue.add(s);
    let byLane = b.queueByLane.get(lane);
    if (!byLane) b.queueByLane.set(lane, (byLane = new Samples(this.samplesPerMinute)));
    byLane.add(s);
  }

  ended(e: EndedEpisode): void {
    const b = this.bucket();
    b.ended++;
    b.endReasons[e.endReason] = (b.endReasons[e.endReason] ?? 0) + 1;
    if (e.failureReason !== null) b.failures[e.failureReason] = (b.failures[e.failureReason] ?? 0) + 1;
    if (e.queuedWithoutStart !== null) this.queued(b, e.queuedWithoutStart, e.lane);
    const s = this.splitBucket(b, e.split);
    const failed = e.failureReason !== null ? 1 : 0;
    s.ended++;
    s.failed += failed;
    s.steps += e.steps;
    s.turns += e.turns;
    if (e.reward !== null) {
      s.reward.add(e.reward);
      s.bins[rewardBin(e.reward)]!++;
    }
    for (const [name, value] of Object.entries(e.groups)) {
      const g = groupAcc(s, name, value);
      g.ended++;
      g.failed += failed;
      if (e.reward !== null) {
        g.n++;
        g.sum += e.reward;
        g.scores.add(e.scores);
      }
    }
  }

  /** an ended episode's cost, read as its teardown began: into its groups' cost means */
  costed(e: CostedEpisode): void {
    const s = this.splitBucket(this.bucket(), e.split);
    for (const [name, value] of Object.entries(e.groups)) groupAcc(s, name, value).costs.add(e.cost);
  }

  private splitBucket(b: Bucket, split: string): SplitBucket {
    let s = b.splits.get(split);
    if (!s) {
      s = {
        ended: 0,
        failed: 0,
        reward: new Samples(this.samplesPerMinute),
        bins: new Array<number>(REWARD_BIN_EDGES.length + 1).fill(0),
        steps: 0,
        turns: 0,
        groups: new Map(),
      };
      b.splits.set(split, s);
    }
    return s;
  }

  /** the buckets of `window`, from its start or the first data kept (whichever is later) to now */
  view(window: SeriesWindow = '1h'): Series {
    const cur = Math.floor(this.now() / BUCKET_MS);
    this.trim(cur);
    const first = this.buckets[0]?.minute ?? cur;
    const from = Math.max(first, cur - WINDOW_MINUTES[window] + 1);
    // long windows fold minutes together so a chart gets at most SERIES.maxPoints bars
    const step = Math.max(1, Math.ceil((cur - from + 1) / SERIES.maxPoints));
    const n = Math.floor((cur - from) / step) + 1;
    const start = cur - (n - 1) * step;
    const slots: Bucket[][] = Array.from({ length: n }, () => []);
    for (const b of this.buckets) if (b.minute >= start) slots[Math.floor((b.minute - start) / step)]!.push(b);

    const perKey = (pick: (b: Bucket) => Record<string, number>) => {
      const keys = [...new Set(slots.flatMap((bs) => bs.flatMap((b) => Object.keys(pick(b)))))].sort();
      return Object.fromEntries(keys.map((k) => [k, slots.map((bs) => bs.reduce((a, b) => a + (pick(b)[k] ?? 0), 0))]));
    };
    const statSeries = (pick: (b: Bucket) => Samples) => {
      const merged = slots.map((bs) => merge(bs.map(pick)));
      return {
        count: merged.map((m) => m.n),
        mean: merged.map((m) => (m.n ? round6(m.sum / m.n) : null)),
        max: merged.map((m) => (m.n ? round6(m.max) : null)),
      };
    };

    const kept = slots.flat();
    const lanes = LANES.filter((lane) => kept.some((b) => b.queueByLane.has(lane)));
    const empty = new Samples(0);
    const laneSamples = (lane: Lane) => (b: Bucket) => b.queueByLane.get(lane) ?? empty;
    const splitNames = [...new Set(kept.flatMap((b) => [...b.splits.keys()]))].sort();
    const bySplit: Series['by_split'] = {};
    const rewards: Series['rewards']['by_split'] = {};
    const rewardSummary: Record<string, Distribution> = {};
    const groups: Series['groups'] = {};
    for (const split of splitNames) {
      const at = slots.map((bs) => bs.map((b) => b.splits.get(split)).filter((x): x is SplitBucket => x !== undefined));
      const reward = at.map((ss) => merge(ss.map((x) => x.reward)));
      const ended = at.map((ss) => ss.reduce((a, x) => a + x.ended, 0));
      const perEnded = (pick: (x: SplitBucket) => number) => at.map((ss, i) => (ended[i] ? round6(ss.reduce((a, x) => a + pick(x), 0) / ended[i]!) : null));
      bySplit[split] = {
        ended,
        failed: at.map((ss) => ss.reduce((a, x) => a + x.failed, 0)),
        reward: {
          n: reward.map((r) => r.n),
          mean: reward.map((r) => (r.n ? round6(r.sum / r.n) : null)),
          p10: reward.map((r) => percentile(r.sorted, 0.1)),
          p90: reward.map((r) => percentile(r.sorted, 0.9)),
        },
        steps_mean: perEnded((x) => x.steps),
        turns_mean: perEnded((x) => x.turns),
      };
      const all = at.flat();
      const counts = new Array<number>(REWARD_BIN_EDGES.length + 1).fill(0);
      for (const x of all) x.bins.forEach((c, i) => (counts[i]! += c));
      const whole = merge(all.map((x) => x.reward));
      rewards[split] = { counts, n: whole.n, mean: whole.n ? round6(whole.sum / whole.n) : null };
      rewardSummary[split] = distribution(whole);
      const g: Record<string, Record<string, GroupStats>> = {};
      const scores = new Map<GroupStats, { scores: ScoreSums; costs: CostSums }>();
      for (const x of all) {
        for (const [name, byValue] of x.groups) {
          const out = (g[name] ??= {});
          for (const [value, acc] of byValue) {
            const o = (out[value] ??= { ended: 0, failed: 0, n: 0, mean: 0, scores: {}, cost: new CostSums().means() });
            // mean holds the running sum until the end of the loop; the scores' sums wait beside
            o.ended += acc.ended;
            o.failed += acc.failed;
            o.n += acc.n;
            o.mean = (o.mean ?? 0) + acc.sum;
            if (!scores.has(o)) scores.set(o, { scores: new ScoreSums(), costs: new CostSums() });
            scores.get(o)!.scores.merge(acc.scores);
            scores.get(o)!.costs.merge(acc.costs);
          }
        }
      }
      for (const [o, sums] of scores) {
        o.mean = o.n ? round6((o.mean ?? 0) / o.n) : null;
        o.scores = sums.scores.means();
        o.cost = sums.costs.means();
      }
      groups[split] = g;
    }

    return {
      window,
      bucket_s: (step * BUCKET_MS) / 1000,
      t: slots.map((_, i) => ((start + i * step) * BUCKET_MS) / 1000),
      kept_since: this.buckets[0] ? (this.buckets[0].minute * BUCKET_MS) / 1000 : null,
      episodes_ended: slots.map((bs) => bs.reduce((a, b) => a + b.ended, 0)),
      deploy_s: statSeries((b) => b.deploy),
      queue_wait_s: statSeries((b) => b.queue),
      queue_wait_s_by_lane: Object.fromEntries(lanes.map((lane) => [lane, statSeries(laneSamples(lane))])),
      failures: perKey((b) => b.failures),
      end_reasons: perKey((b) => b.endReasons),
      by_split: bySplit,
      rewards: { edges: REWARD_BIN_EDGES, by_split: rewards },
      summary: {
        reward: rewardSummary,
        deploy_s: distribution(merge(kept.map((b) => b.deploy))),
        queue_wait_s: distribution(merge(kept.map((b) => b.queue))),
        queue_wait_s_by_lane: Object.fromEntries(lanes.map((lane) => [lane, distribution(merge(kept.map(laneSamples(lane))))])),
      },
      groups,
    };
  }

  private bucket(): Bucket {
    const minute = Math.floor(this.now() / BUCKET_MS);
    let b = this.buckets[this.buckets.length - 1];
    if (!b || b.minute !== minute) {
      const cap = this.samplesPerMinute;
      b = { minute, ended: 0, endReasons: {}, failures: {}, deploy: new Samples(cap), queue: new Samples(cap), queueByLane: new Map(), splits: new Map() };
      this.buckets.push(b);
      this.trim(minute);
    }
    return b;
  }

  private trim(cur: number): void {
    while (this.buckets.length && this.buckets[0]!.minute <= cur - this.minutesKept) this.buckets.shift();
  }
}

/** a split bucket's counts of one group value, made when first needed */
function groupAcc(s: SplitBucket, name: string, value: string): GroupAcc {
  let byValue = s.groups.get(name);
  if (!byValue) s.groups.set(name, (byValue = new Map()));
  let g = byValue.get(value);
  if (!g) byValue.set(value, (g = { ended: 0, failed: 0, n: 0, sum: 0, scores: new ScoreSums(), costs: new CostSums() }));
  return g;
}

/** several minutes' samples as one: exact n, sum, max; the values kept, sorted */
function merge(parts: Samples[]): { n: number; sum: number; max: number; sorted: number[] } {
  let n = 0;
  let sum = 0;
  let max = -Infinity;
  const values: number[] = [];
  for (const p of parts) {
    n += p.n;
    sum += p.sum;
    if (p.max > max) max = p.max;
    for (const v of p.values) values.push(v);
  }
  return { n, sum, max, sorted: values.sort((a, b) => a - b) };
}

function distribution(m: ReturnType<typeof merge>): Distribution {
  if (m.n === 0) return { n: 0, mean: null, p10: null, p50: null, p90: null, max: null };
  return {
    n: m.n,
    mean: round6(m.sum / m.n),
    p10: percentile(m.sorted, 0.1),
    p50: percentile(m.sorted, 0.5),
    p90: percentile(m.sorted, 0.9),
    max: round6(m.max),
  };
}

/** linear interpolation between the closest ranks (numpy's default); null without values */
export function percentile(sorted: readonly number[], q: number): number | null {
  if (sorted.length === 0) return null;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return round6(sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo));
}

/** rewards carry at most 6 decimals (GridSim's scores); deploy and queue times are in seconds */
function round6(x: number): number {
  return Math.round(x * 1e6) / 1e6;
}
