/** `openenv-bundle init` (never overwrites; both templates load and pass the static check) and `pack` (a reproducible archive the server loads). */
import { mkdtemp, mkdir, readFile, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { list as tarList } from 'tar';
import { afterEach, describe, expect, it } from 'vitest';
import { checkStatic } from '../../src/authoring/check-static.js';
import { loadBundle } from '../../src/bundle/index.js';
import { bufferIo, initTemp, run, type TempBundle } from './helpers.js';

const runInit = run('init');
const runPack = run('pack');

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanup.splice(0).map((f) => f()));
});
async function tempDir(): Promise<string> {
  const d = await mkdtemp(path.join(tmpdir(), 'openenv-init-'));
  cleanup.push(() => rm(d, { recursive: true, force: true }));
  return d;
}

describe('init', () => {
  it.each(['node', 'python'])('writes a %s bundle that loads and passes the static check, with what to change', async (env) => {
    const parent = await tempDir();
    const dir = path.join(parent, 'my-tasks');
    const b = bufferIo();
    expect(await runInit(['my-tasks', '--env', env, '--dir', dir, '--json'], b.io)).toBe(0);
    const { files } = JSON.parse(b.out()) as { files: string[] };
    const server = env === 'node' ? 'envs/qa/server.mjs' : 'envs/qa/server.py';
    expect(files.sort()).toEqual(
      ['README.md', 'bundle.json', 'envs/qa/.dockerignore', 'envs/qa/Dockerfile', server, 'tasks/eval.jsonl', 'tasks/train.jsonl'].sort(),
    );
    const st = await checkStatic(dir);
    expect(st.findings.list).toEqual([]);
    expect(st.bundle?.manifest.name).toBe('my-tasks');
    expect([...(st.bundle?.byId.keys() ?? [])]).toContain('my-tasks-train-0');
    expect(await readFile(path.join(dir, 'README.md'), 'utf8')).toContain('## What to change');
    expect(await readFile(path.join(dir, 'envs/qa/Dockerfile'), 'utf8')).toMatch(
      env === 'node' ? /ARG NODE_IMAGE=node:20-slim/ : /ARG PYTHON_IMAGE=python:3\.12-slim/,
    );
    expect(await readFile(path.join(dir, server), 'utf8')).toContain('OPENENV_ENV_SECRET');
    await st.bundle?.cleanup();
  });

  it('refuses to overwrite: a folder holding anything is left as it was (exit 1)', async () => {
    const dir = await tempDir();
    await writeFile(path.join(dir, 'mine.txt'), 'keep me');
    const b = bufferIo();
    expect(await runInit(['x', '--dir', dir], b.io)).toBe(1);
    expect(b.err()).toContain('already exists and is not empty: init never overwrites');
    expect(await readdir(dir)).toEqual(['mine.txt']);
  });

  it('exits 2 for a command line to fix and 1 for a name images cannot carry', async () => {
    const b = bufferIo();
    expect(await runInit(['x', '--env', 'ruby'], b.io)).toBe(2);
    expect(b.err()).toContain("error: --env: Invalid enum value. Expected 'node' | 'python', received 'ruby'");
    expect(await runInit([], bufferIo().io)).toBe(2);
    const bad = bufferIo();
    expect(await runInit(['My Tasks', '--dir', path.join(await tempDir(), 'a')], bad.io)).toBe(1);
    expect(bad.err()).toContain('must match');
  });
});

describe('pack', () => {
  let b: TempBundle;
  const fresh = async () => {
    b = await initTemp('pack-me');
    cleanup.push(() => b.remove());
  };

  it('writes an archive named by its hash, the same for the same files, that loads as the bundle; ignored files stay out', async () => {
    await fresh();
    await writeFile(path.join(b.dir, 'envs/qa/NOTES.md'), 'excluded by the env .dockerignore');
    await mkdir(path.join(b.dir, 'drafts'));
    await writeFile(path.join(b.dir, 'drafts/idea.txt'), 'excluded by .bundleignore');
    await writeFile(path.join(b.dir, '.bundleignore'), 'drafts/\n');
    const out = await tempDir();
    const first = bufferIo();
    expect(await runPack([b.dir, '-o', out, '--json'], first.io)).toBe(0);
    const packed = JSON.parse(first.out()) as { file: string; sha256: string; files: string[] };
    expect(path.basename(packed.file)).toBe(`pack-me-0.1.0-${packed.sha256.slice(0, 12)}.tar.gz`);
    const again = bufferIo();
    expect(await runPack([b.dir, '-o', out, '--json'], again.io)).toBe(0);
    expect(JSON.parse(again.out()).sha256).toBe(packed.sha256);

    const entries: string[] = [];
    await tarList({ file: packed.file, onReadEntry: (e) => entries.push(e.path) });
    expect(entries).toContain('pack-me/bundle.json');
    expect(entries).toContain('pack-me/.bundleignore');
    expect(entries.filter((e) => e.includes('NOTES.md') || e.includes('drafts'))).toEqual([]);

    const loaded = await loadBundle(packed.file);
    try {
      expect(loaded.manifest.name).toBe('pack-me');
      expect(loaded.splitCounts).toEqual({ train: 3, eval: 2 });
    } finally {
      await loaded.cleanup();
    }
  });

  it('refuses links, names the file, and writes nothing', async () => {
    await fresh();
    await symlink('/etc/passwd', path.join(b.dir, 'tasks/outside'));
    const out = await tempDir();
    const r = bufferIo();
    expect(await runPack([b.dir, '-o', out], r.io)).toBe(1);
    expect(r.err()).toContain('tasks/outside is a symbolic link');
    expect(await readdir(out)).toEqual([]);
  });

  it("refuses an invalid bundle with the loader's message, and an archive inside the bundle", async () => {
    await fresh();
    const inside = bufferIo();
    expect(await runPack([b.dir, '-o', path.join(b.dir, 'out.tar.gz')], inside.io)).toBe(1);
    expect(inside.err()).toContain('inside the bundle');
    await b.edit('bundle.json', '"max_turns": 2', '"max_turns": 0');
    const r = bufferIo();
    expect(await runPack([b.dir, '-o', await tempDir()], r.io)).toBe(1);
    expect(r.err()).toContain('field "max_turns"');
  });
});
