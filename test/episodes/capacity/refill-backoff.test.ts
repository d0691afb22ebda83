/** When the warm pool may refill after failures (src/episodes/capacity/refill-backoff.ts), on a fake clock. */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { WARM_POOL } from '../../../src/defaults.js';
import { RefillBackoff } from '../../../src/episodes/capacity/refill-backoff.js';

describe('RefillBackoff', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  it('one failure narrows refills to one at a time; the threshold stops refilling; a success opens them again', () => {
    let resumed = 0;
    const b = new RefillBackoff(
      () => resumed++,
      () => Date.now(),
    );
    expect(b.maxDeploying(8)).toBe(8);
    for (let i = 1; i < WARM_POOL.maxConsecutiveFailures; i++) {
      expect(b.failed(`boom ${i}`)).toBeNull();
      expect(b.maxDeploying(8)).toBe(WARM_POOL.refillsAfterFailure);
      expect(b.refilling).toBe(true);
    }
    expect(b.failed('boom last')).toBe(WARM_POOL.backoffBaseMs);
    expect(b).toMatchObject({ refilling: false, consecutiveFailures: WARM_POOL.maxConsecutiveFailures, lastError: 'boom last' });
    expect(b.retryInS()).toBe(WARM_POOL.backoffBaseMs / 1000);
    // a failure counted while stopped does not stop it again
    expect(b.failed('while stopped')).toBeNull();
    vi.advanceTimersByTime(WARM_POOL.backoffBaseMs);
    expect(resumed).toBe(1);
    expect(b.refilling).toBe(true);
    expect(b.maxDeploying(8)).toBe(WARM_POOL.refillsAfterFailure);
    b.succeeded();
    expect(b.maxDeploying(8)).toBe(8);
    expect(b.consecutiveFailures).toBe(0);
  });

  it('the backoff doubles with each stop, up to its cap, and starts over after a success', () => {
    const b = new RefillBackoff(
      () => {},
      () => Date.now(),
    );
    const stop = () => {
      let delay: number | null = null;
      while (delay === null) delay = b.failed('x');
      vi.advanceTimersByTime(delay);
      return delay;
    };
    const delays = Array.from({ length: 9 }, stop);
    expect(delays.slice(0, 3)).toEqual([WARM_POOL.backoffBaseMs, WARM_POOL.backoffBaseMs * 2, WARM_POOL.backoffBaseMs * 4]);
    expect(Math.max(...delays)).toBe(WARM_POOL.backoffMaxMs);
    b.succeeded();
    expect(stop()).toBe(WARM_POOL.backoffBaseMs);
    b.close();
  });
});
