/** The network stock's bookkeeping, over fake networks: fill, hand-out, refill, backoff, close. */
import { describe, expect, it } from 'vitest';
import { NetworkStock, STOCK_KEY_PREFIX } from '../../src/sandbox/engine/network-stock.js';
import { silentLogger } from '../../src/sandbox/engine/logger.js';
import { DeployLimiter } from '../../src/episodes/capacity/deploy-limiter.js';
import { waitFor } from '../support/docker.js';

/** fake engine: networks it holds by key; creations can be held back or made to fail */
function fakeEngine() {
  const exists = new Set<string>();
  const created: string[] = [];
  const removed: string[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  let failNext = 0;
  let gate: Promise<void> | null = null;
  return {
    exists,
    created,
    removed,
    get maxInFlight() {
      return maxInFlight;
    },
    failNext(n: number) {
      failNext = n;
    },
    hold(): () => void {
      let open!: () => void;
      gate = new Promise<void>((r) => (open = r));
      return () => {
        gate = null;
        open();
      };
    },
    create: async (key: string) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      try {
        if (gate) await gate;
        await new Promise((r) => setImmediate(r));
        if (failNext > 0) {
          failNext--;
          throw new Error('engine said no');
        }
        exists.add(key);
        created.push(key);
        return { id: `id-${key}` };
      } finally {
        inFlight--;
      }
    },
    remove: async (key: string) => {
      exists.delete(key);
      removed.push(key);
    },
  };
}

function stockOver(engine: ReturnType<typeof fakeEngine>, size: number, extra: { backoffBaseMs?: number; recycle?: boolean } = {}) {
  return new NetworkStock<{ id: string }>({ size, what: 'network', log: silentLogger, create: engine.create, remove: engine.remove, ...extra });
}

