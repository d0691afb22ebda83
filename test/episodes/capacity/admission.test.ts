import { describe, expect, it, vi, afterEach } from 'vitest';
import { Admission, type Slot } from '../../../src/episodes/capacity/admission.js';
import { CapacityError, ShuttingDownError } from '../../../src/errors.js';

afterEach(() => vi.useRealTimers());

describe('Admission (FIFO, deadlines, abort)', () => {
  it('admits up to capacity at once, then queues', async () => {
    const a = new Admission(2, 10);
    const s1 = await a.acquire({ timeoutMs: 1000 });
    await a.acquire({ timeoutMs: 1000 });
    expect(a.activeCount).toBe(2);
    let got = false;
    const p = a.acquire({ timeoutMs: 1000 }).then((s) => ((got = true), s));
    await Promise.resolve();
    expect(got).toBe(false);
    expect(a.waitingCount).toBe(1);
    s1.release();
    await p;
    expect(got).toBe(true);
    expect(a.activeCount).toBe(2);
    expect(a.waitingCount).toBe(0);
  });

  it('serves waiters in arrival order, and a newcomer cannot overtake the queue', async () => {
    const a = new Admission(1, 100);
    const first = await a.acquire({ timeoutMs: 1000 });
    const order: number[] = [];
    const waiters = [0, 1, 2, 3, 4].map((i) =>
      a.acquire({ timeoutMs: 5000 }).then((s) => {
        order.push(i);
        return s;
      }),
    );
    first.release();
    // a newcomer arriving while slots are handed over goes to the back
    const late = a.acquire({ timeoutMs: 5000 }).then((s) => (order.push(99), s));
    for (const w of waiters) (await w).release();
    (await late).release();
    expect(order).toEqual([0, 1, 2, 3, 4, 99]);
    expect(a.activeCount).toBe(0);
  });

  it('a waiter past its deadline gets CapacityError with the counts, and leaves the queue', async () => {
    vi.useFakeTimers();
    const a = new Admission(1, 10);
    await a.acquire({ timeoutMs: 1000 });
    const p = a.acquire({ timeoutMs: 2500 });
    const caught = p.catch((e) => e);
    await vi.advanceTimersByTimeAsync(2500);
    const err = await caught;
    expect(err).toBeInstanceOf(CapacityError);
    expect(err.capacity).toMatchObject({ active_sessions: 1, max_sessions: 1, waiting: 1 });
    expect(err.capacity.waited_s).toBeCloseTo(2.5, 1);
    expect(err.capacity.retry_after_s).toBeGreaterThanOrEqual(1);
    expect(err.message).toMatch(/reset timeout \(2\.5 s\)/);
    expect(a.waitingCount).toBe(0);
  });

  it('abort leaves the queue at once and the next waiter moves up', async () => {
    const a = new Admission(1, 10);
    const held = await a.acquire({ timeoutMs: 1000 });
    const ac = new AbortController();
    const aborted = a.acquire({ timeoutMs: 10_000, signal: ac.signal }).catch((e) => e);
    const next = a.acquire({ timeoutMs: 10_000 });
    ac.abort();
    expect((await aborted).name).toBe('AbortError');
    expect(a.waitingCount).toBe(1);
    held.release();
    const s = await next;
    s.release();
    expect(a.activeCount).toBe(0);
  });

  it('release is idempotent: a double release frees one slot, not two', async () => {
    const a = new Admission(1, 10);
    const s = await a.acquire({ timeoutMs: 100 });
    s.release();
    s.release();
    expect(a.activeCount).toBe(0);
    const s2 = await a.acquire({ timeoutMs: 100 });
    const s3p = a.acquire({ timeoutMs: 10_000 });
    s.release(); // a stale handle must not free s2's slot
    expect(a.activeCount).toBe(1);
    expect(a.waitingCount).toBe(1);
    s2.release();
    (await s3p).release();
  });

  it('refuses at once when max_waiting resets already wait', async () => {
    const a = new Admission(1, 1);
    await a.acquire({ timeoutMs: 1000 });
    const w = a.acquire({ timeoutMs: 10_000 }).catch((e) => e);
    const err = await a.acquire({ timeoutMs: 10_000 }).catch((e) => e);
    expect(err).toBeInstanceOf(CapacityError);
    expect(err.capacity).toMatchObject({ waiting: 1, waited_s: 0 });
    a.drain();
    expect(await w).toBeInstanceOf(ShuttingDownError);
  });

  it('drain rejects every waiter and every later acquire; each waiter gets exactly one outcome', async () => {
    vi.useFakeTimers();
    const a = new Admission(1, 10);
    const held = await a.acquire({ timeoutMs: 1000 });
    const outcomes: string[][] = [[], [], []];
    const ps = outcomes.map((o) =>
      a.acquire({ timeoutMs: 1000 }).then(
        (s: Slot) => (o.push('slot'), s.release()),
        (e: Error) => o.push(e.name),
      ),
    );
    a.drain();
    held.release();
    await vi.advanceTimersByTimeAsync(5000);
    await Promise.all(ps);
    expect(outcomes).toEqual([['ShuttingDownError'], ['ShuttingDownError'], ['ShuttingDownError']]);
    expect((await a.acquire({ timeoutMs: 10 }).catch((e) => e)).name).toBe('ShuttingDownError');
    expect(a.activeCount).toBe(0);
  });

  it('under churn of timeouts and aborts every acquire gets one outcome, the cap is reached and never passed, and no slot leaks', async () => {
    const a = new Admission(3, 1000);
    let inUse = 0;
    let peak = 0;
    const outcomes: string[] = [];
    const runs = Array.from({ length: 60 }, async (_, i) => {
      const ac = new AbortController();
      if (i % 7 === 0) setTimeout(() => ac.abort(), i % 5);
      let outcome: string;
      try {
        const s = await a.acquire({ timeoutMs: i % 11 === 0 ? 1 : 5000, signal: ac.signal });
        outcome = 'slot';
        inUse++;
        peak = Math.max(peak, inUse);
        await new Promise((r) => setTimeout(r, i % 4));
        inUse--;
        s.release();
      } catch (e) {
        outcome = (e as Error).name;
      }
      outcomes[i] = outcome;
    });
    await Promise.all(runs);
    expect(outcomes.filter(Boolean)).toHaveLength(60);
    // an acquire that could neither time out (5 s, far past the churn) nor be aborted got its slot
    const plain = outcomes.filter((_, i) => i % 7 !== 0 && i % 11 !== 0);
    expect(plain).toHaveLength(46);
    expect(new Set(plain)).toEqual(new Set(['slot']));
    // the others ended as what they are: a slot, a timeout (CapacityError) or an abort
    for (const o of outcomes) expect(['slot', 'CapacityError', 'AbortError']).toContain(o);
    expect(peak).toBe(3);
    expect(a.activeCount).toBe(0);
    expect(a.waitingCount).toBe(0);
  });
});
