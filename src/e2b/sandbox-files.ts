/**
 * envd's file transfer (`GET` and `POST /files`) in a sandbox's container, through the engine's
 * archive API, streamed both ways: a file's bytes go straight between the HTTP request and the
 * engine, which reads and writes the container's filesystem itself (an exec's pipes through the
 * container's processes, under its CPU quota, carried a 50 MB file at a third of the speed). As
 * envd does, root acts (the archive API is root), a relative path is taken from the user's home,
 * and what is written (with the folders made for it) belongs to the user named (filesystem.ts);
 * a link is written and read through, as envd's open() follows it.
 *
 * A write first asks the container (the toolbox, one exec) for what only it knows: the user's
 * ids, the real path, the folders made, the mode and owner of a file that exists; the file then
 * goes in as a one-file tar. A body of unknown length (a chunked upload, a gzip one) is spooled to
 * a temporary file first: a tar header says the size before the bytes.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rm, stat as statFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import * as tar from 'tar';
import { runTrusted } from '../container/index.js';
import { ContainerGoneError, pathKind, type ContainerExec } from '../sandbox/container-exec.js';
import type { WriteInfo } from '../protocol/e2b.js';
import { asUser, checkedUser, FILE_SCRIPT_PRELUDE, scriptFailure } from './filesystem.js';
import { ConnectError } from './connect-rpc.js';

/** on stdout `uid gid mode path`: whom the file is to belong to, its mode (octal), the real path to write */
const PREPARE_WRITE = `${FILE_SCRIPT_PRELUDE}
[ -d "$p" ] && exit 3
if [ -L "$p" ]; then r=$(readlink -f -- "$p") && p=$r; fi
[ -d "$p" ] && exit 3
mkdirs "$(dirname -- "$p")" || exit 7
if [ -e "$p" ]; then
  [ -f "$p" ] || exit 5
  o=$(stat -c '%u %g %a' -- "$p") || exit 6
else
  o="$uid $gid 644"
fi
printf '%s %s\\n' "$o" "$p"
`;

/** on stdout the absolute path (a relative one from the user's home) */
const RESOLVE = `${FILE_SCRIPT_PRELUDE}
printf '%s\\n' "$p"
`;

/** what a write hands the engine at once */
const COALESCE_BYTES = 1024 * 1024;

/** how many links a read follows before it gives up (a loop) */
const MAX_LINKS = 16;

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
function httpFailure(code: number | null, p: string, stderr: string): FileTransferError {
  return transferErrorOf(scriptFailure(code, p, stderr));
}

/** a FileTransferError for a ConnectError of the same meaning */
export function transferErrorOf(e: ConnectError): FileTransferError {
  const status =
    e.code === 'not_found'
      ? 404
      : e.code === 'unauthenticated'
        ? 401
        : e.code === 'invalid_argument'
          ? 400
          : e.code === 'permission_denied'
            ? 403
            : e.code === 'unavailable'
              ? 502
              : 500;
  return new FileTransferError(status, e.message);
}

function gone(e: unknown): never {
  if (e instanceof ContainerGoneError) throw new FileTransferError(502, `the sandbox's container is not running: ${e.message}`);
  if (e instanceof ConnectError) throw transferErrorOf(e);
  throw e;
}

/** runs one of the scripts, as root for a named user (filesystem.ts) */
async function script(exec: ContainerExec, name: string, body: string, user: string | null, p: string): Promise<string> {
  try {
    const r = await runTrusted(exec, name, body, [user ?? '', p], asUser(checkedUser(user)));
    if (r.exitCode !== 0) throw httpFailure(r.exitCode, p, r.stderr);
    return r.stdout.toString('utf8').replace(/\n$/, '');
  } catch (e) {
    if (e instanceof FileTransferError) throw e;
    return gone(e);
  }
}

export interface FileDownload {
  size: number;
  /** the file's bytes, exactly `size` of them */
  body: Readable;
}

/**
 * Opens the file for reading: resolves with its size and a stream of its bytes once the engine
 * said it is a regular file (or rejects with a FileTransferError saying why not).
 */
export async function openDownload(exec: ContainerExec, user: string | null, p: string): Promise<FileDownload> {
  checkedUser(user);
  // a relative path needs the user's home, the container's word; an absolute one the engine's alone (root reads, as envd's does)
  let real = p.startsWith('/') ? path.posix.normalize(p) : await script(exec, 'e2b-resolve', RESOLVE, user, p);
  for (let hops = 0; ; hops++) {
    let st;
    try {
      st = await exec.stat(real);
    } catch (e) {
      return gone(e);
    }
    if (st === null) throw new FileTransferError(404, `${real} does not exist`);
    const kind = pathKind(st.mode);
    if (kind === 'symlink' && st.linkTarget && hops < MAX_LINKS) {
      real = st.linkTarget;
      continue;
    }
    if (kind === 'dir') throw new FileTransferError(400, `${real} is a folder, not a file`);
    if (kind !== 'file') throw new FileTransferError(400, `${real} is not a regular file`);
    break;
  }
  let archive: NodeJS.ReadableStream & { destroy(): void };
  try {
    archive = await exec.getArchive(real);
  } catch (e) {
    return gone(e);
  }
  return firstFileOf(archive, real);
}

