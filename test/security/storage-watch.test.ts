/**
 * The storage watch (src/sandbox/engine/storage-watch.ts) against a fake engine: an env's layer is
 * looked at until it passes its bound, then the env is killed once and the why is kept for the
 * diagnosis (naming the server's default when the bound is one); small bounds are looked at often,
 * large ones at the interval; a look that costs the engine much pushes the next one back; a
 * forgotten or gone env is no longer looked at. Its file bound: the layer's entries are counted
 * only when a size look took long enough for the layer to hold the bound, so a layer of few
 * entries, or of many that do not grow, is not counted again and again; an env past the bound is
 * stopped with its own message; counts run one at a time per engine, spaced by their cost, and
 * never hold the size looks; the count reads the engine's streamed answer whole, split anywhere.
 * test/security/lockdown-served.docker.test.ts and default-bounds.docker.test.ts prove it on the
 * engine, through episodes.
 */
import { Readable } from 'node:stream';
import type Dockerode from 'dockerode';
import { describe, expect, it } from 'vitest';
import { countLayerEntries, StorageWatch, type StorageWatchSettings } from '../../src/sandbox/engine/storage-watch.js';
import { silentLogger } from '../../src/sandbox/engine/logger.js';

const MB = 1024 * 1024;
const settings: StorageWatchSettings = {
  firstLookMs: 5,
  intervalMs: 200,
  nearMs: 5,
  maxIntervalMs: 1000,
  costFactor: 20,
  writeBytesPerMs: MB,
  walkMsPerFile: 0.01,
  filesPerMs: 10,
  countCostFactor: 3,
};
/** for the file bound: looks spaced by little more than their cost, so a test sees many */
const fileSettings: StorageWatchSettings = { ...settings, intervalMs: 50, costFactor: 2 };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** the engine's `/changes` answer for `n` entries, in chunks of `chunk` bytes */
function changesAnswer(n: number, chunk = 7): Readable {
  const json = n === 0 ? 'null\n' : JSON.stringify(Array.from({ length: n }, (_, i) => ({ Kind: 1, Path: `/app/"Path":${i}` }))) + '\n';
  const parts: Buffer[] = [];
  for (let i = 0; i < json.length; i += chunk) parts.push(Buffer.from(json.slice(i, i + chunk)));
  return Readable.from(parts);
}

interface Layer {
  /** bytes, read at each look */
  size?: () => number;
  /** entries, read at each look and each count */
  entries?: () => number;
  /** how long a size look takes (default 0: at once) */
  lookMs?: () => number;
  /** how long a count takes */
  countMs?: number;
  /** the container is gone, as a look or a count finds */
  gone?: (by: 'look' | 'count') => boolean;
}

/** an engine whose containers' layers are `layers[id]` */
/**
 * `clock`: the engine's time is virtual, advanced by what each look and count takes instead of
 * slept (a loaded machine's own delays then add nothing to what the watch measures)
 */
function fakeEngine(layers: Record<string, Layer>, clock?: { advance(ms: number): void }) {
  const looks: { id: string; at: number }[] = [];
  const counts: { id: string; start: number; end: number; entries: number }[] = [];
  const kills: string[] = [];
  const docker = {
    getContainer: (id: string) => ({
      inspect: async (o: { size?: boolean }) => {
        const l = layers[id]!;
        looks.push({ id, at: performance.now() });
        const ms = l.lookMs?.() ?? 0;
        if (clock) clock.advance(ms);
        else if (ms) await sleep(ms);
        if (l.gone?.('look')) throw Object.assign(new Error('no such container'), { statusCode: 404 });
        return { SizeRw: o?.size ? (l.size?.() ?? 0) : undefined, State: { Running: !kills.includes(id) } };
      },
      kill: async () => {
        kills.push(id);
      },
    }),
    modem: {
      dial: (opts: { path: string; isStream?: boolean }, cb: (err: unknown, s?: unknown) => void) => {
        const id = decodeURIComponent(/^\/containers\/([^/]+)\/changes$/.exec(opts.path)![1]!);
        const l = layers[id]!;
        const start = performance.now();
        void sleep(l.countMs ?? 0).then(() => {
          if (l.gone?.('count')) return cb(Object.assign(new Error('no such container'), { statusCode: 404 }));
          const n = l.entries?.() ?? 0;
          counts.push({ id, start, end: performance.now(), entries: n });
          cb(null, changesAnswer(n, 4096));
        });
      },
    },
  } as unknown as Dockerode;
  return { docker, looks, counts, kills };
}

const until = async (cond: () => boolean, ms = 3000) => {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error('timed out');
    await sleep(5);
  }
};

const storage = (mb: number) => ({ storageMb: mb, maxFiles: null });
const files = (max: number) => ({ storageMb: null, maxFiles: max });

