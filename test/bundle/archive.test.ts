/**
 * Archived bundles: a good one loads whatever its layout and leaves nothing behind; a malicious
 * or oversized one is refused with a message naming the entry, and writes nothing outside the
 * private temporary folder (which is itself removed).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import * as tar from 'tar';
import { afterAll, describe, expect, it } from 'vitest';
import { extractBundleArchive, loadBundle, type ExtractOptions } from '../../src/bundle/index.js';
import { FIXTURES, MINI, bundleError, removeTempDirs, tarGz, tempDir, type TarEntry } from './helpers.js';

afterAll(removeTempDirs);

const miniFiles = ['bundle.json', 'README.md', 'tasks/train.jsonl', 'tasks/eval.jsonl', 'envs/echo/Dockerfile', 'envs/echo/server.js'];

function writeArchive(entries: TarEntry[], name = 'bundle.tar.gz', opts: { truncate?: boolean } = {}): string {
  const file = path.join(tempDir('bundle-archive-'), name);
  writeFileSync(file, tarGz(entries, opts));
  return file;
}

/** The valid `mini` fixture as tar entries, under `prefix`. */
function miniEntries(prefix = ''): TarEntry[] {
  return miniFiles.map((f) => ({ path: prefix + f, body: readFileSync(path.join(MINI, f)) }));
}

describe('a good archive', () => {
  it('loads a bundle archived inside one top-level folder (tar czf x.tgz mini), and cleanup removes it', async () => {
    const parent = tempDir('bundle-parent-');
    const file = path.join(tempDir('bundle-archive-'), 'mini.tgz');
    await tar.c({ gzip: true, file, cwd: FIXTURES, portable: true }, ['mini']);
    const b = await loadBundle(file, { tmpDir: parent });
    const [temp] = readdirSync(parent);
    expect(temp).toMatch(/^openenv-bundle-/);
    const tempPath = path.join(parent, temp!);
    expect(statSync(tempPath).mode & 0o777).toBe(0o700);
    expect(b.dir).toBe(path.join(tempPath, 'mini'));
    expect(b.manifest.name).toBe('mini-v1');
    const folder = await loadBundle(MINI);
    expect(b.splits).toEqual(folder.splits);
    expect(b.toolsets).toEqual(folder.toolsets);
    expect(readFileSync(path.join(b.dir, 'envs/echo/server.js'), 'utf8')).toBe(readFileSync(path.join(MINI, 'envs/echo/server.js'), 'utf8'));
    await b.cleanup();
    expect(existsSync(tempPath)).toBe(false);
    expect(readdirSync(parent)).toEqual([]);
    await b.cleanup(); // idempotent
  });

  it('loads a bundle archived at the root (tar czf x.tar.gz -C mini .)', async () => {
    const parent = tempDir('bundle-parent-');
    const file = path.join(tempDir('bundle-archive-'), 'mini.tar.gz');
    await tar.c({ gzip: true, file, cwd: MINI }, ['.']);
    const b = await loadBundle(file, { tmpDir: parent });
    expect(path.dirname(b.dir)).toBe(parent);
    expect(b.splitCounts).toEqual({ train: 3, eval: 2 });
    await b.cleanup();
    expect(readdirSync(parent)).toEqual([]);
  });

  it('keeps file modes (without group/other write or set-id bits) and folder modes', async () => {
    const file = writeArchive([
      { path: 'b/', type: 'Directory', mode: 0o755 },
      ...miniEntries('b/'),
      { path: 'b/envs/echo/run.sh', body: '#!/bin/sh\n', mode: 0o4777 },
      { path: 'b/envs/echo/empty', body: '' },
      { path: 'b/envs/echo/after-empty', body: 'still read' },
    ]);
    const x = await extractBundleArchive(file, { tmpDir: tempDir('bundle-parent-') });
    expect(readFileSync(path.join(x.dir, 'envs/echo/empty'), 'utf8')).toBe('');
    expect(readFileSync(path.join(x.dir, 'envs/echo/after-empty'), 'utf8')).toBe('still read');
    expect(statSync(path.join(x.dir, 'envs/echo/run.sh')).mode & 0o7777).toBe(0o755);
    expect(statSync(path.join(x.dir, 'bundle.json')).mode & 0o7777).toBe(0o644);
    expect(statSync(x.dir).mode & 0o777).toBe(0o755);
    await x.cleanup();
    expect(existsSync(x.tempDir)).toBe(false);
  });

  it('removes the temporary folder when the process exits without cleanup()', () => {
    const file = writeArchive(miniEntries());
    const script = path.join(tempDir(), 'exit.mts');
    const index = path.resolve('src/bundle/index.ts');
    writeFileSync(script, `import { loadBundle } from ${JSON.stringify(index)};\nconst b = await loadBundle(${JSON.stringify(file)});\nconsole.log(b.dir);\n`);
    const dir = execFileSync(process.execPath, ['--import', 'tsx', script], { encoding: 'utf8' }).trim();
    expect(dir).toMatch(/openenv-bundle-/);
    expect(existsSync(dir)).toBe(false);
  });

  it('refuses an archive without bundle.json at its root or in a top-level folder', async () => {
    const file = writeArchive([
      { path: 'a/b/bundle.json', body: '{}' },
      { path: 'readme.txt', body: 'hi' },
    ]);
    await expect(loadBundle(file)).rejects.toThrow(`bundle.tar.gz: no bundle.json at the archive root nor in a top-level folder`);
    const two = writeArchive([...miniEntries('one/'), ...miniEntries('two/')]);
    await expect(loadBundle(two)).rejects.toThrow('bundle.json found in several top-level folders (one, two); expected one bundle');
  });

  it('removes the temporary folder when the archived bundle is invalid', async () => {
    const parent = tempDir('bundle-parent-');
    const entries = miniEntries().map((e) => (e.path === 'tasks/train.jsonl' ? { ...e, body: '{"task_id":"x"}\n' } : e));
    const err = await bundleError(loadBundle(writeArchive(entries), { tmpDir: parent }));
    expect(err.message).toContain('tasks/train.jsonl line 1, field "toolset": expected a string, but it is missing');
    expect(readdirSync(parent)).toEqual([]);
  });
});

