/** Durations as the wire and the logs show them. */

/** milliseconds → seconds, to the millisecond (timings, log fields) */
export function seconds3(ms: number): number {
  return Math.round(ms) / 1000;
}

/** milliseconds → "2 s" / "0.5 s" for messages a person reads */
export function fmtS(ms: number): string {
  const s = ms / 1000;
  return `${Number.isInteger(s) ? s : Number(s.toFixed(1))} s`;
}
