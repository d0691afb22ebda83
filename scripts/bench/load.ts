/**
 * The two loads the bench puts on the server and on its baselines alike: a sustained run (so many
 * episodes, so many at a time, as fast as they go) and a burst (all at once).
 */
import { ticker, type BenchContext } from './context.js';

export interface SustainedRate {
  perS: number;
  wallS: number;
}

/** `episodes` runs of `one`, `concurrency` at a time; `one` gets the run's number and its worker slot (0 to concurrency - 1) */
export async function sustained(
  ctx: BenchContext,
  what: string,
  { episodes, concurrency }: { episodes: number; concurrency: number },
  one: (k: number, slot: number) => Promise<void>,
): Promise<SustainedRate> {
  let next = 0;
  let done = 0;
  const stop = ticker(ctx, what, () => done, episodes);
  const t0 = performance.now();
  try {
    await Promise.all(
      Array.from({ length: concurrency }, async (_, slot) => {
        while (next < episodes) {
          await one(next++, slot);
          done++;
        }
      }),
    );
  } finally {
    stop();
  }
  const wallS = (performance.now() - t0) / 1000;
  return { perS: episodes / wallS, wallS };
}

/** `size` runs of `one` at once; `t0` is when they were all sent off */
export async function burst<T>(
  ctx: BenchContext,
  what: string,
  size: number,
  one: (t0: number, k: number) => Promise<T>,
): Promise<{ results: T[]; t0: number }> {
  let started = 0;
  const stop = ticker(ctx, what, () => started, size);
  const t0 = performance.now();
  try {
    const results = await Promise.all(
      Array.from({ length: size }, async (_, k) => {
        const r = await one(t0, k);
        started++;
        return r;
      }),
    );
    return { results, t0 };
  } finally {
    stop();
  }
}
