/**
 * The one worker pool: jobs run in the order given, at most `limit` at once. Once `signal` aborts,
 * or once a job fails, no job starts; those running are waited for. check plays its tasks through
 * it, eval its episodes, the soak its load.
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
