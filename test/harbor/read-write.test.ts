/**
 * The import's disk steps (src/authoring/harbor/read.ts, write.ts): a turn's solution read as the
 * map takes it, the images the envs need, and a typed draft written (copies, then files) and
 * put in place.
 */
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { neededImages, readSolutions } from '../../src/authoring/harbor/read.js';
import type { HarborTask, HarborTurn } from '../../src/authoring/harbor/read-task.js';
import { placeBundle, writeDraft } from '../../src/authoring/harbor/write.js';
import type { ImportDraft } from '../../src/authoring/harbor/draft.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'harbor-steps-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const put = async (rel: string, text: string) => {
  await mkdir(path.dirname(path.join(dir, rel)), { recursive: true });
  await writeFile(path.join(dir, rel), text);
};

describe('readSolutions', () => {
  it("reads each turn's solution files (solve.sh apart); a link is no regular file; a turn without a solution reads none", async () => {
    await put('sol/solve.sh', 'echo hi');
    await put('sol/data/a.txt', 'a');
    await symlink('/etc/passwd', path.join(dir, 'sol/link'));
    const turn = (solution: string | null): HarborTurn => ({ step: null, instruction: 'x', tests: [], solution, upload: null });
    const [s] = (await readSolutions([turn(path.join(dir, 'sol'))]))!;
    expect(s!.files.map((f) => [f.name, f.data?.toString() ?? null])).toEqual([['data/a.txt', 'a']]);
    expect(s!.solve?.toString()).toBe('echo hi');
    expect(await readSolutions([turn(path.join(dir, 'sol')), turn(null)])).toBeNull();
  });
});

describe('neededImages', () => {
  it("counts a Dockerfile's FROM images as bases and an image run as it is as the task's own", () => {
    const t = (id: string, x: Partial<HarborTask>) => ({ id, dockerfile: null, image: null, sidecars: [], ...x }) as unknown as HarborTask;
    const needs = neededImages([
      t('a', { dockerfile: { text: '', images: ['base:1'], mapped: [], unresolved: [] }, sidecars: [{ name: 'db', image: 'pg', environment: {} }] }),
      t('b', { image: 'own:2' }),
      t('c', { dockerfile: { text: '', images: ['base:1'], mapped: [], unresolved: [] } }),
    ]);
    expect(Object.fromEntries(needs)).toEqual({
      'base:1': { kind: 'base', tasks: ['a', 'c'] },
      pg: { kind: 'task', tasks: ['a'] },
      'own:2': { kind: 'task', tasks: ['b'] },
    });
  });
});

describe('writeDraft and placeBundle', () => {
  it('copies folders (merged ones later over earlier), then writes files over them, then puts the folder in place', async () => {
    await put('ctx/Dockerfile', 'FROM unmapped');
    await put('ctx/app/main.sh', 'run');
    await put('t1/test.sh', 'one');
    await put('t1/keep.txt', 'kept');
    await put('t2/test.sh', 'two');
    const draft = {
      copies: [
        { from: path.join(dir, 'ctx'), to: 'envs/e' },
        { merge: [path.join(dir, 't1'), path.join(dir, 't2')], to: 'verifiers/t' },
        { merge: [], to: 'verifiers/empty' },
      ],
      files: [
        { path: 'envs/e/Dockerfile', text: 'FROM mapped' },
        { path: 'tasks/train.jsonl', text: '{}\n' },
      ],
    } as unknown as ImportDraft;
    const tmp = path.join(dir, 'tmp');
    await writeDraft(draft, tmp);
    const read = (rel: string) => readFile(path.join(tmp, rel), 'utf8');
    expect(await read('envs/e/Dockerfile')).toBe('FROM mapped');
    expect(await read('envs/e/app/main.sh')).toBe('run');
    expect([await read('verifiers/t/test.sh'), await read('verifiers/t/keep.txt')]).toEqual(['two', 'kept']);
    expect(await read('tasks/train.jsonl')).toBe('{}\n');
    await put('out/old.txt', 'old');
    await placeBundle(tmp, path.join(dir, 'out'));
    expect(await readFile(path.join(dir, 'out/envs/e/Dockerfile'), 'utf8')).toBe('FROM mapped');
    await expect(readFile(path.join(dir, 'out/old.txt'))).rejects.toThrow(/ENOENT/);
  });
});
