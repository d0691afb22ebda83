/**
 * The lane queue's promises (src/episodes/capacity/lanes.ts), on random runs of arrivals, grants
 * and departures (a deadline, an abort) for every share K from 1 to 6: FIFO within a lane; a grant
 * out of lane order only when the K−1 before it passed the oldest waiter by; one of every K grants
 * to the oldest waiter; no waiter granted later than K·(A+1) grants after it arrived behind A.
 * Then Admission over it, with real promises: every acquire one outcome, the cap held, FIFO within
 * a lane, and nothing overtaking a waiting reset.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Admission, type Slot } from '../../../src/episodes/capacity/admission.js';
import { LaneQueue } from '../../../src/episodes/capacity/lanes.js';
import { LANES, laneRank, type Lane } from '../../../src/protocol/lanes.js';

interface W {
  id: number;
  lane: Lane;
  /** waiters queued when it arrived */
  olderAtArrival: number;
  /** grants made before it arrived */
  grantsAtArrival: number;
}

const lane = fc.constantFrom(...LANES);
const op = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('push' as const), lane }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('shift' as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('remove' as const), pick: fc.nat() }) },
);

describe('LaneQueue on random runs', () => {
  it('FIFO within a lane, higher lanes first unless the share is due, one of every K grants to the oldest, and no wait past K·(A+1) grants', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), fc.array(op, { maxLength: 300 }), (K, ops) => {
        const q = new LaneQueue<W>(K);
        /** the model: who waits, in arrival order */
        let waiting: W[] = [];
        let grants = 0;
        let nextId = 0;
        /** grants in a row that did not go to the oldest waiter */
        let run = 0;
        for (const o of ops) {
          if (o.kind === 'push') {
            const w = { id: nextId++, lane: o.lane, olderAtArrival: waiting.length, grantsAtArrival: grants };
            q.push(w);
            waiting.push(w);
          } else if (o.kind === 'remove') {
            if (waiting.length === 0) continue;
            const w = waiting[o.pick % waiting.length]!;
            expect(q.remove(w)).toBe(true);
            expect(q.remove(w)).toBe(false);
            waiting = waiting.filter((x) => x !== w);
          } else {
            const got = q.shift();
            if (waiting.length === 0) {
              expect(got).toBeUndefined();
              continue;
            }
            const oldest = waiting[0]!;
            const topLane = Math.min(...waiting.map((w) => laneRank(w.lane)));
            const topHead = waiting.find((w) => laneRank(w.lane) === topLane)!;
            // FIFO within a lane: the oldest of its own lane
            expect(got).toBe(waiting.find((w) => w.lane === got!.lane));
            if (got !== topHead) {
              // out of lane order only for the oldest waiter, and only when the share is due
              expect(got).toBe(oldest);
              expect(run).toBe(K - 1);
            }
            run = got === oldest ? 0 : run + 1;
            // one of every K grants goes to the oldest waiter at its time
            expect(run).toBeLessThan(K);
            grants++;
            waiting = waiting.filter((x) => x !== got);
            // the bound holds for the one granted, and nobody still waiting has passed it
            expect(grants - got!.grantsAtArrival).toBeLessThanOrEqual(K * (got!.olderAtArrival + 1));
            for (const w of waiting) expect(grants - w.grantsAtArrival).toBeLessThan(K * (w.olderAtArrival + 1));
          }
          expect(q.size).toBe(waiting.length);
          for (const l of LANES) expect(q.sizes()[l]).toBe(waiting.filter((w) => w.lane === l).length);
          // a newcomer of the lowest lane waits behind everyone (the Retry-After estimate)
          expect(q.ahead('low')).toBe(waiting.length);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('K = 1 is plain FIFO, whatever the lanes', () => {
    fc.assert(
      fc.property(fc.array(lane, { minLength: 1, maxLength: 50 }), (lanes) => {
        const q = new LaneQueue<{ lane: Lane; i: number }>(1);
        lanes.forEach((l, i) => q.push({ lane: l, i }));
        const out: number[] = [];
        for (let w = q.shift(); w; w = q.shift()) out.push(w.i);
        expect(out).toEqual(lanes.map((_, i) => i));
      }),
    );
  });

  it('the share in numbers (K = 4): 3 high then the oldest normal, again and again, while both lanes wait', () => {
    const q = new LaneQueue<{ lane: Lane; name: string }>(4);
    for (let i = 0; i < 3; i++) q.push({ lane: 'normal', name: `n${i}` });
    for (let i = 0; i < 7; i++) q.push({ lane: 'high', name: `h${i}` });
    const out: string[] = [];
    for (let w = q.shift(); w; w = q.shift()) out.push(w.name);
    expect(out).toEqual(['h0', 'h1', 'h2', 'n0', 'h3', 'h4', 'h5', 'n1', 'h6', 'n2']);
  });

  it('refuses a share that is not a positive integer', () => {
    expect(() => new LaneQueue(0)).toThrow(/positive integer/);
    expect(() => new LaneQueue(1.5)).toThrow(/positive integer/);
  });
});

describe('Admission with lanes on random runs', () => {
  it('each acquire gets one outcome, the cap holds, grants keep FIFO within each lane, and the pool never overtakes a waiter', async () => {
    const step = fc.oneof(
      { weight: 4, arbitrary: fc.record({ kind: fc.constant('acquire' as const), lane, abortable: fc.boolean() }) },
      { weight: 3, arbitrary: fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }) },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('abort' as const), pick: fc.nat() }) },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('tryAcquire' as const) }) },
    );
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 5 }), fc.array(step, { maxLength: 120 }), async (cap, K, steps) => {
        const a = new Admission(cap, 1000, Date.now, K);
        const held: Slot[] = [];
        const outcomes = new Map<number, string[]>();
        const order: { id: number; lane: Lane }[] = [];
        const aborts: { id: number; ac: AbortController }[] = [];
        let id = 0;
        const settle = () => new Promise((r) => setImmediate(r));
        for (const s of steps) {
          if (s.kind === 'acquire') {
            const me = id++;
            const ac = s.abortable ? new AbortController() : undefined;
            if (ac) aborts.push({ id: me, ac });
            outcomes.set(me, []);
            void a.acquire({ timeoutMs: 60_000, lane: s.lane, signal: ac?.signal }).then(
              (slot) => {
                outcomes.get(me)!.push('slot');
                order.push({ id: me, lane: s.lane });
                held.push(slot);
              },
              (e: Error) => outcomes.get(me)!.push(e.name),
            );
          } else if (s.kind === 'release') {
            if (held.length) held.splice(s.pick % held.length, 1)[0]!.release();
          } else if (s.kind === 'abort') {
            if (aborts.length) aborts.splice(s.pick % aborts.length, 1)[0]!.ac.abort();
          } else {
            const slot = a.tryAcquire();
            if (a.waitingCount > 0) expect(slot).toBeNull();
            if (slot) held.push(slot);
          }
          await settle();
          expect(a.activeCount).toBeLessThanOrEqual(cap);
          expect(a.activeCount).toBe(held.length);
          // a slot is free only while nobody waits
          if (a.activeCount < cap) expect(a.waitingCount).toBe(0);
        }
        // FIFO within each lane: granted in the order they asked
        for (const l of LANES) {
          const ids = order.filter((o) => o.lane === l).map((o) => o.id);
          expect(ids).toEqual([...ids].sort((x, y) => x - y));
        }
        a.drain();
        await settle();
        for (const o of outcomes.values()) expect(o).toHaveLength(1);
        for (const slot of held) slot.release();
        expect(a.activeCount).toBe(0);
      }),
      { numRuns: 150 },
    );
  });
});
