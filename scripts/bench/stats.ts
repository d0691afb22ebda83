/** Percentiles and burst summaries, for `npm run bench` and `npm run bench:swarm` alike. */

/** the nearest-rank percentile `p` (0 to 100) of `xs`, in any order; NaN when `xs` is empty */
export function percentile(xs: number[], p: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
}

/** `x` rounded to `d` decimals */
export function round(x: number, d = 3): number {
  return Number(x.toFixed(d));
}

/** a latency's median and 95th percentile, in ms */
export interface Pair {
  p50_ms: number;
  p95_ms: number;
}

/** the Pair of `xs` (ms), rounded to `decimals` */
export function pair(xs: number[], decimals = 2): Pair {
  return { p50_ms: round(percentile(xs, 50), decimals), p95_ms: round(percentile(xs, 95), decimals) };
}

/** milliseconds as seconds, rounded to `decimals` */
export function seconds(ms: number, decimals = 3): number {
  return Number((ms / 1000).toFixed(decimals));
}

/** a burst of resets: each one's latency, and when the last episode had started (seconds from the first request) */
export interface BurstSummary {
  resetMs: number[];
  p50_s: number;
  p95_s: number;
  max_s: number;
  last_started_s: number;
  /** resets answered from the warm pool */
  pooled: number;
}

export function summarizeBurst(resetMs: number[], lastStartedMs: number, pooled: number): BurstSummary {
  return {
    resetMs,
    p50_s: seconds(percentile(resetMs, 50)),
    p95_s: seconds(percentile(resetMs, 95)),
    max_s: seconds(Math.max(...resetMs)),
    last_started_s: seconds(lastStartedMs),
    pooled,
  };
}
