/**
 * The baseline figures, recomputed from the committed task files: the targets of the brief, and
 * the README quoting exactly what scripts/gridsim/baseline.ts prints.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { readRows } from '../../scripts/gridsim/baseline.js';
import { baseline, priceStats, type Baseline, type PriceStats } from '../../scripts/gridsim/stats.js';

const ROOT = join(import.meta.dirname, '../..');
const BUNDLE = join(ROOT, 'bundles/gridsim-v1');

let b: Baseline;
let p: PriceStats;
beforeAll(() => {
  const evalRows = readRows(join(BUNDLE, 'tasks/eval.jsonl'));
  const train = readRows(join(BUNDLE, 'tasks/train.jsonl'));
  b = baseline(evalRows);
  p = priceStats([...train, ...evalRows]);
});

describe('GridSim baseline on eval', () => {
  it('greedy mean is 0.76 ± 0.02, with 4-hour batteries the lowest', () => {
    expect(b.days).toBe(200);
    expect(Math.abs(b.greedy - 0.76)).toBeLessThanOrEqual(0.02);
    const d = b.greedyByDuration;
    expect(Object.keys(d)).toEqual(['1h', '2h', '4h']);
    expect(d['4h']?.mean).toBeLessThan(d['1h']?.mean ?? 0);
    expect(d['4h']?.mean).toBeLessThan(d['2h']?.mean ?? 0);
  });
  it('idle is exactly 0.2 and the optimum exactly 1.0', () => {
    expect(b.idle).toBe(0.2);
    expect(b.optimum).toBe(1);
  });
  it('greedy loses money on some days but not most', () => {
    expect(b.greedyLosingShare).toBeGreaterThan(0);
    expect(b.greedyLosingShare).toBeLessThan(0.25);
  });
});

describe('generated prices look like the market', () => {
  it('around-the-clock mean $25–45, 1–2 % negative hours, rare spikes of hundreds to thousands', () => {
    expect(p.mean).toBeGreaterThanOrEqual(25);
    expect(p.mean).toBeLessThanOrEqual(45);
    expect(p.negativeShare).toBeGreaterThanOrEqual(0.01);
    expect(p.negativeShare).toBeLessThanOrEqual(0.02);
    expect(p.spikeDayShare).toBeGreaterThan(0);
    expect(p.spikeDayShare).toBeLessThan(0.06);
    expect(p.max).toBeGreaterThanOrEqual(1000);
    expect(p.p99).toBeLessThan(500);
    expect(p.min).toBeGreaterThanOrEqual(-250);
  });
});

describe('scripts/gridsim/baseline.ts', () => {
  it('prints the figures the README quotes', () => {
    const printed = execFileSync(process.execPath, [join(ROOT, 'node_modules/tsx/dist/cli.mjs'), join(ROOT, 'scripts/gridsim/baseline.ts')], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(printed).toMatch(/^eval split: 200 days\ngreedy mean score: +0\.7\d{3}\n/);
    const readme = readFileSync(join(BUNDLE, 'README.md'), 'utf8');
    expect(readme).toContain('```\n' + printed + '```');
  });
});