describe('the storage watch', () => {
  it('kills an env past its bound once, and keeps why for its diagnosis', async () => {
    let bytes = 0;
    const e = fakeEngine({ c1: { size: () => (bytes += 3 * MB) } });
    const w = new StorageWatch(e.docker, silentLogger, settings);
    w.watch('ep', 'c1', storage(16));
    await until(() => e.kills.length > 0);
    await sleep(50);
    expect(e.kills).toEqual(['c1']);
    expect(w.exceeded('c1')).toMatch(/^the env wrote 18 MB to its container's writable layer, past its storage_mb \(16 MB\), and was stopped$/);
    expect(w.exceeded('other')).toBeNull();
    w.close();
  });

  it("names the server's default when the bound is one, its bundle giving none", async () => {
    let bytes = 0;
    const e = fakeEngine({ c1: { size: () => (bytes += 3 * MB) } });
    const w = new StorageWatch(e.docker, silentLogger, settings);
    w.watch('ep', 'c1', { storageMb: 16, maxFiles: null, defaulted: ['storageMb'] });
    await until(() => e.kills.length > 0);
    expect(w.exceeded('c1')).toBe(
      "the env wrote 18 MB to its container's writable layer, past the server's default storage bound (16 MB, --default-storage-mb; its bundle gives no storage_mb), and was stopped",
    );
    w.close();
  });

  it('looks often at a small bound, at the interval at a large one, and later when a look costs the engine much', async () => {
    const small = fakeEngine({ c: {} });
    const ws = new StorageWatch(small.docker, silentLogger, settings);
    ws.watch('a', 'c', storage(1));
    const large = fakeEngine({ c: {} });
    const wl = new StorageWatch(large.docker, silentLogger, settings);
    wl.watch('b', 'c', storage(10_000));
    const costly = fakeEngine({ c: { lookMs: () => 20 } });
    const wc = new StorageWatch(costly.docker, silentLogger, settings);
    wc.watch('c', 'c', storage(1));
    await sleep(700);
    for (const w of [ws, wl, wc]) w.close();
    // 1 MB at 1 MB/ms: the nearMs floor; 10 GB: the interval; a 20 ms look: 400 ms apart
    expect(small.looks.length).toBeGreaterThan(20);
    expect(large.looks.length).toBeLessThanOrEqual(5);
    expect(costly.looks.length).toBeLessThanOrEqual(3);
    expect(small.kills).toEqual([]);
  });

  it('a forgotten env, and a container gone, are looked at no more', async () => {
    const e = fakeEngine({ c: {} });
    const w = new StorageWatch(e.docker, silentLogger, settings);
    w.watch('ep', 'c', storage(1));
    await until(() => e.looks.length >= 2);
    w.forget('ep');
    const n = e.looks.length;
    await sleep(100);
    expect(e.looks.length).toBeLessThanOrEqual(n + 1);
    let gone = false;
    const g = fakeEngine({ c2: { gone: () => gone } });
    const w2 = new StorageWatch(g.docker, silentLogger, settings);
    w2.watch('ep2', 'c2', storage(1));
    await until(() => g.looks.length >= 2);
    gone = true;
    await sleep(50);
    const m = g.looks.length;
    await sleep(100);
    expect(g.looks.length).toBe(m);
    w.close();
    w2.close();
  });

  it('watches nothing when the env has no bound to watch', async () => {
    const e = fakeEngine({ c: {} });
    const w = new StorageWatch(e.docker, silentLogger, settings);
    w.watch('ep', 'c', { storageMb: null, maxFiles: null });
    await sleep(60);
    expect(e.looks).toEqual([]);
    w.close();
  });
});

describe("the storage watch's file bound", () => {
  it('counts the entries only once a look took long enough to walk the bound, and stops an env past it with its own message', async () => {
    let entries = 0;
    let virtual = 0;
    // 200 entries more at each look; the engine walks one in 0.02 ms (twice the assumed floor)
    const e = fakeEngine({ c: { entries: () => entries, lookMs: () => (entries += 200) * 0.02 } }, { advance: (ms) => (virtual += ms) });
    const w = new StorageWatch(e.docker, silentLogger, fileSettings, () => virtual);
    w.watch('ep', 'c', files(4000));
    await until(() => e.kills.length > 0, 10_000);
    w.close();
    expect(e.kills).toEqual(['c']);
    // first counted once a look could have walked 4,000 at the floor (2,000 at 0.02 ms each), not before
    expect(e.counts[0]!.entries).toBeGreaterThanOrEqual(2000);
    expect(e.counts.length).toBeLessThan(e.looks.length / 2);
    const last = e.counts.at(-1)!.entries;
    expect(last).toBeGreaterThan(4000);
    expect(w.exceeded('c')).toBe(
      `the env made ${last.toLocaleString('en-US')} entries (files and directories created, changed or deleted) in its container's writable layer, past its max_files (4,000), and was stopped`,
    );
  });

  it("names the server's default file bound when it is one", async () => {
    const e = fakeEngine({ c: { entries: () => 6000, lookMs: () => 60 } });
    const w = new StorageWatch(e.docker, silentLogger, fileSettings);
    w.watch('ep', 'c', { storageMb: 2048, maxFiles: 5000, defaulted: ['storageMb', 'maxFiles'] });
    await until(() => e.kills.length > 0);
    w.close();
    expect(w.exceeded('c')).toBe(
      "the env made 6,000 entries (files and directories created, changed or deleted) in its container's writable layer, past the server's default file bound (5,000, --default-max-files; its bundle gives no max_files), and was stopped",
    );
  });

  it('never counts a layer whose looks are cheap, and counts a large one that does not grow once', async () => {
    // the looks' times on clocks of their own, advanced by exactly what each look takes: on the
    // wall clock a loaded machine's timers make a steady look seem to grow (a 60 ms look read as
    // 200 ms: 14,000 entries more, at the floor), and the watch rightly counts again
    let fewClock = 0;
    const few = fakeEngine({ c: { entries: () => 10, lookMs: () => 1 } }, { advance: (ms) => (fewClock += ms) });
    const wf = new StorageWatch(few.docker, silentLogger, fileSettings, () => fewClock);
    wf.watch('a', 'c', files(100_000));
    // 3,000 entries, 60 ms a look: they may be 6,000, so counted; then the looks do not grow
    let stableClock = 0;
    const stable = fakeEngine({ c: { entries: () => 3000, lookMs: () => 60 } }, { advance: (ms) => (stableClock += ms) });
    const ws = new StorageWatch(stable.docker, silentLogger, fileSettings, () => stableClock);
    ws.watch('b', 'c', files(5000));
    await sleep(1500);
    wf.close();
    ws.close();
    expect(few.looks.length).toBeGreaterThan(10);
    expect(few.counts).toEqual([]);
    expect(stable.looks.length).toBeGreaterThan(5);
    expect(stable.counts.length).toBe(1);
    expect(stable.kills).toEqual([]);
  });

  it("counts one at a time on an engine, each no sooner than countCostFactor times the last one's time after it", async () => {
    // each env hovers under its bound and its looks jitter, so it asks for a count at every other look
    let flip = 0;
    const layer = (): Layer => ({ entries: () => 90, lookMs: () => (flip++ % 2 ? 6 : 3), countMs: 20 });
    const e = fakeEngine({ a: layer(), b: layer() });
    const w = new StorageWatch(e.docker, silentLogger, { ...fileSettings, walkMsPerFile: 0.01 });
    w.watch('ea', 'a', files(100));
    w.watch('eb', 'b', files(100));
    await sleep(1200);
    w.close();
    expect(e.counts.length).toBeGreaterThan(3);
    expect(new Set(e.counts.map((c) => c.id))).toEqual(new Set(['a', 'b']));
    for (let i = 1; i < e.counts.length; i++) {
      const before = e.counts[i - 1]!;
      const gap = e.counts[i]!.start - before.end;
      // timers may fire a millisecond early of what performance.now() says
      expect(gap).toBeGreaterThanOrEqual(3 * (before.end - before.start) - 2);
    }
    expect(e.kills).toEqual([]);
  });

  it("a long count does not hold the size looks: the env's bytes stay watched meanwhile", async () => {
    let bytes = 0;
    const e = fakeEngine({ c: { size: () => (bytes += 2 * MB), entries: () => 10, lookMs: () => 60, countMs: 2000 } });
    const w = new StorageWatch(e.docker, silentLogger, fileSettings);
    w.watch('ep', 'c', { storageMb: 8, maxFiles: 100 });
    await until(() => e.kills.length > 0, 1500);
    w.close();
    expect(w.exceeded('c')).toMatch(/^the env wrote \d+ MB to its container's writable layer, past its storage_mb \(8 MB\)/);
    // the count asked for at the first look has not answered yet
    expect(e.counts).toEqual([]);
  });

  it('a count reads the whole streamed answer, split anywhere; an empty layer is 0 entries', async () => {
    for (const n of [0, 1, 7, 1000]) {
      for (const chunk of [1, 3, 7, 64]) {
        const docker = { modem: { dial: (_o: unknown, cb: (e: unknown, s: unknown) => void) => cb(null, changesAnswer(n, chunk)) } } as unknown as Dockerode;
        expect(await countLayerEntries(docker, 'c'), `${n} entries in chunks of ${chunk}`).toBe(n);
      }
    }
  });

  it('an env gone while its entries are counted is looked at no more', async () => {
    let dialled = 0;
    const e = fakeEngine({ c: { entries: () => 10, lookMs: () => 60, countMs: 30, gone: (by) => by === 'count' && ++dialled > 0 } });
    const w = new StorageWatch(e.docker, silentLogger, fileSettings);
    w.watch('ep', 'c', files(100));
    await until(() => dialled > 0);
    await sleep(100);
    const n = e.looks.length;
    await sleep(300);
    expect(e.looks.length).toBe(n);
    expect(dialled).toBe(1);
    expect(e.kills).toEqual([]);
    w.close();
  });
});
