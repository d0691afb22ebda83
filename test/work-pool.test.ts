/** The one worker pool: at most N jobs at once, in order; an abort or a failure starts no more, and those running are waited for (or, settling, every job runs). */
import { describe, expect, it } from 'vitest';
import { forEachAtMost, settleEachAtMost } from '../src/util/work-pool.js';

const tick = () => new Promise((r) => setTimeout(r, 5));

describe('forEachAtMost', () => {
  it('runs every item, at most `limit` at once, starting them in order', async () => {
    let running = 0;
    let peak = 0;
    const started: number[] = [];
    const r = await forEachAtMost([0, 1, 2, 3, 4, 5, 6], 3, async (x) => {
      started.push(x);
      peak = Math.max(peak, ++running);
      await tick();
      running--;
    });
    expect(started).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(peak).toBe(3);
    expect(r).toEqual({ finished: 7, skipped: 0 });
    expect(await forEachAtMost([], 4, async () => undefined)).toEqual({ finished: 0, skipped: 0 });
  });

  it('once aborted starts nothing more and waits for what runs', async () => {
    const stop = new AbortController();
    const ended: number[] = [];
    const r = await forEachAtMost(
      [0, 1, 2, 3, 4, 5],
      2,
      async (x) => {
        if (x === 2) stop.abort();
        await tick();
        ended.push(x);
      },
      stop.signal,
    );
    // 0 and 1 ran; 2 started after 0, aborted, and still ran to its end; nothing after
    expect(ended.sort()).toEqual([0, 1, 2]);
    expect(r).toEqual({ finished: 3, skipped: 3 });
  });

  it('rejects with the first failure, after the jobs running have settled, starting no more', async () => {
    const ended: number[] = [];
    await expect(
      forEachAtMost([0, 1, 2, 3, 4], 2, async (x) => {
        await tick();
        if (x === 1) throw new Error('job 1 failed');
        if (x === 2) throw new Error('job 2 failed too');
        await tick();
        ended.push(x);
      }),
    ).rejects.toThrow('job 1 failed');
    // 0 was running when 1 failed and ran to its end; nothing started after
    expect(ended).toEqual([0]);
  });
});

describe('settleEachAtMost', () => {
  it('runs every item, at most `limit` at once, whatever fails, each outcome at its index', async () => {
    let running = 0;
    let peak = 0;
    const started: number[] = [];
    const out = await settleEachAtMost([0, 1, 2, 3, 4, 5], 2, async (x) => {
      started.push(x);
      peak = Math.max(peak, ++running);
      await tick();
      running--;
      if (x === 1 || x === 4) throw new Error(`job ${x} failed`);
      return x * 10;
    });
    expect(started).toEqual([0, 1, 2, 3, 4, 5]);
    expect(peak).toBe(2);
    expect(out.map((o) => (o.ok ? o.value : (o.error as Error).message))).toEqual([0, 'job 1 failed', 20, 30, 'job 4 failed', 50]);
    expect(await settleEachAtMost([], 3, async () => 1)).toEqual([]);
  });
});