/** the first entry of a tar stream, a regular file, as its size and a stream of its bytes */
function firstFileOf(archive: NodeJS.ReadableStream & { destroy(): void }, p: string): Promise<FileDownload> {
  return new Promise((resolve, reject) => {
    const body = new PassThrough();
    let found = false;
    const parser = new tar.Parser({
      onReadEntry: (entry) => {
        if (found) {
          entry.resume();
          return;
        }
        found = true;
        if (entry.type !== 'File' && entry.type !== 'OldFile' && entry.type !== 'ContiguousFile') {
          archive.destroy();
          reject(new FileTransferError(400, `${p} is not a regular file`));
          return;
        }
        resolve({ size: entry.size, body });
        entry.on('data', (c: Buffer) => {
          if (!body.write(c)) {
            archive.pause();
            body.once('drain', () => archive.resume());
          }
        });
        entry.on('end', () => {
          body.end();
          archive.destroy();
        });
      },
    });
    parser.on('error', (e: Error) => (found ? body.destroy(e) : reject(e)));
    archive.on('error', (e: Error) => (found ? body.destroy(e) : reject(e)));
    archive.on('end', () => {
      parser.end();
      if (!found) reject(new FileTransferError(404, `${p} does not exist`));
    });
    archive.on('data', (c: Buffer) => parser.write(c));
    // the reader went away: the engine's stream is let go
    body.on('close', () => archive.destroy());
  });
}

/** the tar stream of one file: its header, then `data` (exactly `size` bytes), the padding and the end */
function oneFileTar(name: string, data: Readable, size: number, owner: { uid: number; gid: number; mode: number }): Readable {
  const header: tar.HeaderData = { path: name, mode: owner.mode, uid: owner.uid, gid: owner.gid, size, mtime: new Date(), type: 'File' };
  const block = Buffer.alloc(512);
  const head: Buffer[] = [];
  // a name too long for the ustar header (or ids too large) also needs a PAX header, first
  if (new tar.Header(header).encode(block)) head.push(new tar.Pax(header).encode());
  head.push(block);
  return Readable.from(
    (async function* () {
      yield Buffer.concat(head);
      let sent = 0;
      // an HTTP body arrives in chunks of some KiB: the engine takes them a MiB at a time (4x faster for 16 KiB chunks)
      let held: Buffer[] = [];
      let heldBytes = 0;
      for await (const c of data as AsyncIterable<Buffer>) {
        sent += c.length;
        if (sent > size) throw new Error(`the body holds more than the ${size} bytes it announced`);
        held.push(c);
        heldBytes += c.length;
        if (heldBytes >= COALESCE_BYTES) {
          yield held.length === 1 ? held[0]! : Buffer.concat(held);
          held = [];
          heldBytes = 0;
        }
      }
      if (heldBytes > 0) yield Buffer.concat(held);
      if (sent !== size) throw new Error(`the body ended after ${sent} of the ${size} bytes it announced`);
      yield Buffer.alloc(((512 - (size % 512)) % 512) + 1024);
    })(),
  );
}

/**
 * Writes the file at `p` from `data` (`size` bytes, or null when unknown; `gzip`: compressed),
 * making its folders; resolves with what envd answers for it, and the bytes written.
 */
export async function writeFileStream(
  exec: ContainerExec,
  user: string | null,
  p: string,
  data: Readable,
  opts: { size: number | null; gzip: boolean },
): Promise<WriteInfo & { bytes: number }> {
  if (!p) throw new FileTransferError(400, 'the query names no path: POST /files?path=<file>');
  const prepared = await script(exec, 'e2b-prepare-write', PREPARE_WRITE, user, p);
  const m = /^(\d+) (\d+) ([0-7]+) (\/.*)$/s.exec(prepared);
  if (!m) throw new FileTransferError(500, `the sandbox said nothing usable of ${p}: ${JSON.stringify(prepared.slice(0, 200))}`);
  const owner = { uid: Number(m[1]), gid: Number(m[2]), mode: parseInt(m[3]!, 8) };
  const real = m[4]!;
  let spool: string | null = null;
  try {
    let source: Readable = opts.gzip ? data.pipe(createGunzip()) : data;
    let size = opts.gzip ? null : opts.size;
    if (size === null) {
      // a tar header says the size first: an upload of unknown length waits on this host's disk
      spool = await mkdtemp(path.join(tmpdir(), 'openenv-e2b-upload-'));
      const file = path.join(spool, 'body');
      await pipeline(source, createWriteStream(file));
      size = (await statFile(file)).size;
      source = createReadStream(file);
    }
    const dir = path.posix.dirname(real);
    try {
      await exec.putArchive(dir, oneFileTar(path.posix.basename(real), source, size, owner));
    } catch (e) {
      if (e instanceof ContainerGoneError) gone(e);
      throw new FileTransferError(data.destroyed || data.readableAborted ? 400 : 500, `${real} could not be written: ${(e as Error).message}`);
    }
    return { name: path.posix.basename(real), type: 'file', path: real, bytes: size };
  } finally {
    if (spool) await rm(spool, { recursive: true, force: true }).catch(() => undefined);
  }
}
