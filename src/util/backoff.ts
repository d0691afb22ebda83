/**
 * The one doubling backoff: the first delay is `baseMs`, each next one twice the last, at most
 * `maxMs`; `reset()` (after a success) starts over. Retries of engine calls, the events stream's
 * reopening, the network stock's and the warm pool's refill pauses all wait by it.
 */
export class Backoff {
  private n = 0;

  constructor(
    private readonly baseMs: number,
    private readonly maxMs = Infinity,
  ) {}

  /** The delay before the next attempt (and counts it). */
  next(): number {
    return Math.min(this.baseMs * 2 ** this.n++, this.maxMs);
  }

  reset(): void {
    this.n = 0;
  }
}
