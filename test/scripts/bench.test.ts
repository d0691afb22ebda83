/**
 * The bench's own arithmetic and loads (scripts/bench/), which every figure it reports rests on:
 * the nearest-rank percentile, the burst summary, the CDF chart, and the sustained and burst loops.
 */
import { describe, expect, it } from 'vitest';
import { cdfSvg } from '../../scripts/bench/charts.js';
import { benchContext } from '../../scripts/bench/context.js';
import { burst, sustained } from '../../scripts/bench/load.js';
import { statsMemoryBytes } from '../../scripts/bench/engine.js';
import { percentile, summarizeBurst } from '../../scripts/bench/stats.js';

const ctx = { ...benchContext('unused'), progress: () => undefined };

describe('percentile', () => {
  it('is the nearest rank, whatever the order of its input, and leaves the input as it was', () => {
    const xs = Array.from({ length: 100 }, (_, i) => 100 - i);
    expect(percentile(xs, 50)).toBe(50);
    expect(percentile(xs, 95)).toBe(95);
    expect(percentile(xs, 100)).toBe(100);
    expect(percentile(xs, 0)).toBe(1);
    expect(percentile([3, 1, 4, 2], 50)).toBe(2);
    expect(percentile([3, 1, 4, 2], 51)).toBe(3);
    expect(percentile([7], 95)).toBe(7);
    expect(xs[0]).toBe(100);
  });

  it('is NaN for no values', () => {
    expect(percentile([], 50)).toBeNaN();
  });
});

describe('summarizeBurst', () => {
  it('reports seconds: p50, p95, max and when the last episode started', () => {
    const resetMs = [1200, 300, 2500, 800];
    expect(summarizeBurst(resetMs, 2600, 1)).toEqual({ resetMs, p50_s: 0.8, p95_s: 2.5, max_s: 2.5, last_started_s: 2.6, pooled: 1 });
  });
});

describe('cdfSvg', () => {
  it('draws one rising step line per series and names each with its p50 and p95', () => {
    const svg = cdfSvg('Reset latency', [
      { name: 'bare', color: '#888', ms: [900, 100, 400] },
      { name: 'warm', color: '#2471a3', ms: [20, 30] },
    ]);
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    expect(svg).toContain('>Reset latency</text>');
    const lines = [...svg.matchAll(/<polyline [^>]*points="([^"]+)"/g)].map((m) => m[1]!.split(' ').map((p) => p.split(',').map(Number) as [number, number]));
    // the series' start at 0 and a point per value
    expect(lines.map((l) => l.length)).toEqual([4, 3]);
    for (const l of lines) {
      for (let i = 1; i < l.length; i++) {
        expect(l[i]![0]).toBeGreaterThanOrEqual(l[i - 1]![0]);
        // SVG's y grows downwards: a CDF goes up
        expect(l[i]![1]).toBeLessThan(l[i - 1]![1]);
      }
    }
    expect(svg).toContain('bare (p50 0.40 s, p95 0.90 s)');
    expect(svg).toContain('warm (p50 0.02 s, p95 0.03 s)');
  });
});

describe('the bench loads', () => {
  it('sustained: runs each episode number once, never more than the concurrency at a time', async () => {
    const seen: number[] = [];
    let live = 0;
    let peak = 0;
    const rate = await sustained(ctx, 'test', { episodes: 23, concurrency: 4 }, async (k) => {
      live++;
      peak = Math.max(peak, live);
      await new Promise((r) => setImmediate(r));
      seen.push(k);
      live--;
    });
    expect(seen.sort((a, b) => a - b)).toEqual(Array.from({ length: 23 }, (_, i) => i));
    expect(peak).toBe(4);
    expect(rate.perS).toBeCloseTo(23 / rate.wallS);
  });

  it('burst: starts every run before any has finished, and keeps their order', async () => {
    let live = 0;
    let peak = 0;
    const { results } = await burst(ctx, 'test', 9, async () => {
      const mine = ++live;
      peak = Math.max(peak, live);
      await new Promise((r) => setImmediate(r));
      return mine;
    });
    expect(peak).toBe(9);
    expect(results).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it('sustained: a failing episode fails the run', async () => {
    await expect(
      sustained(ctx, 'test', { episodes: 5, concurrency: 2 }, async (k) => {
        if (k === 3) throw new Error('episode 3 failed');
      }),
    ).rejects.toThrow('episode 3 failed');
  });
});

describe('the sustained worker slots', () => {
  it('gives each run a slot below the concurrency that no other run holds at the same time', async () => {
    const busy = new Set<number>();
    const slots = new Set<number>();
    await sustained(ctx, 'test', { episodes: 40, concurrency: 5 }, async (_k, slot) => {
      expect(slot).toBeGreaterThanOrEqual(0);
      expect(slot).toBeLessThan(5);
      expect(busy.has(slot)).toBe(false);
      busy.add(slot);
      slots.add(slot);
      await new Promise((r) => setImmediate(r));
      busy.delete(slot);
    });
    expect([...slots].sort()).toEqual([0, 1, 2, 3, 4]);
  });
});

describe("docker stats' memory figure", () => {
  it('is usage less the inactive file cache, on cgroup v1 and v2 alike', () => {
    expect(statsMemoryBytes({ memory_stats: { usage: 50_000_000, stats: { total_inactive_file: 8_000_000, inactive_file: 1 } } })).toBe(42_000_000);
    expect(statsMemoryBytes({ memory_stats: { usage: 30_000_000, stats: { inactive_file: 5_000_000 } } })).toBe(25_000_000);
    expect(statsMemoryBytes({ memory_stats: { usage: 1000 } })).toBe(1000);
    // a container that stopped meanwhile answers with no memory figures
    expect(statsMemoryBytes({})).toBe(0);
  });
});
