/**
 * What the warm pool should hold in a bundle with several envs: a window of the env kinds of the
 * last WARM_POOL.demandWindow resets (seeded with the default split's tasks before the first
 * reset), and the env furthest below its share of that window.
 */
import type { LoadedBundle } from '../../bundle/index.js';
import { WARM_POOL } from '../../defaults.js';

export class PoolDemand {
  private readonly window: string[] = [];

  constructor(private readonly bundle: LoadedBundle) {
    const tasks = bundle.splits[bundle.manifest.default_split] ?? [];
    const step = Math.max(1, Math.floor(tasks.length / WARM_POOL.demandWindow));
    for (let i = 0; i < tasks.length && this.window.length < WARM_POOL.demandWindow; i += step) {
      this.window.push(bundle.envOf(tasks[i]!).name);
    }
    if (this.window.length === 0) this.window.push(...Object.keys(bundle.manifest.envs));
  }

  /** a reset asked for `envName` */
  record(envName: string): void {
    this.window.push(envName);
    if (this.window.length > WARM_POOL.demandWindow) this.window.shift();
  }

  /** the env furthest below its share of `size` pooled envs, given how many of each it `has` */
  next(size: number, has: (envName: string) => number): string {
    const counts = new Map<string, number>();
    for (const n of this.window) counts.set(n, (counts.get(n) ?? 0) + 1);
    let best: string | null = null;
    let bestGap = -Infinity;
    for (const [name, n] of counts) {
      const gap = (n / this.window.length) * size - has(name);
      if (gap > bestGap) {
        bestGap = gap;
        best = name;
      }
    }
    return best ?? Object.keys(this.bundle.manifest.envs)[0]!;
  }
}
