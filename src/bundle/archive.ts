/**
 * Defensive extraction of a bundle archive (.tar.gz / .tgz) into a private temporary folder.
 *
 * We parse the archive with tar's Parser and write every entry ourselves instead of using
 * tar's Unpack: only plain files and directories are ever created, so no entry can redirect a
 * later one (no links), and every path is checked before anything is written for it. Declared
 * sizes and the entry count are capped before the bytes are read; tar's Parser itself caps the
 * decompression ratio (1000:1) and the size of metadata headers (1 MiB).
 */
import { createReadStream, createWriteStream, rmSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, open, readdir, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Parser, type ReadEntry } from 'tar';
import { BundleError } from './errors.js';
import { relativePathProblem } from './schema.js';

export const DEFAULT_MAX_BYTES = 1024 ** 3;
export const DEFAULT_MAX_ENTRIES = 100_000;

export interface ExtractOptions {
  /** cap on the sum of the entries' sizes (default 1 GiB) */
  maxBytes?: number;
  /** cap on the number of entries, folders included (default 100,000) */
  maxEntries?: number;
  /** where the private temporary folder is created (default os.tmpdir()) */
  tmpDir?: string;
}

export interface ExtractedBundle {
  /** the folder holding bundle.json: the temporary folder or its single top-level folder */
  dir: string;
  /** the private temporary folder everything was extracted into */
  tempDir: string;
  /** removes the temporary folder; idempotent */
  cleanup(): Promise<void>;
}

// Temporary folders still on disk, removed when the process exits. 'exit' handlers must be
// synchronous; signals are the serving process's business (it drains, then exits, which lands here).
const liveTempDirs = new Set<string>();
let exitHookInstalled = false;
function removeAllAtExit(): void {
  for (const dir of liveTempDirs) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // best effort at exit: nothing left to report to
    }
  }
  liveTempDirs.clear();
}

async function removeTempDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
  liveTempDirs.delete(dir);
}

/** True when the file starts with gzip's magic bytes. */
export async function looksLikeGzip(file: string): Promise<boolean> {
  const fh = await open(file, 'r');
  try {
    const buf = Buffer.alloc(2);
    const { bytesRead } = await fh.read(buf, 0, 2, 0);
    return bytesRead === 2 && buf[0] === 0x1f && buf[1] === 0x8b;
  } finally {
    await fh.close();
  }
}

/**
 * Extracts `archive` into a fresh 0700 folder under `tmpDir`, then finds the folder holding
 * bundle.json (the root, or the one top-level folder that holds it). Any problem removes the
 * temporary folder and throws a BundleError naming the offending entry.
 */
export async function extractBundleArchive(archive: string, options: ExtractOptions = {}): Promise<ExtractedBundle> {
  const limits = {
    maxBytes: options.maxBytes ?? DEFAULT_MAX_BYTES,
    maxEntries: options.maxEntries ?? DEFAULT_MAX_ENTRIES,
  };
  const tempDir = await mkdtemp(path.join(options.tmpDir ?? os.tmpdir(), 'openenv-bundle-'));
  liveTempDirs.add(tempDir);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on('exit', removeAllAtExit);
  }
  try {
    await chmod(tempDir, 0o700);
    await unpack(archive, tempDir, limits);
    const dir = await findBundleRoot(archive, tempDir);
    let removed: Promise<void> | undefined;
    return { dir, tempDir, cleanup: () => (removed ??= removeTempDir(tempDir)) };
  } catch (err) {
    await removeTempDir(tempDir);
    throw err;
  }
}

async function findBundleRoot(archive: string, tempDir: string): Promise<string> {
  const isFile = async (p: string) => (await stat(p).catch(() => null))?.isFile() === true;
  if (await isFile(path.join(tempDir, 'bundle.json'))) return tempDir;
  const top = await readdir(tempDir, { withFileTypes: true });
  const candidates = top.filter((d) => d.isDirectory());
  const holding: string[] = [];
  for (const d of candidates) {
    if (await isFile(path.join(tempDir, d.name, 'bundle.json'))) holding.push(d.name);
  }
  if (holding.length === 1 && holding[0] !== undefined) return path.join(tempDir, holding[0]);
  const message =
    holding.length === 0
      ? 'no bundle.json at the archive root nor in a top-level folder'
      : `bundle.json found in several top-level folders (${holding.join(', ')}); expected one bundle`;
  throw new BundleError({ file: archive, message });
}

const KIND_OF_TYPE: Record<string, string> = {
  SymbolicLink: 'a symbolic link',
  Link: 'a hard link',
  CharacterDevice: 'a character device',
  BlockDevice: 'a block device',
  FIFO: 'a FIFO',
};

/** The entry's path split into safe segments (`[]` for the root itself), or why it is unsafe. */
function entrySegments(p: string): string[] | string {
  const why = relativePathProblem(p);
  if (why !== null) return why;
  return p.split('/').filter((s) => s !== '' && s !== '.');
}

