/**
 * envd's file transfer (`GET` and `POST /files`) in a sandbox's container, streamed both ways
 * through the toolbox: a read is one exec whose stdout is the file (its size said first, so the
 * answer carries a Content-Length), a write is one exec whose stdin is the file, written as it
 * arrives (waiting whenever the engine's connection is full: a 50 MB upload is never held in
 * memory). As envd does, root acts, a relative path is taken from the user's home, and what is
 * written (with the folders made for it) belongs to the user named (filesystem.ts).
 */
import { createGunzip } from 'node:zlib';
import { PassThrough, type Readable } from 'node:stream';
import { runTrusted, toolboxOf } from '../container/index.js';
import { toolboxCommand } from '../sandbox/toolbox.js';
import { ContainerGoneError, type ContainerExec, type ExecProcess } from '../sandbox/container-exec.js';
import type { WriteInfo } from '../protocol/e2b.js';
import { checkedUser, FILE_SCRIPT_PRELUDE, scriptFailure } from './filesystem.js';
import { ConnectError } from './connect-rpc.js';

/** on stdout: the size, a newline, then the file's bytes */
const READ = `${FILE_SCRIPT_PRELUDE}
[ -d "$p" ] && exit 3
[ -e "$p" ] || exit 4
[ -f "$p" ] || exit 5
[ -r "$p" ] || exit 6
size=$(stat -L -c %s -- "$p") || exit 6
printf '%s\\n' "$size"
exec cat -- "$p"
`;

/** stdin is the file; on stdout, its absolute path once written */
const WRITE = `${FILE_SCRIPT_PRELUDE}
umask 022
[ -d "$p" ] && exit 3
mkdirs "$(dirname -- "$p")" || exit 7
new=1; [ -e "$p" ] && new=0
cat > "$p" || exit 6
[ "$new" = 1 ] && owned "$p"
printf '%s\\n' "$p"
`;

/** An HTTP answer of the file transfer's failures, in envd's shape (the SDKs map the status). */
export class FileTransferError extends Error {
  override readonly name = 'FileTransferError';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** a script's failure as envd's HTTP status: 400 a bad path, 401 no such user, 404 missing, 403 refused */
function httpFailure(code: number | null, path: string, stderr: string): FileTransferError {
  const e = scriptFailure(code, path, stderr);
  const status =
    e.code === 'not_found' ? 404 : e.code === 'unauthenticated' ? 401 : e.code === 'invalid_argument' ? 400 : e.code === 'permission_denied' ? 403 : 500;
  return new FileTransferError(status, e.message);
}

function gone(e: unknown): never {
  if (e instanceof ContainerGoneError) throw new FileTransferError(502, `the sandbox's container is not running: ${e.message}`);
  throw e;
}

export interface FileDownload {
  size: number;
  /** the file's bytes, exactly `size` of them (the stream errors when the file shrank meanwhile) */
  body: Readable;
}

/**
 * Opens the file for reading: resolves with its size and a stream of its bytes once the sandbox
 * said it exists (or rejects with a FileTransferError saying why not).
 */
export async function openDownload(exec: ContainerExec, user: string | null, path: string): Promise<FileDownload> {
  const body = new PassThrough();
  const toolbox = toolboxOf(exec, 'reading a file');
  let head = Buffer.alloc(0);
  let size: number | null = null;
  let sent = 0;
  let stderr = '';
  let settle!: (v: FileDownload | Error) => void;
  const ready = new Promise<FileDownload | Error>((r) => (settle = r));
  let proc: ExecProcess | null = null;
  try {
    proc = await exec.start(
      { cmd: toolboxCommand(toolbox, 'e2b-read', READ, [user ?? '', path]), ...(checkedUser(user) !== null ? { user: '0' } : {}) },
      {
        stdout: (c) => {
          if (size === null) {
            head = Buffer.concat([head, c]);
            const nl = head.indexOf(0x0a);
            if (nl < 0) return;
            size = Number(head.subarray(0, nl).toString('utf8'));
            settle({ size, body });
            c = head.subarray(nl + 1);
          }
          const take = c.subarray(0, Math.max(0, size - sent));
          sent += take.length;
          if (take.length > 0 && !body.write(take)) {
            proc?.pause();
            body.once('drain', () => proc?.resume());
          }
        },
        stderr: (c) => {
          if (stderr.length < 4096) stderr += c.toString('utf8');
        },
        end: (e) => {
          if (size === null) {
            void (async () => settle(e ?? httpFailure((await proc?.exitCode()) ?? null, path, stderr.trim())))();
            return;
          }
          if (e || sent < size) body.destroy(e ?? new Error(`${path} shrank while it was read (${sent} of ${size} bytes)`));
          else body.end();
        },
      },
    );
  } catch (e) {
    gone(e);
  }
  body.on('close', () => proc?.close());
  const got = await ready;
  if (got instanceof Error) {
    proc.close();
    throw got;
  }
  return got;
}

/**
 * Writes `data` (a stream of the file's bytes; `gzip`: compressed) to the file at `path`, making
 * its folders; resolves with what envd answers for it.
 */
export async function writeFileStream(
  exec: ContainerExec,
  user: string | null,
  path: string,
  data: Readable,
  gzip = false,
): Promise<WriteInfo & { bytes: number }> {
  if (!path) throw new FileTransferError(400, 'the query names no path: POST /files?path=<file>');
  const toolbox = toolboxOf(exec, 'writing a file');
  const source = gzip ? data.pipe(createGunzip()) : data;
  let out = '';
  let stderr = '';
  let finished!: (e?: Error) => void;
  const ended = new Promise<Error | undefined>((r) => (finished = r));
  let proc: ExecProcess;
  try {
    proc = await exec.start(
      { cmd: toolboxCommand(toolbox, 'e2b-write', WRITE, [user ?? '', path]), ...(checkedUser(user) !== null ? { user: '0' } : {}), stdin: true },
      {
        stdout: (c) => (out += c.toString('utf8')),
        stderr: (c) => {
          if (stderr.length < 4096) stderr += c.toString('utf8');
        },
        end: (e) => finished(e),
      },
    );
  } catch (e) {
    gone(e);
  }
  let exited = false;
  let bytes = 0;
  void ended.then(() => (exited = true));
  try {
    for await (const chunk of source as AsyncIterable<Buffer>) {
      if (exited) break;
      bytes += chunk.length;
      if (!proc.write(chunk)) await Promise.race([proc.drained(), ended]);
    }
  } catch (e) {
    proc.close();
    throw new FileTransferError(400, `the upload of ${path} broke off: ${(e as Error).message}`);
  }
  proc.endInput();
  const e = await ended;
  if (e) throw new FileTransferError(502, `the sandbox's connection ended while ${path} was written: ${e.message}`);
  const code = await proc.exitCode();
  if (code !== 0) {
    // the client may still be sending: it is not read further
    data.resume();
    throw httpFailure(code, path, stderr.trim());
  }
  const written = out.trim() || path;
  return { name: written.slice(written.lastIndexOf('/') + 1), type: 'file', path: written, bytes };
}

/** GET /health's look: an exec in the container answers */
export async function sandboxAnswers(exec: ContainerExec): Promise<boolean> {
  try {
    const r = await runTrusted(exec, 'e2b-health', 'exit 0');
    return r.exitCode === 0;
  } catch {
    return false;
  }
}

/** a FileTransferError for a ConnectError of the same meaning */
export function transferErrorOf(e: ConnectError): FileTransferError {
  return new FileTransferError(e.code === 'unauthenticated' ? 401 : e.code === 'invalid_argument' ? 400 : e.code === 'not_found' ? 404 : 500, e.message);
}
