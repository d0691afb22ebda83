/**
 * The synthetic dataset for scale, as a user makes and checks it: scripts/synthetic-dataset.ts (a
 * child process) writes 3 Harbor tasks, the built `openenv-bundle import harbor` makes a bundle of
 * them and `openenv-bundle check` plays every task on real Docker: each golden solution at the
 * max, each empty run at the floor. Each task has an image of its own over the shared base; every
 * image the suite made (its bundle's label) is removed after.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { LABELS } from '../../src/sandbox/sandbox.js';
import { describeDocker } from '../support/docker.js';
import { BASE_IMAGE_RULE, ensureDebianBase, LOCAL_DEBIAN_IMAGE } from '../harbor/helpers.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const CLI = path.join(ROOT, 'dist/cli/openenv-bundle.js');
const SCRIPT = path.join(ROOT, 'scripts/synthetic-dataset.ts');

const run = (args: string[]) => spawnSync(process.execPath, args, { encoding: 'utf8', timeout: 900_000, cwd: ROOT });

const imagesOf = (bundle: string) =>
  execFileSync('docker', ['images', '-q', '--filter', `label=${LABELS.bundle}=${bundle}`], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean);

describeDocker('the synthetic dataset: generated, imported, checked', () => {
  const name = `synth-test-${randomBytes(4).toString('hex')}`;
  let tmp: string;

  beforeAll(async () => {
    ensureDebianBase();
    tmp = await mkdtemp(path.join(tmpdir(), 'openenv-synthetic-'));
  });

  afterAll(async () => {
    const ids = [...new Set(imagesOf(name))];
    if (ids.length) execFileSync('docker', ['rmi', '-f', ...ids], { stdio: 'ignore' });
    expect(imagesOf(name)).toEqual([]);
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('3 tasks: each its own image over the shared base; golden 3/3 at the max, empty 3/3 at the floor', () => {
    const src = path.join(tmp, 'dataset');
    const gen = run(['--import', 'tsx', SCRIPT, '--count', '3', '--out', src]);
    expect(gen.status, gen.stdout + gen.stderr).toBe(0);
    expect(gen.stdout).toContain(`wrote 3 Harbor task(s) FROM debian:bookworm into ${src}`);

    const out = path.join(tmp, name);
    const imp = run([CLI, 'import', 'harbor', src, '--out', out, '--base-image', BASE_IMAGE_RULE]);
    expect(imp.status, imp.stdout + imp.stderr).toBe(0);
    expect(imp.stdout).toContain(`imported 3 Harbor task(s) into ${out} (bundle ${name}): train 3`);

    const check = run([CLI, 'check', out, '--tasks', 'all']);
    expect(check.status, check.stdout + check.stderr).toBe(0);
    expect(check.stdout).toContain('played 3 task(s) in 9 episode(s): golden at max 3/3, empty at or under the floor 3/3');
    expect(check.stdout).toMatch(/golden solutions: mean reward 1\.000/);
    expect(check.stdout).toMatch(/empty solutions: mean reward 0\.000/);
    expect(check.stdout).toMatch(/^ok: no problem/m);

    // an image per task, each the shared base and a layer of its own
    const images = imagesOf(name);
    expect(images).toHaveLength(3);
    const base = JSON.parse(
      execFileSync('docker', ['image', 'inspect', '--format', '{{json .RootFS.Layers}}', LOCAL_DEBIAN_IMAGE], { encoding: 'utf8' }),
    ) as string[];
    for (const id of images) {
      const layers = JSON.parse(execFileSync('docker', ['image', 'inspect', '--format', '{{json .RootFS.Layers}}', id], { encoding: 'utf8' })) as string[];
      expect(layers.slice(0, base.length)).toEqual(base);
      expect(layers.length).toBeGreaterThan(base.length);
    }
  }, 900_000);
});
