/**
 * Files in an env's container as the agent's user: the file tools read and write through the
 * toolbox (src/sandbox/toolbox.ts), run as that user (a numeric uid:gid resolved for the episode:
 * users.ts), so the kernel decides what they may touch exactly as it does for the agent's own
 * shell: a file the user cannot read is refused, a folder it cannot write stays untouched, links
 * lead where they lead for that user. Never through the engine's archive API, which acts as root
 * whatever the user. Byte for byte: no newline or encoding is changed.
 */
import path from 'node:path';
import type { ContainerExec } from '../sandbox/container-exec.js';
import { runTrusted } from './run.js';

/** A file tool's own failure (missing path, a folder, no permission, …): the model's to read, the episode goes on. */
export class FileToolError extends Error {
  override readonly name = 'FileToolError';
}

/** An absolute, normalised path: `p` as it is when absolute, else relative to `cwd`. */
export function resolvePath(cwd: string, p: string): string {
  return path.posix.normalize(path.posix.isAbsolute(p) ? p : path.posix.join(cwd, p));
}

export interface FileSlice {
  /** the file's size in bytes */
  size: number;
  offset: number;
  /** the bytes [offset, offset + data.length) */
  data: Buffer;
  /** where the path's links led */
  real: string;
}

/** exit codes of the scripts below, each a failure the model reads */
const WHY: Record<number, (p: string, doing: 'read' | 'write') => string> = {
  3: (p, doing) => `${p} is a directory, not a file${doing === 'read' ? `: list it with bash (ls -la ${p})` : ''}`,
  4: (p) => `no such file: ${p}`,
  5: (p) => `${p} is not a regular file (a device, pipe or socket): use bash for it`,
  6: (p, doing) => `cannot ${doing} ${p}: permission denied`,
  7: (p) => `cannot write ${p}: its folder could not be made`,
};

function failure(code: number | null, p: string, doing: 'read' | 'write', stderr: string): FileToolError {
  const known = code !== null ? WHY[code] : undefined;
  if (known) return new FileToolError(known(p, doing));
  const said = stderr.replace(/^[^:]*: /, '').split('\n')[0];
  return new FileToolError(`cannot ${doing} ${p}: ${said || `exit code ${code}`}`);
}

/**
 * $1 the path, $2 the offset, $3 the most bytes: on stderr-free stdout, the real path, the size,
 * then the bytes. Its tests are the shell's own (`-d`, `-f`, `-r`: what the user may do).
 */
const READ_SCRIPT = `
p=$1
[ -d "$p" ] && exit 3
[ -e "$p" ] || exit 4
[ -f "$p" ] || exit 5
[ -r "$p" ] || exit 6
real=$(readlink -f -- "$p") || exit 4
size=$(stat -L -c %s -- "$p") || exit 6
printf '%s\\n%s\\n' "$real" "$size"
exec dd if="$p" bs=65536 iflag=skip_bytes,count_bytes skip="$2" count="$3" 2>/dev/null
`;

/** Reads at most `limit` bytes of the file at `abs` from `offset`, as `user` (uid:gid). */
export async function readFileSlice(exec: ContainerExec, abs: string, offset: number, limit: number, user: string): Promise<FileSlice> {
  const r = await runTrusted(exec, 'openenv-read', READ_SCRIPT, [abs, String(offset), String(limit)], { user, maxStdout: limit + 8192 });
  if (r.exitCode !== 0) throw failure(r.exitCode, abs, 'read', r.stderr);
  const first = r.stdout.indexOf(0x0a);
  const second = r.stdout.indexOf(0x0a, first + 1);
  const size = Number(r.stdout.subarray(first + 1, second).toString('utf8'));
  if (first < 0 || second < 0 || !Number.isInteger(size)) throw new FileToolError(`cannot read ${abs}: the toolbox said nothing of it`);
  return { size, offset, data: Buffer.from(r.stdout.subarray(second + 1, second + 1 + limit)), real: r.stdout.subarray(0, first).toString('utf8') };
}

/**
 * $1 the path, $2 its byte count (read from stdin): the folder made, then the file written (a new
 * one 0644, one that exists keeps its bits); says the real path and whether it was new.
 */
const WRITE_SCRIPT = `
umask 022
p=$1
[ -d "$p" ] && exit 3
if [ -e "$p" ] || [ -L "$p" ]; then
  [ -e "$p" ] && { [ -f "$p" ] || exit 5; }
  new=0
else
  new=1
fi
dir=$(dirname -- "$p")
[ -d "$dir" ] || mkdir -p -- "$dir" || exit 7
real=$(readlink -f -- "$p") || real=$p
head -c "$2" > "$p" || exit 6
printf '%s\\n%s\\n' "$real" "$new"
`;

/**
 * Writes `data` to the file at `abs` (through links), creating missing folders, as `user`
 * (uid:gid): what it creates belongs to that user.
 */
export async function writeFileBytes(exec: ContainerExec, abs: string, data: Buffer, user: string): Promise<{ real: string; created: boolean }> {
  if (abs === '/') throw new FileToolError('/ is a directory, not a file');
  const r = await runTrusted(exec, 'openenv-write', WRITE_SCRIPT, [abs, String(data.length)], { user, stdin: data });
  if (r.exitCode !== 0) throw failure(r.exitCode, abs, 'write', r.stderr);
  const [real, created] = r.stdout.toString('utf8').split('\n');
  return { real: real || abs, created: created === '1' };
}
