/**
 * Files in a container through the engine's archive API, read and written as tar with the `tar`
 * package: byte for byte (no newline or encoding is changed), bounded (a read stops pulling the
 * archive once it has its bytes), symbolic links followed as a terminal would. In a folder the
 * archive API cannot see (the env's own tmpfs at /tmp under a read-only root), through processes
 * in the container instead, as the shell's user: `realpath` and the shell's own tests to look,
 * `tail | head` to read, `head -c N >` to write, just as byte for byte.
 */
import path from 'node:path';
import * as tar from 'tar';
import { pathKind, singleFileTar, type ContainerExec, type ExecProcess, type PathStat } from '../../sandbox/container-exec.js';

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

/** whether `p` lies in one of the folders the archive API cannot see */
function inUnseen(p: string, unseen: readonly string[]): boolean {
  return unseen.some((m) => p === m || p.startsWith(`${m.replace(/\/+$/, '')}/`));
}

/** How the file tools reach a container's files besides the archive API. */
export interface FileAccess {
  /** folders the archive API cannot see: paths in them are read and written by processes in the container */
  unseen?: readonly string[];
  /** the shell's user, whom those processes run as */
  who?: () => Promise<WriteIdentity>;
}

/** what a process in the container says of a path: where its links lead, and what is there */
interface SeenByProcess {
  real: string;
  /** unreadable: a regular file the shell's user cannot read */
  kind: 'file' | 'unreadable' | 'dir' | 'other' | 'missing';
  size: number;
}

/** runs `cmd` to its end as `user`, `stdin` written to it; its stdout as bytes (at most `max`), stderr as text, exit code */
async function runBytes(
  exec: ContainerExec,
  cmd: string[],
  user: string,
  max: number,
  stdin?: Buffer,
): Promise<{ out: Buffer; err: string; code: number | null }> {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let got = 0;
  let finished!: (e?: Error) => void;
  const ended = new Promise<Error | undefined>((resolve) => (finished = resolve));
  const proc: ExecProcess = await exec.start(
    { cmd, user, ...(stdin ? { stdin: true } : {}) },
    {
      stdout: (c) => {
        if (got < max) out.push(c.subarray(0, max - got));
        got += c.length;
      },
      stderr: (c) => err.push(c),
      end: (e) => finished(e),
    },
  );
  if (stdin && stdin.length) proc.write(stdin);
  const e = await ended;
  if (e) throw e;
  return { out: Buffer.concat(out), err: Buffer.concat(err).toString('utf8').trim(), code: await proc.exitCode() };
}

/**
 * where $1's links lead, then what is there (the shell's own tests and `wc -c`, not `stat`, which
 * fails under some gVisor versions)
 */
const STAT_SCRIPT = [
  'r=$(realpath -m -- "$1") || exit 3',
  'printf \'%s\\n\' "$r"',
  'if [ -d "$1" ]; then echo dir; elif [ -f "$1" ] && [ -r "$1" ]; then echo "file $(wc -c < "$1")"; elif [ -f "$1" ]; then echo unreadable; elif [ -e "$1" ]; then echo other; else echo missing; fi',
].join('\n');

/** where `abs` leads and what is there, as a process in the container sees it */
async function statByProcess(exec: ContainerExec, abs: string, user: string): Promise<SeenByProcess> {
  const r = await runBytes(exec, ['sh', '-c', STAT_SCRIPT, 'openenv-stat', abs], user, 64 * 1024);
  const [real, what] = r.out.toString('utf8').split('\n');
  if (r.code !== 0 || !real || what === undefined) throw new FileToolError(`cannot look at ${abs}: ${r.err || `exit code ${r.code}`}`);
  const [kind, size] = what.split(' ');
  if (kind === 'file') return { real, kind, size: Number(size) };
  return { real, kind: kind === 'dir' || kind === 'missing' || kind === 'unreadable' ? kind : 'other', size: 0 };
}

function processNotAFile(p: string, seen: SeenByProcess, doing: 'read' | 'write'): FileToolError | null {
  if (seen.kind === 'dir') return new FileToolError(`${p} is a directory, not a file${doing === 'read' ? `: list it with bash (ls -la ${p})` : ''}`);
  if (seen.kind === 'other') return new FileToolError(`${p} is not a regular file (a device, pipe or socket): use bash for it`);
  return null;
}

const identity = async (access: FileAccess) => {
  const who = (await access.who?.()) ?? { uid: 0, gid: 0 };
  return `${who.uid}:${who.gid}`;
};

async function readByProcess(exec: ContainerExec, abs: string, offset: number, limit: number, access: FileAccess): Promise<FileSlice> {
  const user = await identity(access);
  const seen = await statByProcess(exec, abs, user);
  if (seen.kind === 'missing') throw new FileToolError(`no such file: ${abs}`);
  const wrong = processNotAFile(abs, seen, 'read');
  if (wrong) throw wrong;
  if (seen.kind === 'unreadable') throw new FileToolError(`cannot read ${abs}: permission denied`);
  const r = await runBytes(
    exec,
    ['sh', '-c', 'tail -c +"$2" -- "$1" | head -c "$3"', 'openenv-read', seen.real, String(offset + 1), String(limit)],
    user,
    limit,
  );
  if (r.code !== 0) throw new FileToolError(`cannot read ${abs}: ${r.err || `exit code ${r.code}`}`);
  return { size: seen.size, offset, data: r.out, real: seen.real };
}

async function writeByProcess(exec: ContainerExec, abs: string, data: Buffer, access: FileAccess): Promise<{ real: string; created: boolean }> {
  const user = await identity(access);
  const seen = await statByProcess(exec, abs, user);
  const wrong = processNotAFile(abs, seen, 'write');
  if (wrong) throw wrong;
  // head stops after the file's bytes: it needs no end of its input
  const script = 'mkdir -p -- "$(dirname -- "$1")" && head -c "$2" > "$1"';
  const r = await runBytes(exec, ['sh', '-c', script, 'openenv-write', seen.real, String(data.length)], user, 64 * 1024, data);
  if (r.code !== 0) throw new FileToolError(`cannot write ${abs}: ${r.err || `exit code ${r.code}`}`);
  return { real: seen.real, created: seen.kind === 'missing' };
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
export async function readFileSlice(exec: ContainerExec, abs: string, offset: number, limit: number, access: FileAccess = {}): Promise<FileSlice> {
  const unseen = access.unseen ?? [];
  if (inUnseen(abs, unseen)) return readByProcess(exec, abs, offset, limit, access);
  const t = await follow(exec, abs);
  if (inUnseen(t.real, unseen)) return readByProcess(exec, t.real, offset, limit, access);
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
  const access: FileAccess = { unseen, who: async () => who };
  if (inUnseen(abs, unseen)) return writeByProcess(exec, abs, data, access);
  const t = await follow(exec, abs);
  if (inUnseen(t.real, unseen)) return writeByProcess(exec, t.real, data, access);
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
