/**
 * The storage watch (src/sandbox/engine/storage-watch.ts) against a fake engine: an env's layer is
 * looked at until it passes its bound, then the env is killed once and the why is kept for the
 * diagnosis; small bounds are looked at often, large ones at the interval; a look that costs the
 * engine much pushes the next one back; a forgotten or gone env is no longer looked at.
 * test/security/lockdown-served.docker.test.ts proves it on the engine, through an episode.
 */
import type Dockerode from 'dockerode';
import { describe, expect, it } from 'vitest';
import { StorageWatch, type StorageWatchSettings } from '../../src/sandbox/engine/storage-watch.js';
import { silentLogger } from '../../src/sandbox/engine/logger.js';

const MB = 1024 * 1024;
const settings: StorageWatchSettings = { firstLookMs: 5, intervalMs: 200, nearMs: 5, maxIntervalMs: 1000, costFactor: 20, writeBytesPerMs: MB };

/** an engine whose container's layer holds `size()` bytes; each look takes `costMs` */
function fakeEngine(size: () => number, opts: { costMs?: number; gone?: () => boolean } = {}) {
  const looks: number[] = [];
  const kills: string[] = [];
  const docker = {
    getContainer: (id: string) => ({
      inspect: async (o: { size?: boolean }) => {
        looks.push(performance.now());
        if (opts.costMs) await new Promise((r) => setTimeout(r, opts.costMs));
        if (opts.gone?.()) throw Object.assign(new Error('no such container'), { statusCode: 404 });
        return { SizeRw: o?.size ? size() : undefined, State: { Running: kills.length === 0 } };
      },
      kill: async () => {
        kills.push(id);
      },
    }),
  } as unknown as Dockerode;
  return { docker, looks, kills };
}

const until = async (cond: () => boolean, ms = 3000) => {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
};

describe('the storage watch', () => {
  it('kills an env past its bound once, and keeps why for its diagnosis', async () => {
    let bytes = 0;
    const e = fakeEngine(() => (bytes += 3 * MB));
    const w = new StorageWatch(e.docker, silentLogger, settings);
    w.watch('ep', 'c1', 16);
    await until(() => e.kills.length > 0);
    await new Promise((r) => setTimeout(r, 50));
    expect(e.kills).toEqual(['c1']);
    expect(w.exceeded('c1')).toMatch(/^the env wrote 18 MB to its container's writable layer, past its storage_mb \(16 MB\), and was stopped$/);
    expect(w.exceeded('other')).toBeNull();
    w.close();
  });

  it('looks often at a small bound, at the interval at a large one, and later when a look costs the engine much', async () => {
    const small = fakeEngine(() => 0);
    const ws = new StorageWatch(small.docker, silentLogger, settings);
    ws.watch('a', 'c', 1);
    const large = fakeEngine(() => 0);
    const wl = new StorageWatch(large.docker, silentLogger, settings);
    wl.watch('b', 'c', 10_000);
    const costly = fakeEngine(() => 0, { costMs: 20 });
    const wc = new StorageWatch(costly.docker, silentLogger, settings);
    wc.watch('c', 'c', 1);
    await new Promise((r) => setTimeout(r, 700));
    for (const w of [ws, wl, wc]) w.close();
    // 1 MB at 1 MB/ms: the nearMs floor; 10 GB: the interval; a 20 ms look: 400 ms apart
    expect(small.looks.length).toBeGreaterThan(20);
    expect(large.looks.length).toBeLessThanOrEqual(5);
    expect(costly.looks.length).toBeLessThanOrEqual(3);
    expect(small.kills).toEqual([]);
  });

  it('a forgotten env, and a container gone, are looked at no more', async () => {
    const e = fakeEngine(() => 0);
    const w = new StorageWatch(e.docker, silentLogger, settings);
    w.watch('ep', 'c', 1);
    await until(() => e.looks.length >= 2);
    w.forget('ep');
    const n = e.looks.length;
    await new Promise((r) => setTimeout(r, 100));
    expect(e.looks.length).toBeLessThanOrEqual(n + 1);
    let gone = false;
    const g = fakeEngine(() => 0, { gone: () => gone });
    const w2 = new StorageWatch(g.docker, silentLogger, settings);
    w2.watch('ep2', 'c2', 1);
    await until(() => g.looks.length >= 2);
    gone = true;
    await new Promise((r) => setTimeout(r, 50));
    const m = g.looks.length;
    await new Promise((r) => setTimeout(r, 100));
    expect(g.looks.length).toBe(m);
    w.close();
    w2.close();
  });
});
