/**
 * When the warm pool may refill after failures: each failed refill counts the moment it fails;
 * after one, at most WARM_POOL.refillsAfterFailure refills run at once until one succeeds; after
 * WARM_POOL.maxConsecutiveFailures in a row refilling stops, and resumes after a backoff that
 * doubles from WARM_POOL.backoffBaseMs up to WARM_POOL.backoffMaxMs (a success resets it).
 */
import { Backoff } from '../../util/backoff.js';
import { WARM_POOL } from '../../defaults.js';

export class RefillBackoff {
  consecutiveFailures = 0;
  lastError: string | null = null;
  private pausedUntil: number | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly delays = new Backoff(WARM_POOL.backoffBaseMs, WARM_POOL.backoffMaxMs);

  constructor(
    /** called when a stop's backoff is over */
    private readonly onResume: () => void,
    private readonly now: () => number = Date.now,
  ) {}

  get refilling(): boolean {
    return this.pausedUntil === null;
  }

  /** seconds until refilling resumes, while stopped */
  retryInS(): number | null {
    return this.pausedUntil === null ? null : Math.max(0, Math.round((this.pausedUntil - this.now()) / 100) / 10);
  }

  /** how many refills may deploy at once now, for a pool of `size` */
  maxDeploying(size: number): number {
    return this.consecutiveFailures > 0 ? WARM_POOL.refillsAfterFailure : size;
  }

  succeeded(): void {
    this.consecutiveFailures = 0;
    this.delays.reset();
  }

  /** Counts a failed refill; returns the backoff (ms) when this failure stops refilling, else null. */
  failed(message: string): number | null {
    this.consecutiveFailures++;
    this.lastError = message;
    if (this.consecutiveFailures < WARM_POOL.maxConsecutiveFailures || this.pausedUntil !== null) return null;
    const delay = this.delays.next();
    this.pausedUntil = this.now() + delay;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.pausedUntil = null;
      this.onResume();
    }, delay);
    this.timer.unref?.();
    return delay;
  }

  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
