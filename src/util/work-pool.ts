/**
 * The one worker pool: jobs run in the order given, at most `limit` at once. forEachAtMost: once
 * `signal` aborts, or once a job fails, no job starts; those running are waited for. check plays
 * its tasks through it, eval its episodes, the soak its load. settleEachAtMost: every job runs
 * whatever the others did, each outcome kept (the env image builds at start: one failed build
 * loses none of the others).
 */
export interface WorkPoolResult {
  /** jobs that ran to the end (resolved or rejected) */
  finished: number;
  /** jobs never started (an abort or a failure stopped the pool) */
  skipped: number;
}

/** Runs `work` on every item at most `limit` at a time; rejects with the first failure once every running job has settled. */
export async function forEachAtMost<T>(
  items: readonly T[],
  limit: number,
  work: (item: T, index: number) => Promise<void>,
  signal?: AbortSignal,
): Promise<WorkPoolResult> {
  let next = 0;
  let finished = 0;
  let failure: { error: unknown } | null = null;
  const worker = async () => {
    while (next < items.length && !signal?.aborted && !failure) {
      const i = next++;
      try {
        await work(items[i] as T, i);
      } catch (error) {
        failure ??= { error };
      } finally {
        finished++;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  if (failure) throw (failure as { error: unknown }).error;
  return { finished, skipped: items.length - next };
}

/** one job's outcome in settleEachAtMost, at its item's index */
export type Settled<R> = { ok: true; value: R } | { ok: false; error: unknown };

/** Runs `work` on every item at most `limit` at a time, to the end whatever fails; the outcomes in the items' order. */
export async function settleEachAtMost<T, R>(items: readonly T[], limit: number, work: (item: T, index: number) => Promise<R>): Promise<Settled<R>[]> {
  const out = new Array<Settled<R>>(items.length);
  await forEachAtMost(items, limit, async (item, i) => {
    try {
      out[i] = { ok: true, value: await work(item, i) };
    } catch (error) {
      out[i] = { ok: false, error };
    }
  });
  return out;
}
