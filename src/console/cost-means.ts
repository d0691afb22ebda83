/**
 * What episodes cost, on average (the console's task and group tables): per figure, the episodes
 * that reported it and their sum, exact; the mean rounded as the figure is (seconds to the
 * millisecond, bytes to the byte).
 */
import type { CostMeans } from '../protocol/console.js';
import type { EpisodeCost } from '../protocol/observations.js';

const FIGURES = ['cpu_s', 'peak_memory_bytes', 'bytes_written', 'wall_s'] as const;
type Figure = (typeof FIGURES)[number];

export class CostSums {
  /** episodes with a cost */
  private n = 0;
  private readonly sums = Object.fromEntries(FIGURES.map((f) => [f, { n: 0, sum: 0 }])) as Record<Figure, { n: number; sum: number }>;

  /** an ended episode's cost (null: it had none) */
  add(cost: EpisodeCost | null): void {
    if (!cost) return;
    this.n++;
    for (const f of FIGURES) {
      const v = cost[f];
      if (v === null) continue;
      this.sums[f].n++;
      this.sums[f].sum += v;
    }
  }

  /** another set of sums (a bucket's, into the window's) */
  merge(other: CostSums): void {
    this.n += other.n;
    for (const f of FIGURES) {
      this.sums[f].n += other.sums[f].n;
      this.sums[f].sum += other.sums[f].sum;
    }
  }

  means(): CostMeans {
    const mean = (f: Figure, round: (x: number) => number) => (this.sums[f].n ? round(this.sums[f].sum / this.sums[f].n) : null);
    const s3 = (x: number) => Math.round(x * 1000) / 1000;
    return {
      n: this.n,
      cpu_s: mean('cpu_s', s3),
      peak_memory_bytes: mean('peak_memory_bytes', Math.round),
      bytes_written: mean('bytes_written', Math.round),
      wall_s: mean('wall_s', s3),
    };
  }
}
