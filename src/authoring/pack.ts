/**
 * `openenv-bundle pack`: a bundle folder as a `.tar.gz` the server loads directly, named
 * `<name>-<version>-<12 hex of its sha256>.tar.gz`. What goes in: every file of the folder less
 * what a `.bundleignore` at its root excludes (Docker's ignore syntax) and, inside each env's
 * build context, what its `.dockerignore` excludes (the engine would not see it either). Links,
 * devices and anything else but files and folders are refused, as the archive loader would.
 * Entries are sorted, owned by 0:0 and dated 1970, so the same files give the same archive.
 */
import { createHash } from 'node:crypto';
import { lstat, mkdir, readdir, readFile, realpath, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import dockerignore from '@balena/dockerignore';
import { create as tarCreate } from 'tar';
import { loadBundle } from '../bundle/index.js';

export const BUNDLE_IGNORE_FILE = '.bundleignore';

export class PackError extends Error {
  override readonly name = 'PackError';
}

type Ignores = (rel: string) => boolean;

async function ignoreFile(file: string, keep: readonly string[]): Promise<Ignores | null> {
  const text = await readFile(file, 'utf8').catch(() => null);
  if (text === null) return null;
  // a CommonJS module: under NodeNext its typed default export is the module's own `default`
  const ig = dockerignore.default().add(text);
  return (rel) => !keep.includes(rel) && ig.ignores(rel);
}

/** The bundle's files to pack, sorted, relative to `dir` with "/". */
export async function packList(dir: string, buildDirs: readonly string[]): Promise<string[]> {
  const root = path.resolve(dir);
  const rules: { prefix: string; ignores: Ignores }[] = [];
  const top = await ignoreFile(path.join(root, BUNDLE_IGNORE_FILE), ['bundle.json']);
  if (top) rules.push({ prefix: '', ignores: top });
  for (const b of buildDirs) {
    const rel = b.replace(/\/+$/, '');
    const ig = await ignoreFile(path.join(root, rel, '.dockerignore'), ['Dockerfile', '.dockerignore']);
    if (ig) rules.push({ prefix: `${rel}/`, ignores: ig });
  }
  const excluded = (rel: string) => rules.some((r) => rel.startsWith(r.prefix) && r.ignores(rel.slice(r.prefix.length)));
  const out: string[] = [];
  const walk = async (relDir: string): Promise<void> => {
    for (const name of (await readdir(path.join(root, relDir))).sort()) {
      const rel = relDir ? `${relDir}/${name}` : name;
      if (excluded(rel)) continue;
      const st = await lstat(path.join(root, rel)).catch((e: NodeJS.ErrnoException) => {
        throw e.code === 'ENOENT' ? new PackError(`${rel} vanished while the bundle was being listed: pack it again`) : e;
      });
      if (st.isSymbolicLink())
        throw new PackError(
          `${rel} is a symbolic link: a bundle archive holds files and folders only; copy the file in, or list the link in ${BUNDLE_IGNORE_FILE}`,
        );
      if (st.isDirectory()) await walk(rel);
      else if (st.isFile()) out.push(rel);
      else throw new PackError(`${rel} is neither a file nor a folder; list it in ${BUNDLE_IGNORE_FILE}`);
    }
  };
  await walk('');
  return out;
}

/** `p`'s real path: its deepest existing ancestor resolved (symlinks followed), the rest appended. */
async function realTarget(p: string): Promise<string> {
  const tail: string[] = [];
  for (let at = p; ; at = path.dirname(at)) {
    const real = await realpath(at).catch(() => null);
    if (real !== null) return path.join(real, ...tail);
    if (path.dirname(at) === at) return p;
    tail.unshift(path.basename(at));
  }
}

function relativeTo(dir: string, p: string | undefined): string {
  return p === undefined ? 'a file' : path.relative(dir, path.resolve(dir, p)) || p;
}

export interface Packed {
  file: string;
  sha256: string;
  files: string[];
  bytes: number;
}

/**
 * Packs the bundle folder `dir` (validated first: an invalid bundle is not packed) into `out`: a
 * folder to write the hash-named archive into (default: the current one), or a file path ending
 * in .tar.gz / .tgz.
 */
export async function packBundle(dir: string, out = '.'): Promise<Packed> {
  const st = await stat(dir).catch(() => null);
  if (!st?.isDirectory()) throw new PackError(`${dir} is not a bundle folder`);
  const bundle = await loadBundle(dir);
  const { name, version, envs } = bundle.manifest;
  const buildDirs = Object.values(envs).flatMap((e) => (e.build === undefined ? [] : [e.build]));
  const files = await packList(bundle.dir, buildDirs);
  const toFile = /\.(tar\.gz|tgz)$/.test(out);
  const outKind = (await stat(out).catch(() => null))?.isDirectory();
  if (toFile && outKind === true)
    throw new PackError(`-o ${out} is a folder: give a file path that is not one, or the folder alone to name the archive by its hash`);
  if (!toFile && outKind === false) throw new PackError(`-o ${out} is a file: give a folder, or a file path ending in .tar.gz or .tgz`);
  const outDir = toFile ? path.dirname(path.resolve(out)) : path.resolve(out);
  // where it really is, through any symlink on the way: never inside the bundle
  const real = await realTarget(outDir);
  const inside = path.relative(bundle.dir, real);
  if (!inside.startsWith('..') && !path.isAbsolute(inside)) {
    throw new PackError(`the archive would be written inside the bundle (${outDir}${real === outDir ? '' : `, which is ${real}`}): pick another -o`);
  }
  await mkdir(outDir, { recursive: true });
  const partial = path.join(outDir, `.${name}-${process.pid}-${Date.now()}.tar.gz.partial`);
  try {
    await tarCreate({ gzip: { level: 9 }, file: partial, cwd: bundle.dir, prefix: name, portable: true, mtime: new Date(0), noDirRecurse: true }, files).catch(
      (e: NodeJS.ErrnoException) => {
        if (e.code === 'ENOENT' || e.code === 'ENOTDIR')
          throw new PackError(`${relativeTo(bundle.dir, e.path)} vanished while it was being packed: the bundle changed; nothing was written, pack it again`);
        throw new PackError(`cannot pack ${relativeTo(bundle.dir, e.path)}: ${e.code ?? e.message}; nothing was written`);
      },
    );
    // what the server will do with it: an ignore rule that dropped a task file shows here
    const reloaded = await loadBundle(partial).catch((e: Error) => {
      throw new PackError(`the archive does not load as a bundle (an ignore rule left out something it needs?): ${e.message}`);
    });
    await reloaded.cleanup();
    const bytes = await readFile(partial);
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const file = toFile ? path.resolve(out) : path.join(outDir, `${name}-${version}-${sha256.slice(0, 12)}.tar.gz`);
    await rename(partial, file);
    return { file, sha256, files, bytes: bytes.length };
  } finally {
    await rm(partial, { force: true });
  }
}
