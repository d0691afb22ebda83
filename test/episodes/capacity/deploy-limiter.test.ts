/** The deploy cap's order: a freed turn goes to waiting resets before refills; a promoted refill counts as a reset. */
import { describe, expect, it } from 'vitest';
import { DeployLimiter } from '../../../src/episodes/capacity/deploy-limiter.js';

function gate() {
  let open!: () => void;
  const p = new Promise<void>((r) => (open = r));
  return { p, open };
}

describe('DeployLimiter', () => {
  it('never runs more than the limit; refills yield to resets that wait', async () => {
    const lim = new DeployLimiter({ limit: 1 });
    const order: string[] = [];
    const first = gate();
    const a = lim.run(
      async () => {
        order.push('a');
        await first.p;
      },
      { priority: 'reset' },
    );
    const r1 = lim.run(
      async () => {
        order.push('refill-1');
      },
      { priority: 'refill' },
    );
    const r2 = lim.run(
      async () => {
        order.push('refill-2');
      },
      { priority: 'refill' },
    );
    const x = lim.run(
      async () => {
        order.push('reset-x');
      },
      { priority: 'reset' },
    );
    expect(lim.inFlight).toBe(1);
    expect(lim.waiting).toBe(3);
    first.open();
    await Promise.all([a, r1, r2, x]);
    expect(order).toEqual(['a', 'reset-x', 'refill-1', 'refill-2']);
    expect(lim.peak).toBe(1);
    expect(lim.inFlight).toBe(0);
  });

  it('a promoted refill goes ahead of the other refills; an aborted waiter gives its place up', async () => {
    const lim = new DeployLimiter({ limit: 1 });
    const order: string[] = [];
    const first = gate();
    const a = lim.run(
      async () => {
        await first.p;
      },
      { priority: 'reset' },
    );
    const r1 = lim.run(
      async () => {
        order.push('refill-1');
      },
      { priority: 'refill' },
    );
    let ticket: { promote(): void } | null = null;
    const r2 = lim.run(
      async () => {
        order.push('refill-2');
      },
      { priority: 'refill', ticket: (t) => (ticket = t) },
    );
    const ac = new AbortController();
    const gone = lim.run(
      async () => {
        order.push('aborted');
      },
      { priority: 'reset', signal: ac.signal },
    );
    ac.abort();
    await expect(gone).rejects.toMatchObject({ name: 'AbortError' });
    ticket!.promote();
    first.open();
    await Promise.all([a, r1, r2]);
    expect(order).toEqual(['refill-2', 'refill-1']);
  });

  it('runs up to the limit at once', async () => {
    const lim = new DeployLimiter({ limit: 3, jitterMs: 5 });
    const g = gate();
    const runs = Array.from({ length: 7 }, () => lim.run(() => g.p, { priority: 'reset' }));
    expect(lim.inFlight).toBe(3);
    g.open();
    await Promise.all(runs);
    expect(lim.peak).toBe(3);
  });
});

describe('DeployLimiter as the bench baseline uses it (one priority, FIFO)', () => {
  const atMost = (n: number) => {
    const lim = new DeployLimiter({ limit: n });
    return <T>(f: () => Promise<T>) => lim.run(f, { priority: 'reset' });
  };

  it('runs at most n at once, the others in arrival order, and passes results and errors through', async () => {
    const limit = atMost(2);
    let live = 0;
    let peak = 0;
    const began: number[] = [];
    const gates = Array.from({ length: 5 }, () => {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      return { promise, resolve };
    });
    const runs = gates.map((g, i) =>
      limit(async () => {
        began.push(i);
        peak = Math.max(peak, ++live);
        await g.promise;
        live--;
        if (i === 3) throw new Error('run 3 failed');
        return i;
      }),
    );
    await new Promise((r) => setImmediate(r));
    expect(began).toEqual([0, 1]);
    gates[1]!.resolve();
    await new Promise((r) => setImmediate(r));
    expect(began).toEqual([0, 1, 2]);
    for (const g of gates) g.resolve();
    const settled = await Promise.allSettled(runs);
    expect(settled.map((s) => (s.status === 'fulfilled' ? s.value : (s.reason as Error).message))).toEqual([0, 1, 2, 'run 3 failed', 4]);
    expect(began).toEqual([0, 1, 2, 3, 4]);
    expect(peak).toBe(2);
  });

  it('with Infinity, bounds nothing', async () => {
    const limit = atMost(Infinity);
    let live = 0;
    let peak = 0;
    await Promise.all(
      Array.from({ length: 20 }, () =>
        limit(async () => {
          peak = Math.max(peak, ++live);
          await new Promise((r) => setImmediate(r));
          live--;
        }),
      ),
    );
    expect(peak).toBe(20);
  });
});