describe('NetworkStock', () => {
  it('fills to its size one network at a time, only once started', async () => {
    const engine = fakeEngine();
    const stock = stockOver(engine, 3);
    await new Promise((r) => setTimeout(r, 20));
    expect(engine.created).toEqual([]);
    expect(stock.take('ep')).toBeNull();
    stock.start();
    await waitFor(() => stock.ready === 3, 5000, 'the stock full');
    expect(engine.created).toHaveLength(3);
    expect(engine.maxInFlight).toBe(1);
    for (const key of engine.created) {
      expect(key.startsWith(STOCK_KEY_PREFIX)).toBe(true);
      expect(stock.holds(key)).toBe(true);
    }
    await stock.close();
  });

  it('hands each network out once, never back, and refills behind the hand-outs', async () => {
    const engine = fakeEngine();
    const stock = stockOver(engine, 2);
    stock.start();
    await waitFor(() => stock.ready === 2, 5000, 'the stock full');
    const a = stock.take('ep-a')!;
    const b = stock.take('ep-b')!;
    expect(a.key).not.toBe(b.key);
    // without recycling, a network taken is the episode's for good: nothing out counts as the stock's
    expect(stock.stats().out).toBe(0);
    expect(a.net).toEqual({ id: `id-${a.key}` });
    // taken: no longer the stock's; the stock says who took it, and reports it under that episode
    expect(stock.holds(a.key)).toBe(false);
    expect(stock.holds(b.key)).toBe(false);
    expect([stock.keyTakenBy('ep-a'), stock.keyTakenBy('ep-b'), stock.keyTakenBy('ep-c')]).toEqual([a.key, b.key, undefined]);
    const readyKey = engine.created.find((k) => stock.holds(k));
    expect(stock.envIdsOf([a.key, b.key, 'stray', ...(readyKey ? [readyKey] : []), ''])).toEqual(['ep-a', 'ep-b', 'stray']);
    // once the episode's removal is done, the key is nobody's any more
    stock.forget('ep-a');
    expect(stock.keyTakenBy('ep-a')).toBeUndefined();
    expect(stock.envIdsOf([a.key])).toEqual([a.key]);
    await waitFor(() => stock.ready === 2, 5000, 'the stock refilled');
    const refilled = engine.created.slice(2);
    expect(refilled).toHaveLength(2);
    expect(refilled).not.toContain(a.key);
    expect(refilled).not.toContain(b.key);
    expect(stock.stats()).toMatchObject({ size: 2, ready: 2, made: 4, taken: 2, missed: 0 });
    await stock.close();
    // the taken ones are their episodes' to remove, not the stock's
    expect(engine.removed.sort()).toEqual(refilled.sort());
    expect(engine.exists).toEqual(new Set([a.key, b.key]));
  });

  it('recycling: a network given back is handed out again; networks out count as the stock, so steady use makes none', async () => {
    const engine = fakeEngine();
    const stock = stockOver(engine, 2, { recycle: true });
    stock.start();
    await waitFor(() => stock.ready === 2, 5000, 'the stock full');
    const a = stock.take('ep-a')!;
    // one out, one ready: the one out counts, nothing is made behind the hand-out
    await new Promise((r) => setTimeout(r, 20));
    expect(engine.created).toHaveLength(2);
    expect(stock.stats()).toMatchObject({ size: 2, ready: 1, out: 1 });
    expect(stock.wantsBack()).toBe(true);
    expect(stock.giveBack('ep-a')).toBe(true);
    expect(stock.stats()).toMatchObject({ ready: 2, out: 0 });
    expect(stock.keyTakenBy('ep-a')).toBeUndefined();
    expect(stock.holds(a.key)).toBe(true);
    expect(stock.envIdsOf([a.key])).toEqual([]);
    // a hundred episodes one after the other, on the same two networks
    for (let i = 0; i < 100; i++) {
      const got = stock.take(`ep-${i}`)!;
      expect(engine.exists.has(got.key)).toBe(true);
      expect(stock.giveBack(`ep-${i}`)).toBe(true);
    }
    expect(engine.created).toHaveLength(2);
    expect(engine.removed).toEqual([]);
    expect(stock.stats()).toMatchObject({ size: 2, ready: 2, made: 2, taken: 101, recycled: 101, missed: 0 });
    await stock.close();
    expect(engine.removed.sort()).toEqual([...engine.created].sort());
  });

  it('recycling: never two episodes on one network; one not given back is replaced; a full or closed stock takes none back', async () => {
    const engine = fakeEngine();
    const stock = stockOver(engine, 2, { recycle: true });
    stock.start();
    await waitFor(() => stock.ready === 2, 5000, 'the stock full');
    const a = stock.take('ep-a')!;
    const b = stock.take('ep-b')!;
    expect(a.key).not.toBe(b.key);
    // both out: the stock is empty and makes nothing (they count); a third deploy makes its own
    expect(stock.take('ep-c')).toBeNull();
    await new Promise((r) => setTimeout(r, 20));
    expect(engine.created).toHaveLength(2);
    // ep-a's network was not found empty: removed by its episode and forgotten; the stock makes a fresh one
    stock.forget('ep-a');
    await waitFor(() => stock.ready === 1, 5000, 'a replacement made');
    expect(engine.created).toHaveLength(3);
    expect(stock.giveBack('ep-a')).toBe(false);
    // ep-b's comes back: the stock full again, so a giveBack past it is refused
    expect(stock.giveBack('ep-b')).toBe(true);
    expect(stock.ready).toBe(2);
    const c = stock.take('ep-c2')!;
    expect(stock.wantsBack()).toBe(true);
    expect(stock.giveBack('nobody')).toBe(false);
    await stock.close();
    expect(stock.wantsBack()).toBe(false);
    expect(stock.giveBack('ep-c2')).toBe(false);
    expect(stock.keyTakenBy('ep-c2')).toBe(c.key);
  });

  it('without recycling, nothing is taken back', async () => {
    const engine = fakeEngine();
    const stock = stockOver(engine, 1);
    stock.start();
    await waitFor(() => stock.ready === 1, 5000, 'the stock full');
    stock.take('ep-a');
    expect(stock.wantsBack()).toBe(false);
    expect(stock.giveBack('ep-a')).toBe(false);
    await stock.close();
  });

  it('counts a hand-out that found the stock empty', async () => {
    const engine = fakeEngine();
    const release = engine.hold();
    const stock = stockOver(engine, 1);
    stock.start();
    expect(stock.take('ep')).toBeNull();
    expect(stock.stats()).toMatchObject({ ready: 0, making: 1, missed: 1 });
    release();
    await waitFor(() => stock.ready === 1, 5000, 'the stock full');
    await stock.close();
  });

  it('pauses after a failed creation, then fills again', async () => {
    const engine = fakeEngine();
    engine.failNext(2);
    const warnings: object[] = [];
    const stock = new NetworkStock<{ id: string }>({
      size: 2,
      what: 'network',
      log: { ...silentLogger, warn: (o) => warnings.push(o) },
      create: engine.create,
      remove: engine.remove,
      backoffBaseMs: 30,
    });
    stock.start();
    await waitFor(() => stock.ready === 2, 5000, 'the stock full after the failures');
    expect(warnings).toHaveLength(2);
    // doubling pauses: the second failure waited twice the first
    expect(warnings.map((w) => (w as { pause_ms: number }).pause_ms)).toEqual([30, 60]);
    expect(engine.created).toHaveLength(2);
    await stock.close();
  });

  it('close removes every ready network and one still being made, and makes no more', async () => {
    const engine = fakeEngine();
    const stock = stockOver(engine, 2);
    stock.start();
    await waitFor(() => stock.ready === 2, 5000, 'the stock full');
    const release = engine.hold();
    stock.take('ep');
    // the refills now wait on the engine
    await waitFor(() => stock.stats().making === 1, 5000, 'a refill in flight');
    const closing = stock.close();
    release();
    await closing;
    const taken = engine.created[0]!;
    expect(engine.exists).toEqual(new Set([taken]));
    const made = engine.created.length;
    expect(stock.take('ep')).toBeNull();
    await new Promise((r) => setTimeout(r, 20));
    expect(engine.created).toHaveLength(made);
    expect(stock.held).toBe(0);
  });

  it('size 0 is off: nothing made, nothing missed', async () => {
    const engine = fakeEngine();
    const stock = stockOver(engine, 0);
    stock.start();
    expect(stock.take('ep')).toBeNull();
    await new Promise((r) => setTimeout(r, 20));
    expect(engine.created).toEqual([]);
    expect(stock.stats().missed).toBe(0);
    await stock.close();
  });

  it("in the server's turns (refill turns of --max-concurrent-deploys), each refill waits while a reset waits", async () => {
    const engine = fakeEngine();
    const stock = stockOver(engine, 2);
    const deploys = new DeployLimiter({ limit: 1 });
    // a reset deploying, and another waiting for its turn
    let endFirst!: () => void;
    const first = deploys.run(() => new Promise<void>((r) => (endFirst = r)), { priority: 'reset' });
    let secondRan = false;
    let endSecond!: () => void;
    const second = deploys.run(
      () =>
        new Promise<void>((r) => {
          secondRan = true;
          endSecond = r;
        }),
      { priority: 'reset' },
    );
    stock.start((fn, signal) => deploys.run(fn, { priority: 'refill', signal }));
    await new Promise((r) => setTimeout(r, 20));
    expect(engine.created).toEqual([]);
    // waiting for a turn is nothing on the engine: not held, not counted as making
    expect(stock.held).toBe(0);
    endFirst();
    await first;
    // the freed turn went to the waiting reset, not to the refill queued before it ended
    await waitFor(() => secondRan, 5000, 'the second reset ran');
    expect(engine.created).toEqual([]);
    endSecond();
    await second;
    await waitFor(() => stock.ready === 2, 5000, 'the stock full once no reset waits');
    expect(deploys.peak).toBe(1);
    await stock.close();
  });

  it('closed while a refill waits for its turn: that refill makes nothing and is no failure', async () => {
    const engine = fakeEngine();
    const logged: string[] = [];
    const log = { ...silentLogger, warn: (_o: object, msg?: string) => void logged.push(msg ?? '') };
    const stock = new NetworkStock<{ id: string }>({ size: 1, what: 'network', log, create: engine.create, remove: engine.remove });
    const deploys = new DeployLimiter({ limit: 1 });
    let end!: () => void;
    const busy = deploys.run(() => new Promise<void>((r) => (end = r)), { priority: 'reset' });
    stock.start((fn, signal) => deploys.run(fn, { priority: 'refill', signal }));
    await new Promise((r) => setTimeout(r, 20));
    await stock.close();
    end();
    await busy;
    await new Promise((r) => setTimeout(r, 20));
    expect(engine.created).toEqual([]);
    expect(logged).toEqual([]);
    expect(deploys.waiting).toBe(0);
  });

  it('refuses a size that is not a whole number', () => {
    const engine = fakeEngine();
    expect(() => stockOver(engine, -1)).toThrow(/whole number/);
    expect(() => stockOver(engine, 1.5)).toThrow(/whole number/);
  });
});