function unpack(archive: string, dest: string, limits: { maxBytes: number; maxEntries: number }): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const source = createReadStream(archive);
    const parser = new Parser({ strict: true });
    const writes: Promise<void>[] = [];
    const openStreams = new Set<ReturnType<typeof createWriteStream>>();
    const dirModes = new Map<string, number>();
    const kinds = new Map<string, 'file' | 'dir'>();
    let entries = 0;
    let bytes = 0;
    let failure: BundleError | undefined;
    let settled = false;

    const settle = () => {
      if (settled) return;
      settled = true;
      void Promise.allSettled(writes).then(async () => {
        if (failure) return reject(failure);
        try {
          // Folders last, so a read-only folder mode cannot block writing its files.
          for (const [dir, mode] of dirModes) await chmod(dir, mode);
          resolve();
        } catch (err) {
          reject(new BundleError({ file: archive, message: `could not set folder modes: ${(err as Error).message}` }));
        }
      });
    };

    const fail = (issue: { entry?: string; message: string }) => {
      if (failure) return;
      failure = new BundleError({ file: archive, ...issue });
      source.destroy();
      for (const s of openStreams) s.destroy();
      // tar decorates the error it is aborted with (code, tarCode…): give it one of its own.
      parser.abort(new Error(failure.message));
      settle();
    };

    parser.on('entry', (entry: ReadEntry) => {
      if (failure) return void entry.resume();
      const name = entry.path;
      const refuse = (message: string) => {
        entry.resume();
        fail({ entry: name, message });
      };

      if (++entries > limits.maxEntries) return refuse(`more than ${limits.maxEntries} entries in the archive`);
      const kind = entry.type === 'Directory' ? 'dir' : ['File', 'OldFile', 'ContiguousFile'].includes(entry.type) ? 'file' : null;
      if (kind === null) {
        const what = KIND_OF_TYPE[entry.type] ?? `an entry of unsupported type ${entry.type}`;
        return refuse(`${what}; a bundle archive may hold only files and folders`);
      }
      const segments = entrySegments(name);
      if (typeof segments === 'string') return refuse(`unsafe path: ${segments}`);
      if (segments.length === 0) {
        if (kind === 'dir') return void entry.resume(); // "./", the root itself
        return refuse('a file entry with an empty path');
      }
      const rel = segments.join('/');
      for (let i = 1; i < segments.length; i++) {
        const parent = segments.slice(0, i).join('/');
        if (kinds.get(parent) === 'file') return refuse(`path runs through ${JSON.stringify(parent)}, which is a file`);
      }
      const previous = kinds.get(rel);
      if (previous === 'file' || (previous === 'dir' && kind === 'file')) {
        return refuse(`conflicts with an earlier entry for the same path (a ${previous === 'dir' ? 'folder' : 'file'})`);
      }
      for (let i = 1; i < segments.length; i++) kinds.set(segments.slice(0, i).join('/'), 'dir');
      kinds.set(rel, kind);
      const target = path.join(dest, ...segments);
      const mode = entry.mode ?? (kind === 'dir' ? 0o755 : 0o644);

      if (kind === 'dir') {
        entry.resume();
        dirModes.set(target, (mode & 0o755) | 0o700);
        writes.push(
          mkdir(target, { recursive: true, mode: 0o700 }).then(
            () => undefined,
            (err: Error) => fail({ entry: name, message: `could not create the folder: ${err.message}` }),
          ),
        );
        return;
      }

      bytes += entry.size;
      if (bytes > limits.maxBytes) {
        return refuse(`the archive unpacks to more than ${limits.maxBytes} bytes (cap reached at this entry)`);
      }
      writes.push(
        writeFileEntry(entry, target, (mode & 0o755) | 0o600, openStreams, () => failure !== undefined).catch((err: Error) =>
          fail({ entry: name, message: `could not write the file: ${err.message}` }),
        ),
      );
    });
    // Entries of unknown types, and metadata headers over tar's size cap.
    parser.on('ignoredEntry', (entry: ReadEntry) =>
      fail({ entry: entry.path, message: `an entry of unsupported type ${entry.type}; a bundle archive may hold only files and folders` }),
    );
    parser.on('error', (err: Error) => {
      if (failure) return;
      fail({ message: `not a readable .tar.gz archive: ${err.message}` });
    });
    parser.on('end', settle);
    source.on('error', (err) => fail({ message: `could not read the archive: ${err.message}` }));
    source.pipe(parser as unknown as NodeJS.WritableStream);
  });
}

async function writeFileEntry(
  entry: ReadEntry,
  target: string,
  mode: number,
  openStreams: Set<ReturnType<typeof createWriteStream>>,
  aborted: () => boolean,
): Promise<void> {
  await mkdir(path.dirname(target), { recursive: true, mode: 0o700 });
  if (aborted()) return void entry.resume();
  await new Promise<void>((resolve, reject) => {
    // 'wx' (O_CREAT|O_EXCL) never follows an existing link or overwrites an existing file.
    const out = createWriteStream(target, { flags: 'wx', mode: 0o600 });
    openStreams.add(out);
    out.on('error', reject);
    out.on('close', () => {
      openStreams.delete(out);
      resolve();
    });
    entry.pipe(out);
  });
  if (!aborted()) await chmod(target, mode);
}
