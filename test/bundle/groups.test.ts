/**
 * Task groups and baselines in bundle.json: each /tasks row carries its groups ({} when the bundle
 * declares none), GET /bundle serves the declaration, and a bad declaration or a task without a
 * group's value is refused at load with its file, line and field.
 */
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadBundle, taskRow } from '../../src/bundle/index.js';
import { http } from '../routes/http.js';
import { FIXTURE_BUNDLE, startProcessServer } from '../support/process-server.js';
import { baseManifest, bundleError, removeTempDirs, row, tempDir, writeBundle } from './helpers.js';

afterAll(removeTempDirs);

const withGroups = (extra: Record<string, unknown>) => ({ ...baseManifest(), ...extra });

describe('task groups', () => {
  it('each row carries its group values as text, read from meta', async () => {
    const dir = writeBundle({
      manifest: withGroups({ groups: { size: 'meta.size', zone: 'meta.where.zone', hard: 'meta.hard' } }),
      tasks: {
        'tasks/train.jsonl': [
          row('a', { meta: { size: 2, where: { zone: 'north' }, hard: true } }),
          row('b', { meta: { size: 4, where: { zone: 's' }, hard: false } }),
        ],
      },
    });
    const b = await loadBundle(dir);
    expect(b.manifest.groups).toEqual({ size: 'meta.size', zone: 'meta.where.zone', hard: 'meta.hard' });
    expect(taskRow(b.byId.get('a')!).groups).toEqual({ size: '2', zone: 'north', hard: 'true' });
    expect(taskRow(b.byId.get('b')!).groups).toEqual({ size: '4', zone: 's', hard: 'false' });
  });

  it('a bundle without groups gives every row groups {} and no baselines', async () => {
    const b = await loadBundle(writeBundle());
    expect(b.manifest.groups).toEqual({});
    expect(b.manifest.baselines).toEqual({});
    expect(taskRow(b.byId.get('t-0')!).groups).toEqual({});
  });

  it.each([
    [
      'a missing value',
      row('a', { meta: { other: 1 } }),
      'tasks/train.jsonl line 1, field "meta.size": bundle.json\'s group "size" reads meta.size: expected a string, number or boolean there, but it is missing',
    ],
    ['an object value', row('a', { meta: { size: { n: 2 } } }), 'expected a string, number or boolean there, but got {"n":2}'],
    ['no meta at all', row('a'), 'but it is missing'],
  ])('refuses a task with %s', async (_name, task, message) => {
    const err = await bundleError(loadBundle(writeBundle({ manifest: withGroups({ groups: { size: 'meta.size' } }), tasks: { 'tasks/train.jsonl': [task] } })));
    expect(err.message).toContain(message);
  });

  it.each([
    [
      'a path into data',
      { groups: { answer: 'data.target' } },
      'bundle.json, field "groups.answer": expected a path into the task\'s meta, such as "meta.point"',
    ],
    ['a bad group name', { groups: { 'my group': 'meta.x' } }, 'group name "my group" must match'],
    [
      'baselines of an undeclared split',
      { baselines: { test: { idle: 0.2 } } },
      'bundle.json, field "baselines.test": expected one of the declared splits (train)',
    ],
    ['a baseline that is not a number', { baselines: { train: { idle: '0.2' } } }, 'bundle.json, field "baselines.train.idle": expected a number, got "0.2"'],
  ])('refuses %s', async (_name, extra, message) => {
    const err = await bundleError(loadBundle(writeBundle({ manifest: withGroups(extra) })));
    expect(err.message).toContain(message);
  });
});

describe('GridSim declares its own', () => {
  it('groups by battery size, settlement point and season, with the README baselines per split', async () => {
    const b = await loadBundle(path.join(process.cwd(), 'bundles', 'gridsim-v1'));
    expect(b.manifest.groups).toEqual({ battery_h: 'meta.duration_h', point: 'meta.point', season: 'meta.season' });
    expect(b.manifest.baselines.eval).toEqual({ idle: 0.2, greedy: 0.7664, optimum: 1 });
    const first = b.splits.train![0]!;
    expect(taskRow(first).groups).toEqual({ battery_h: String(first.meta!.duration_h), point: first.meta!.point, season: first.meta!.season });
    const sizes = new Set(b.splits.eval!.map((t) => t.groups.battery_h));
    expect([...sizes].sort()).toEqual(['1', '2', '4']);
  });
});

describe('on the wire', () => {
  it('GET /bundle serves the declaration and every /tasks row its groups', async () => {
    // the fixture bundle, declaring a group over its rows' meta.kind and a baseline
    const dir = tempDir();
    cpSync(FIXTURE_BUNDLE, dir, { recursive: true });
    const manifest = JSON.parse(readFileSync(path.join(dir, 'bundle.json'), 'utf8'));
    writeFileSync(path.join(dir, 'bundle.json'), JSON.stringify({ ...manifest, groups: { kind: 'meta.kind' }, baselines: { eval: { idle: 0.25 } } }));
    const s = await startProcessServer({}, { bundle: dir });
    try {
      const bundle = (await http(s.url, 'GET', '/bundle')).body;
      expect(bundle.groups).toEqual({ kind: 'meta.kind' });
      expect(bundle.baselines).toEqual({ eval: { idle: 0.25 } });
      const page = (await http(s.url, 'GET', '/tasks?split=train')).body;
      expect(page.tasks.find((t: { task_id: string }) => t.task_id === 'fx-echo-0').groups).toEqual({ kind: 'echo' });
      for (const t of page.tasks) expect(Object.keys(t.groups)).toEqual(['kind']);
      expect((await http(s.url, 'GET', '/tasks/fx-echo-0')).body.groups).toEqual({ kind: 'echo' });
    } finally {
      await s.stop();
    }
  });
});
