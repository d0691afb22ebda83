/** The synthetic dataset's files: a Harbor task each, a layer of its own over the shared base, its expected sum; the same seed the same files. */
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { syntheticTaskId, taskNumbers, writeSyntheticDataset } from '../../scripts/lib/synthetic-dataset.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const SCRIPT = path.join(ROOT, 'scripts/synthetic-dataset.ts');

describe('the synthetic dataset', () => {
  let tmp: string;
  beforeEach(async () => {
    tmp = await mkdtemp(path.join(tmpdir(), 'openenv-synthetic-unit-'));
  });
  afterEach(async () => {
    await rm(tmp, { recursive: true, force: true });
  });

  it('writes N Harbor tasks, each FROM the base with its own numbers file, the expected sum in its tests', async () => {
    const ids = await writeSyntheticDataset({ count: 3, out: tmp, base: 'openenv-local/debian:bookworm', seed: 7 });
    expect(ids).toEqual(['synth-00000', 'synth-00001', 'synth-00002']);
    expect((await readdir(tmp)).sort()).toEqual(ids);
    const numbers = new Set<string>();
    for (const [i, id] of ids.entries()) {
      const dir = path.join(tmp, id);
      expect(await readFile(path.join(dir, 'environment/Dockerfile'), 'utf8')).toBe(
        'FROM openenv-local/debian:bookworm\nWORKDIR /app\nCOPY numbers.txt /app/numbers.txt\n',
      );
      const text = await readFile(path.join(dir, 'environment/numbers.txt'), 'utf8');
      numbers.add(text);
      const values = text.trim().split('\n').map(Number);
      expect(values).toEqual(taskNumbers(7, i));
      expect(values).toHaveLength(20);
      expect(await readFile(path.join(dir, 'tests/expected.txt'), 'utf8')).toBe(`${values.reduce((a, b) => a + b, 0)}\n`);
      const test = await readFile(path.join(dir, 'tests/test.sh'), 'utf8');
      // the shipped dataset's safe pattern: tests locked, the answer read as nobody, the reward decided here
      expect(test).toContain('chmod 0700 /tests && chmod 0755 /logs/verifier && cd / || exit 1');
      expect(test).toContain('setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs -- head -c 64 /app/answer.txt');
      expect(test).toContain('echo "$reward" > /logs/verifier/reward.txt');
      expect((await stat(path.join(dir, 'tests/test.sh'))).mode & 0o111).not.toBe(0);
      expect((await stat(path.join(dir, 'solution/solve.sh'))).mode & 0o111).not.toBe(0);
      expect(await readFile(path.join(dir, 'task.toml'), 'utf8')).toContain('allow_internet = false');
    }
    // every task a layer of its own
    expect(numbers.size).toBe(3);
  });

  it('the same seed gives the same numbers, another seed others', () => {
    expect(taskNumbers(1, 5)).toEqual(taskNumbers(1, 5));
    expect(taskNumbers(2, 5)).not.toEqual(taskNumbers(1, 5));
    expect(taskNumbers(1, 5).every((n) => Number.isInteger(n) && n >= -999 && n <= 999)).toBe(true);
    expect(syntheticTaskId(42)).toBe('synth-00042');
  });

  it.each([
    [['--count', '0', '--out', 'x'], /--count must be a whole number of at least 1/],
    [['--count', '3'], /--out DIR is required/],
    [['--count', '3', '--out', '.', '--seed', 'x'], /--seed must be a whole number/],
  ])('the script refuses %j (exit 2)', (argv, message) => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', SCRIPT, ...argv], { encoding: 'utf8', cwd: ROOT });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(message);
  });

  it('the script refuses a folder that is not empty', async () => {
    await writeFile(path.join(tmp, 'x'), '');
    const r = spawnSync(process.execPath, ['--import', 'tsx', SCRIPT, '--count', '1', '--out', tmp], { encoding: 'utf8', cwd: ROOT });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(`${tmp} is not empty`);
  });
});
