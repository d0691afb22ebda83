/**
 * Files in a container through the engine's archive API, read and written as tar with the `tar`
 * package: byte for byte (no newline or encoding is changed), bounded (a read stops pulling the
 * archive once it has its bytes), symbolic links followed as a terminal would.
 */
import path from 'node:path';
import * as tar from 'tar';
import { pathKind, singleFileTar, type ContainerExec, type PathStat } from '../../sandbox/container-exec.js';

/** A file tool's own failure (missing path, a folder, …): the model's to read, the episode goes on. */
export class FileToolError extends Error {
  override readonly name = 'FileToolError';
}

/** links followed before giving up (a loop) */
const MAX_LINKS = 16;

/** An absolute, normalised path: `p` as it is when absolute, else relative to `cwd`. */
export function resolvePath(cwd: string, p: string): string {
  return path.posix.normalize(path.posix.isAbsolute(p) ? p : path.posix.join(cwd, p));
}

export interface Target {
  /** the path the call named, resolved against the working directory */
  path: string;
  /** after following links: what is really read or written */
  real: string;
  stat: PathStat | null;
}

/** Follows symbolic links from `abs` to what they point at (or to the missing path they name). */
export async function follow(exec: ContainerExec, abs: string): Promise<Target> {
  let real = abs;
  for (let i = 0; i < MAX_LINKS; i++) {
    const stat = await exec.stat(real);
    if (stat === null || pathKind(stat.mode) !== 'symlink') return { path: abs, real, stat };
    real = path.posix.isAbsolute(stat.linkTarget) ? stat.linkTarget : path.posix.join(path.posix.dirname(real), stat.linkTarget);
  }
  throw new FileToolError(`${abs}: too many levels of symbolic links`);
}

/** A path in a folder the engine cannot see into: the file tools cannot reach it, bash can. */
function refuseUnseen(p: string, unseen: readonly string[], doing: 'read' | 'write'): void {
  const mount = unseen.find((m) => p === m || p.startsWith(`${m.replace(/\/+$/, '')}/`));
  if (mount === undefined) return;
  throw new FileToolError(
    `${doing === 'read' ? 'read_file' : 'write_file'} cannot reach ${p}: ${mount} is a tmpfs of this env's own (its root is read-only), which the engine's archive API cannot see; use bash for files there (cat, ${doing === 'read' ? 'base64' : 'printf … >'})`,
  );
}

function notAFile(t: Target, doing: 'read' | 'write'): FileToolError | null {
  if (t.stat === null) return null;
  const kind = pathKind(t.stat.mode);
  if (kind === 'dir') {
    return new FileToolError(`${t.path} is a directory, not a file${doing === 'read' ? `: list it with bash (ls -la ${t.path})` : ''}`);
  }
  if (kind !== 'file') return new FileToolError(`${t.path} is not a regular file (a device, pipe or socket): use bash for it`);
  return null;
}

export interface FileSlice {
  /** the file's size in bytes */
  size: number;
  offset: number;
  /** the bytes [offset, offset + data.length) */
  data: Buffer;
  real: string;
}

/** Reads at most `limit` bytes of the file at `abs` from `offset`. */
export async function readFileSlice(exec: ContainerExec, abs: string, offset: number, limit: number, unseen: readonly string[] = []): Promise<FileSlice> {
  refuseUnseen(abs, unseen, 'read');
  const t = await follow(exec, abs);
  refuseUnseen(t.real, unseen, 'read');
  if (t.stat === null) throw new FileToolError(`no such file: ${t.path}`);
  const wrong = notAFile(t, 'read');
  if (wrong) throw wrong;
  const archive = await exec.getArchive(t.real);
  const chunks: Buffer[] = [];
  let seen = 0;
  let got = 0;
  let size = t.stat.size;
  await new Promise<void>((resolve, reject) => {
    let settled = false;
    const settle = (e?: Error) => {
      if (settled) return;
      settled = true;
      archive.destroy();
      if (e) reject(e);
      else resolve();
    };
    const parser = new tar.Parser({
      onReadEntry: (entry) => {
        if (entry.type !== 'File' && entry.type !== 'OldFile' && entry.type !== 'ContiguousFile') {
          entry.resume();
          return;
        }
        size = entry.size;
        entry.on('data', (chunk: Buffer) => {
          const start = seen;
          seen += chunk.length;
          const from = Math.max(offset - start, 0);
          const to = Math.min(chunk.length, offset + limit - start);
          if (to > from) {
            chunks.push(Buffer.from(chunk.subarray(from, to)));
            got += to - from;
          }
          // enough: stop pulling the rest of the file through the engine
          if (got >= limit || seen >= offset + limit) settle();
        });
        entry.on('end', () => settle());
      },
    });
    parser.on('error', (e: Error) => settle(e));
    parser.on('end', () => settle());
    archive.on('error', (e: Error) => settle(e));
    archive.on('end', () => parser.end());
    archive.on('data', (c: Buffer) => {
      if (!settled) parser.write(c);
    });
  });
  return { size, offset, data: Buffer.concat(chunks), real: t.real };
}

export interface WriteIdentity {
  uid: number;
  gid: number;
}

/**
 * Writes `data` to the file at `abs` (through links), creating missing folders. A file that
 * exists keeps its permission bits; a new one gets 0644. Both belong to `who` (the shell's user).
 */
export async function writeFileBytes(
  exec: ContainerExec,
  abs: string,
  data: Buffer,
  who: WriteIdentity,
  unseen: readonly string[] = [],
): Promise<{ real: string; created: boolean }> {
  refuseUnseen(abs, unseen, 'write');
  const t = await follow(exec, abs);
  refuseUnseen(t.real, unseen, 'write');
  const wrong = notAFile(t, 'write');
  if (wrong) throw wrong;
  if (t.real === '/') throw new FileToolError('/ is a directory, not a file');
  const mode = t.stat ? t.stat.mode & 0o7777 : 0o644;
  const rel = t.real.replace(/^\/+/, '');
  await exec.putArchive('/', singleFileTar(rel, data, { mode, ...who }), { copyUidGid: true }).catch((e: Error) => {
    throw new FileToolError(`cannot write ${t.path}: ${e.message}`);
  });
  return { real: t.real, created: t.stat === null };
}
