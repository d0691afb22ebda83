/**
 * The committed bundle: its rows, splits and manifest, and on every eval task the stored optimum
 * against the env's own grading (optimal exactly 1.0, idle exactly 0.2).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ARCHETYPES, toInt } from '../../bundles/gridsim-v1/envs/gridsim/src/battery.js';
import { Episode } from '../../bundles/gridsim-v1/envs/gridsim/src/episode.js';
import { greedySchedule } from '../../bundles/gridsim-v1/envs/gridsim/src/greedy.js';
import { optimize } from '../../bundles/gridsim-v1/envs/gridsim/src/optimum.js';
import { simulate } from '../../bundles/gridsim-v1/envs/gridsim/src/physics.js';
import { firstPrompt, parseTaskData, priceCapOf, PRICE_FLOOR, seasonOf, SYSTEM_PROMPT, type TaskData } from '../../bundles/gridsim-v1/envs/gridsim/src/task.js';
import { TOOLS } from '../../bundles/gridsim-v1/envs/gridsim/src/tools.js';
import { POINTS } from '../../scripts/gridsim/prices.js';

const DIR = join(import.meta.dirname, '../../bundles/gridsim-v1');

interface Row {
  task_id: string;
  toolset: string;
  system_prompt: string;
  turns: string[];
  data: TaskData;
  golden: { tool: string; arguments: Record<string, unknown> }[];
  meta: Record<string, unknown>;
  max_turns?: number;
}

function rows(split: string): Row[] {
  return readFileSync(join(DIR, `tasks/${split}.jsonl`), 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Row);
}

let train: Row[];
let evalRows: Row[];
let wiring: Row[];
beforeAll(() => {
  train = rows('train');
  evalRows = rows('eval');
  wiring = rows('wiring');
});

describe('bundle.json', () => {
  it('declares the splits, the env and the toolset of the brief', () => {
    const m = JSON.parse(readFileSync(join(DIR, 'bundle.json'), 'utf8')) as Record<string, unknown>;
    expect(m).toMatchObject({
      name: 'gridsim-v1',
      version: '1.0.0',
      default_split: 'train',
      splits: { train: 'tasks/train.jsonl', eval: 'tasks/eval.jsonl', wiring: 'tasks/wiring.jsonl' },
      envs: {
        gridsim: { build: 'envs/gridsim', port: 8000, ready_path: '/health', deploy_timeout_s: 60, resources: { memory_mb: 256, cpus: 0.5, pids: 128 } },
      },
      max_turns: 4,
      reward: 'mean',
    });
    expect((m.toolsets as Record<string, unknown>).gridsim).toEqual({ env: 'gridsim', tools: JSON.parse(JSON.stringify(TOOLS)) });
    expect(TOOLS.map((t) => t.name)).toEqual(['get_situation', 'check_schedule', 'submit_schedule']);
  });
  it('has a README whose first line is one sentence', () => {
    const first = readFileSync(join(DIR, 'README.md'), 'utf8').split('\n')[0] ?? '';
    expect(first).toMatch(/^GridSim v1: [^\n]+\.$/);
    expect(first.split('. ')).toHaveLength(1);
  });
});

describe('task rows', () => {
  it('have the sizes of the brief and unique, well-formed ids', () => {
    expect(train).toHaveLength(2000);
    expect(evalRows).toHaveLength(200);
    expect(wiring).toHaveLength(4);
    const all = [...train, ...evalRows, ...wiring];
    expect(new Set(all.map((r) => r.task_id)).size).toBe(all.length);
    for (const r of all) {
      expect(r.task_id).toBe(`dam-v1-${r.data.date}-${r.data.point}-${r.data.battery.id}`);
      expect(r.task_id).toMatch(/^dam-v1-\d{4}-\d{2}-\d{2}-(HB|LZ)_[A-Z]+-[124]h-[a-z]$/);
      expect(Object.keys(r)).toEqual(['task_id', 'toolset', 'system_prompt', 'turns', 'data', 'meta', 'golden']);
      // the golden solution submits the stored optimal schedule
      expect(r.golden).toEqual([{ tool: 'submit_schedule', arguments: { schedule: r.data.optimal_schedule } }]);
      expect(r.toolset).toBe('gridsim');
      expect(r.system_prompt).toBe(SYSTEM_PROMPT);
      expect(r.turns).toHaveLength(1);
      expect(POINTS).toContain(r.data.point);
      expect(r.data.date >= '2014-01-02' && r.data.date <= '2024-12-31').toBe(true);
    }
  });
  it('share no date × settlement point between splits (nor within one)', () => {
    const key = (r: Row) => `${r.data.date}|${r.data.point}`;
    const all = [...train, ...evalRows, ...wiring].map(key);
    expect(new Set(all).size).toBe(all.length);
  });
  it('eval is stratified about evenly over 1h/2h/4h and the seasons', () => {
    const count = (f: (r: Row) => string) => evalRows.reduce<Record<string, number>>((acc, r) => ({ ...acc, [f(r)]: (acc[f(r)] ?? 0) + 1 }), {});
    expect(count((r) => `${r.data.battery.hours}h`)).toEqual({ '1h': 67, '2h': 67, '4h': 66 });
    expect(count((r) => seasonOf(r.data.date))).toEqual({ winter: 50, spring: 50, summer: 50, fall: 50 });
    for (const n of Object.values(count((r) => `${r.data.battery.hours}h ${seasonOf(r.data.date)}`))) expect([16, 17]).toContain(n);
  });
  it('the prompt carries the full situation and the data never shows in it', () => {
    for (const r of [...evalRows, ...wiring]) {
      const task = parseTaskData(r.data);
      const prompt = r.turns[0] as string;
      expect(prompt).toBe(firstPrompt(task));
      expect(prompt).toContain(`Date: ${r.data.date}`);
      expect(prompt).toContain(`Settlement point: ${r.data.point}`);
      expect(prompt).toContain(`Battery ${r.data.battery.id}:`);
      expect(prompt).toMatch(/Sign convention: a_h > 0 charges \(buys\)/);
      expect(prompt.match(/^HE\d\d: -?\d+\.\d\d$/gm)).toHaveLength(24);
      expect(prompt).not.toContain(JSON.stringify(r.data.optimal_schedule));
      expect(prompt).not.toContain(String(r.data.optimum_profit));
    }
  });
  it('every battery is one of the 78 archetypes, and every day clears the profit threshold', () => {
    for (const r of [...train, ...evalRows, ...wiring]) {
      expect(ARCHETYPES.find((b) => b.id === r.data.battery.id)).toEqual(r.data.battery);
      expect(r.data.optimum_profit).toBeGreaterThanOrEqual(0.5 * r.data.battery.energy_mwh);
    }
  });
  it('prices are cents within the floor and the cap of their date, and meta tags match them', () => {
    for (const r of [...train, ...evalRows]) {
      const cap = priceCapOf(r.data.date);
      for (const p of r.data.prices) {
        expect(p).toBeGreaterThanOrEqual(PRICE_FLOOR);
        expect(p).toBeLessThanOrEqual(cap);
        expect(Math.round(p * 100) / 100).toBe(p);
      }
      expect(r.meta.season).toBe(seasonOf(r.data.date));
      expect(r.meta.duration_h).toBe(r.data.battery.hours);
      expect(r.meta.negative_hours).toBe(r.data.prices.filter((p) => p < 0).length);
      expect(r.meta.max_price).toBe(Math.max(...r.data.prices));
      expect(r.meta.spike).toBe(Math.max(...r.data.prices) >= 250);
    }
  });
  it('wiring rows say which schedule the end-to-end test submits', () => {
    expect(wiring.map((r) => r.meta.wiring)).toEqual(['optimal', 'idle', 'infeasible', 'no_submit']);
  });
});

describe('stored optima', () => {
  it('equal the DP optimum on every task, and greedy is feasible and never above it', () => {
    for (const r of [...train, ...evalRows, ...wiring]) {
      const task = parseTaskData(r.data); // also checks that the stored schedule earns the stored optimum
      const opt = optimize(task.b, task.pricesCents);
      expect(opt.profit, r.task_id).toBe(task.optimum);
      const g = simulate(task.b, task.pricesCents, greedySchedule(toInt(r.data.battery), task.pricesCents));
      expect(g.violation, r.task_id).toBeNull();
      expect(g.profit).toBeLessThanOrEqual(task.optimum);
    }
  });
  it('on every eval task: the stored optimal schedule scores exactly 1.0 and all zeros exactly 0.2', () => {
    for (const r of evalRows) {
      const task = parseTaskData(r.data);
      const best = new Episode(r.task_id, task).call('submit_schedule', { schedule: r.data.optimal_schedule });
      expect(best.scores, r.task_id).toEqual({ schedule: 1 });
      const idle = new Episode(r.task_id, task).call('submit_schedule', { schedule: new Array<number>(24).fill(0) });
      expect(idle.scores, r.task_id).toEqual({ schedule: 0.2 });
    }
  });
});
