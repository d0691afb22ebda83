/**
 * `openenv-bundle import harbor` then `openenv-bundle check`, as a user runs them: the built
 * binary, a child process, on real Docker. The shipped dataset imports and its check plays every
 * task (each oracle at the max, each empty episode at the floor) and says `ok:`; a dataset whose
 * solve.sh does nothing imports as well, and its check exits 1 naming the task.
 */
import { spawnSync } from 'node:child_process';
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeDocker } from '../support/docker.js';
import { BASE_IMAGE_RULE, DATASET, ensureDebianBase } from './helpers.js';

const CLI = path.resolve(import.meta.dirname, '../../dist/cli/openenv-bundle.js');

function run(args: string[]) {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 900_000 });
}

function importDataset(src: string, out: string) {
  const r = run(['import', 'harbor', src, '--out', out, '--base-image', BASE_IMAGE_RULE, '--eval-share', '0.25']);
  expect(r.status, r.stdout + r.stderr).toBe(0);
}

describeDocker('import harbor, then check, as processes', () => {
  let tmp: string;
  beforeAll(async () => {
    ensureDebianBase();
    tmp = await mkdtemp(path.join(tmpdir(), 'harbor-check-'));
  });
  afterAll(async () => {
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('the shipped dataset: every oracle at the max, every empty episode at the floor', () => {
    const out = path.join(tmp, 'harbor-v1');
    importDataset(DATASET, out);
    const r = run(['check', out, '--tasks', 'all']);
    expect(r.status, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain('played 12 task(s) in 36 episode(s): golden at max 12/12, empty at or under the floor 12/12');
    expect(r.stdout).toMatch(/golden solutions: mean reward 1\.000/);
    expect(r.stdout).toMatch(/empty solutions: mean reward 0\.000/);
    expect(r.stdout).toMatch(/^ok: no problem/m);
  }, 900_000);

  it('a solve.sh that does nothing: check exits 1 naming the task', async () => {
    const src = path.join(tmp, 'broken-src');
    for (const task of ['fix-median', 'word-frequency']) await cp(path.join(DATASET, task), path.join(src, task), { recursive: true });
    await writeFile(path.join(src, 'fix-median/solution/solve.sh'), '#!/bin/bash\n# does nothing\nexit 0\n');
    const out = path.join(tmp, 'broken');
    importDataset(src, out);
    const r = run(['check', out, '--tasks', 'all']);
    expect(r.status, r.stdout + r.stderr).toBe(1);
    expect(r.stdout).toMatch(/task fix-median.*the golden solution scored reward = 0, expected its declared max 1/);
    expect(r.stdout).not.toMatch(/task word-frequency/);
  }, 900_000);
});
