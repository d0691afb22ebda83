/**
 * Issue 26, what a hostile bundle folder (or a careless `-o`) did to the commands, run as users
 * run them (the built binaries, child processes): a FIFO named bundle.json or README.md hung
 * `check --static` and `serve` waiting for a writer; `pack` crashed when a file vanished
 * mid-pack or `-o` was a folder, and wrote into the bundle through a symlink.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FIXTURE_BUNDLE } from '../support/app.js';

const CLI = join(process.cwd(), 'dist/cli/openenv-bundle.js');
const SERVE = join(process.cwd(), 'dist/serve.js');

function run(script: string, args: string[], timeoutMs = 20_000): Promise<{ code: number | null; stdout: string; stderr: string; timedOut: boolean }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [script, ...args], { env: { PATH: process.env.PATH! }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const t = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('close', (code) => {
      clearTimeout(t);
      resolve({ code, stdout, stderr, timedOut });
    });
  });
}

const tmp = mkdtempSync(join(tmpdir(), 'openenv-hostile-bundle-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let n = 0;
function copyOfFixture(): string {
  const dir = join(tmp, `bundle-${++n}`);
  cpSync(FIXTURE_BUNDLE, dir, { recursive: true });
  return dir;
}
function fifo(path: string): void {
  rmSync(path, { force: true });
  execFileSync('mkfifo', [path]);
}

describe('a FIFO where a bundle has a file', () => {
  it('bundle.json: `check --static` and `serve` say so and exit 1, instead of waiting for a writer', async () => {
    const dir = copyOfFixture();
    fifo(join(dir, 'bundle.json'));
    const check = await run(CLI, ['check', '--static', dir]);
    expect(check.timedOut).toBe(false);
    expect(check.code).toBe(1);
    expect(check.stdout + check.stderr).toContain('bundle.json: is not a regular file');
    const serve = await run(SERVE, [dir, '--port', '0']);
    expect(serve.timedOut).toBe(false);
    expect(serve.code).toBe(1);
    expect(serve.stderr).toContain('bundle.json: is not a regular file');
  });

  it('README.md: a problem of the bundle, named', async () => {
    const dir = copyOfFixture();
    fifo(join(dir, 'README.md'));
    const check = await run(CLI, ['check', '--static', dir]);
    expect(check.timedOut).toBe(false);
    expect(check.code).toBe(1);
    expect(check.stdout).toContain('README.md: expected a text file in the bundle, but it is not a regular file');
  });
});

describe('pack and its -o', () => {
  it('-o naming a folder as the archive file, or a file as the folder: a clear error, nothing written', async () => {
    const dir = copyOfFixture();
    const folder = join(tmp, 'taken.tar.gz');
    mkdirSync(folder);
    const a = await run(CLI, ['pack', dir, '-o', folder]);
    expect(a.code).toBe(1);
    expect(a.stderr).toBe(`error: -o ${folder} is a folder: give a file path that is not one, or the folder alone to name the archive by its hash\n`);
    expect(readdirSync(folder)).toEqual([]);
    const file = join(tmp, 'a-file');
    writeFileSync(file, 'x');
    const b = await run(CLI, ['pack', dir, '-o', file]);
    expect(b.code).toBe(1);
    expect(b.stderr).toContain(`-o ${file} is a file`);
    expect(readdirSync(tmp).filter((f) => f.endsWith('.partial'))).toEqual([]);
  });

  it('-o through a symlink that points into the bundle is refused; the bundle is not written to', async () => {
    const dir = copyOfFixture();
    const before = execFileSync('find', [dir, '-newer', join(dir, 'bundle.json')], { encoding: 'utf8' });
    const link = join(tmp, `into-bundle-${n}`);
    symlinkSync(join(dir, 'tasks'), link);
    for (const out of [link, join(link, 'deeper'), join(link, 'named.tar.gz')]) {
      const r = await run(CLI, ['pack', dir, '-o', out]);
      expect(r.code, out).toBe(1);
      expect(r.stderr, out).toContain(
        `the archive would be written inside the bundle (${out.endsWith('.tar.gz') ? link : out}, which is ${join(dir, 'tasks')}`,
      );
    }
    expect(readdirSync(join(dir, 'tasks')).sort()).toEqual(['eval.jsonl', 'train.jsonl']);
    expect(execFileSync('find', [dir, '-newer', join(dir, 'bundle.json')], { encoding: 'utf8' })).toBe(before);
  });

  it('a file that vanishes while it is being packed: a clear error, no archive, no partial file left', async () => {
    const dir = copyOfFixture();
    // an incompressible file keeps the packer busy (gzip level 9) while a later file is removed
    mkdirSync(join(dir, 'data'));
    writeFileSync(join(dir, 'data', 'big.bin'), randomBytes(48 * 1024 * 1024));
    // files between it and the one that vanishes: the packer's read-ahead never reaches that one early
    for (let i = 0; i < 8; i++) writeFileSync(join(dir, 'data', `filler-${i}.txt`), 'x');
    writeFileSync(join(dir, 'zz-vanishing.txt'), 'soon gone');
    const out = join(tmp, `vanish-${n}`);
    mkdirSync(out);
    const packing = run(CLI, ['pack', dir, '-o', out], 60_000);
    // the moment the packer starts writing, the later file goes
    for (let i = 0; i < 4000 && !readdirSync(out).some((f) => f.endsWith('.partial')); i++) await new Promise((r) => setTimeout(r, 5));
    unlinkSync(join(dir, 'zz-vanishing.txt'));
    const r = await packing;
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('error: zz-vanishing.txt vanished while it was being packed: the bundle changed; nothing was written, pack it again\n');
    expect(readdirSync(out)).toEqual([]);
    expect(existsSync(join(dir, 'data', 'big.bin'))).toBe(true);
  });
});