describe('a malicious or oversized archive', () => {
  /** Extracts into a private parent folder; asserts the refusal and that the parent is left empty. */
  async function refused(entries: TarEntry[], options: ExtractOptions = {}, archiveOptions = {}): Promise<string> {
    const parent = tempDir('bundle-parent-');
    const file = writeArchive(entries, 'evil.tar.gz', archiveOptions);
    const err = await bundleError(extractBundleArchive(file, { ...options, tmpDir: parent }));
    // Nothing was left in (or escaped to) the parent of the temporary folder.
    expect(readdirSync(parent)).toEqual([]);
    expect(err.message.startsWith(file)).toBe(true);
    return err.message;
  }

  it('refuses a "../" path before writing it', async () => {
    const message = await refused([...miniEntries(), { path: '../escaped.txt', body: 'pwned' }]);
    expect(message).toContain('evil.tar.gz, entry "../escaped.txt": unsafe path: it has a ".." segment');
  });

  it('refuses a ".." segment inside a path', async () => {
    const message = await refused([{ path: 'b/../../escaped.txt', body: 'pwned' }]);
    expect(message).toContain('entry "b/../../escaped.txt": unsafe path: it has a ".." segment');
  });

  it('refuses an absolute path', async () => {
    const target = path.join(tempDir(), 'absolute.txt');
    const message = await refused([{ path: target, body: 'pwned' }]);
    expect(message).toContain(`entry "${target}": unsafe path: it is absolute`);
    expect(existsSync(target)).toBe(false);
  });

  it('refuses a symbolic link, and so never writes through it', async () => {
    const outside = tempDir();
    const message = await refused([
      { path: 'b/', type: 'Directory' },
      { path: 'b/link', type: 'SymbolicLink', linkpath: outside },
      { path: 'b/link/pwned.txt', body: 'pwned' },
    ]);
    expect(message).toContain('entry "b/link": a symbolic link; a bundle archive may hold only files and folders');
    expect(readdirSync(outside)).toEqual([]);
  });

  it('refuses a hard link', async () => {
    const message = await refused([...miniEntries(), { path: 'passwd', type: 'Link', linkpath: '/etc/passwd' }]);
    expect(message).toContain('entry "passwd": a hard link; a bundle archive may hold only files and folders');
  });

  it.each([
    ['CharacterDevice', 'a character device'],
    ['BlockDevice', 'a block device'],
    ['FIFO', 'a FIFO'],
  ] as const)('refuses a %s', async (type, what) => {
    const message = await refused([{ path: 'dev', type }]);
    expect(message).toContain(`entry "dev": ${what}; a bundle archive may hold only files and folders`);
  });

  it('refuses a "../" path given in a PAX header, whatever the ustar name says', async () => {
    const message = await refused([...miniEntries(), { path: 'innocent.txt', pax: { path: '../pax-escaped.txt' }, body: 'pwned' }]);
    expect(message).toContain('entry "../pax-escaped.txt": unsafe path: it has a ".." segment');
  });

  it.each([
    ['SparseFile', 'SparseFile'],
    ['GNUDumpDir', 'GNUDumpDir'],
  ] as const)('refuses an entry of type %s', async (type, name) => {
    const message = await refused([{ path: 'odd', type }]);
    expect(message).toContain(`entry "odd": an entry of unsupported type ${name}; a bundle archive may hold only files and folders`);
  });

  it('refuses more entries than the cap, naming the first one over it', async () => {
    const entries = Array.from({ length: 6 }, (_, i) => ({ path: `f${i}.txt`, body: 'x' }));
    const message = await refused(entries, { maxEntries: 5 });
    expect(message).toContain('entry "f5.txt": more than 5 entries in the archive');
    // the default cap lets a normal archive through
    const x = await extractBundleArchive(writeArchive(miniEntries()), { tmpDir: tempDir() });
    await x.cleanup();
  });

  it('refuses more bytes than the cap, counting declared sizes before reading them', async () => {
    const message = await refused(
      [
        { path: 'a.bin', body: Buffer.alloc(600, 1) },
        { path: 'b.bin', body: Buffer.alloc(600, 2) },
      ],
      { maxBytes: 1000 },
    );
    expect(message).toContain('entry "b.bin": the archive unpacks to more than 1000 bytes (cap reached at this entry)');
  });

  it('refuses one file larger than the cap', async () => {
    const message = await refused([{ path: 'big.bin', body: Buffer.alloc(4096) }], { maxBytes: 4095 });
    expect(message).toContain('entry "big.bin": the archive unpacks to more than 4095 bytes');
  });

  it('refuses a file entry that collides with an earlier one', async () => {
    const message = await refused([
      { path: 'a/b.txt', body: '1' },
      { path: 'a', body: 'file over a folder' },
    ]);
    expect(message).toContain('entry "a": conflicts with an earlier entry for the same path (a folder)');
    const again = await refused([
      { path: 'x.txt', body: '1' },
      { path: './x.txt', body: '2' },
    ]);
    expect(again).toContain('entry "./x.txt": conflicts with an earlier entry for the same path (a file)');
  });

  it('refuses a truncated archive', async () => {
    const message = await refused([{ path: 'long.txt', body: 'y'.repeat(2000) }], {}, { truncate: true });
    expect(message).toMatch(/evil\.tar\.gz: not a readable \.tar\.gz archive: .*Truncated input/);
  });

  it('refuses gzip data that is not a tar archive', async () => {
    const parent = tempDir('bundle-parent-');
    const file = path.join(tempDir(), 'junk.tar.gz');
    const { gzipSync } = await import('node:zlib');
    writeFileSync(file, gzipSync(Buffer.from('hello, this is not tar\n'.repeat(100))));
    const err = await bundleError(loadBundle(file, { tmpDir: parent }));
    expect(err.message).toContain(`${file}: not a readable .tar.gz archive`);
    expect(readdirSync(parent)).toEqual([]);
  });

  it('is refused through loadBundle too, with the entry named', async () => {
    const parent = tempDir('bundle-parent-');
    const file = writeArchive([...miniEntries('b/'), { path: 'b/../../up.txt', body: 'pwned' }], 'evil.tgz');
    await expect(loadBundle(file, { tmpDir: parent })).rejects.toThrow(`${file}, entry "b/../../up.txt": unsafe path: it has a ".." segment`);
    expect(readdirSync(parent)).toEqual([]);
    expect(existsSync(path.join(path.dirname(parent), 'up.txt'))).toBe(false);
  });
});
