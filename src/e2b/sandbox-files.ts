/**
 * envd's file transfer (`GET` and `POST /files`) in a sandbox's container, streamed both ways: a
 * read, and a write of known length, through the engine's archive API (the engine reads and
 * writes the container's filesystem itself); a write of unknown length through one exec of the
 * toolbox (below). As envd does, root acts, a relative path is taken from the user's home, and
 * what is written (with the folders made for it) belongs to the user named (filesystem.ts); a
 * link is written and read through, as envd's open() follows it.
 *
 * A write of known length first asks the container (the toolbox, one exec) for what only it
 * knows: the user's ids, the real path, the folders made, the mode and owner of a file that
 * exists; the file then goes in as a one-file tar. A body of unknown length (a chunked upload, a
 * gzip one, a multipart part: what the JS SDK always sends) cannot (a tar header says the size
 * before the bytes): it streams into one exec of the toolbox as it arrives, its stdin written
 * to a temporary file beside the target and put in place (owner, mode, rename) only once the
 * whole body came (STREAM_WRITE), so a broken upload leaves the file as it was. It replaced a
 * spool to the host's disk, then a tar: as fast on its own (50 MB in one CPU's sandbox, 246 ms
 * against 252 ms; the bare putArchive 124 ms), but it writes while the body arrives instead of
 * after, holds nothing on the host, and costs the server less CPU (a 50 MB upload: about 130 ms
 * against 300 ms, docs/e2b.md, Measured).
 *
 * Long because envd's transfer both ways is one protocol over one container: the scripts run in it,
 * the tar that carries a file and the streamed write must agree on paths, owners and modes; the
 * file system calls are filesystem.ts's.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import * as tar from 'tar';
import { entryKind, runTrusted, toolboxOf } from '../container/index.js';
import { E2B } from '../defaults.js';
import { ContainerGoneError, pathKind, type ContainerExec, type ExecProcess } from '../sandbox/container-exec.js';
import { toolboxCommand } from '../sandbox/toolbox.js';
import type { WriteInfo } from '../protocol/e2b.js';
import { asUser, checkedUser, FILE_SCRIPT_PRELUDE, scriptFailure } from './filesystem.js';
import { ConnectError } from './connect-rpc.js';

/** where a write goes: the real path ($p, through a link; its folders made as the user) and, in $o, `uid gid mode` it is to have (an existing file's, else the user's and 644) */
const WRITE_TARGET = `${FILE_SCRIPT_PRELUDE}
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
`;

/** on stdout `uid gid mode path`: whom the file is to belong to, its mode (octal), the real path to write */
const PREPARE_WRITE = `${WRITE_TARGET}printf '%s %s\\n' "$o" "$p"
`;

/** the bytes the server puts after a streamed body: a nonce of its own (hex), which the body cannot know */
const TRAILER_BYTES = 32;

/**
 * A body of unknown length on stdin, then the trailer ($1): written to a temporary file in the
 * target's folder, checked to end with the trailer (else the upload broke: exit 12, the
 * temporary file removed, the target untouched), cut to the body, given the owner and mode a
 * write gives (PREPARE_WRITE's: an existing file's, else the user's and 644) and renamed over the
 * target. On stdout `size path`. The toolbox's own cat, as every step here.
 */
const STREAM_WRITE = `${WRITE_TARGET}set -- "$1" $o
t=$(mktemp -- "$(dirname -- "$p")/.e2b-upload.XXXXXX") || exit 6
trap 'rm -f -- "$t"' EXIT
cat > "$t" || exit 6
n=$(stat -c %s -- "$t") || exit 6
[ "$n" -ge ${TRAILER_BYTES} ] && [ "$(tail -c ${TRAILER_BYTES} -- "$t")" = "$1" ] || exit 12
n=$((n - ${TRAILER_BYTES}))
truncate -s "$n" -- "$t" || exit 6
if [ "$(id -u)" = 0 ]; then chown "$2:$3" -- "$t" || exit 6; fi
chmod "$4" -- "$t" || exit 6
mv -f -- "$t" "$p" || exit 6
printf '%s %s\\n' "$n" "$p"
`;

/** on stdout the absolute path (a relative one from the user's home) */
const RESOLVE = `${FILE_SCRIPT_PRELUDE}
printf '%s\\n' "$p"
`;

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

/** entries of a tar stream that describe the next one (PAX and GNU headers): their data is read past */
const META_ENTRIES = new Set(['ExtendedHeader', 'GlobalExtendedHeader', 'NextFileHasLongPath', 'NextFileHasLongLinkpath']);
/** the most of a PAX header's data read (where a size past 8 GiB is said); larger ones are refused */
const MAX_PAX_BYTES = 64 * 1024;

/**
 * The first regular file of a tar stream (what the engine's getArchive of a file sends: its
 * entry, after a PAX header when its name or size needs one), as its size and a stream of its
 * bytes. Headers are read as they come; the file's bytes are handed on as slices of the engine's
 * own chunks (no copy, no parser between), the engine's stream paused while the reader is slow
 * and let go at the file's end or when the reader goes away.
 */
function firstFileOf(archive: NodeJS.ReadableStream & { destroy(): void }, p: string): Promise<FileDownload> {
  return new Promise((resolve, reject) => {
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    /** bytes of a describing entry (and its padding) still to read past, and whether they are a PAX header's */
    let skip = 0;
    let paxData: Buffer[] | null = null;
    let sizeOverride: number | null = null;
    let body: Readable | null = null;
    let remaining = 0;
    const stop = (e: Error) => {
      archive.removeListener('data', onData);
      archive.destroy();
      if (body) body.destroy(e);
      else reject(e);
    };
    /** the next `n` bytes of the header blocks, once they are all there */
    const take = (n: number): Buffer | null => {
      if (pendingBytes < n) return null;
      const all = pending.length === 1 ? pending[0]! : Buffer.concat(pending);
      pending = all.length > n ? [all.subarray(n)] : [];
      pendingBytes -= n;
      return all.subarray(0, n);
    };
    const emit = (chunk: Buffer): void => {
      const n = Math.min(remaining, chunk.length);
      remaining -= n;
      const more = body!.push(n === chunk.length ? chunk : chunk.subarray(0, n));
      if (remaining === 0) {
        body!.push(null);
        archive.removeListener('data', onData);
        archive.destroy();
      } else if (!more) archive.pause();
    };
    const onData = (chunk: Buffer) => {
      if (body) return emit(chunk);
      pending.push(chunk);
      pendingBytes += chunk.length;
      for (;;) {
        if (skip > 0) {
          const n = Math.min(skip, pendingBytes);
          const part = take(n)!;
          skip -= n;
          if (paxData) paxData.push(part);
          if (skip > 0) return;
          if (paxData) sizeOverride = tar.Pax.parse(Buffer.concat(paxData).toString('utf8'), undefined, false).size ?? sizeOverride;
          paxData = null;
          continue;
        }
        const block = take(512);
        if (!block) return;
        if (block.every((b) => b === 0)) return stop(new FileTransferError(404, `${p} does not exist`));
        const h = new tar.Header(block);
        if (!h.cksumValid) return stop(new Error(`the engine's archive of ${p} is not a tar stream`));
        const size = h.size ?? 0;
        if (META_ENTRIES.has(h.type ?? '')) {
          if (h.type === 'ExtendedHeader' && size > MAX_PAX_BYTES) return stop(new Error(`the engine's archive of ${p} has a PAX header of ${size} bytes`));
          skip = Math.ceil(size / 512) * 512;
          paxData = h.type === 'ExtendedHeader' && skip > 0 ? [] : null;
          continue;
        }
        if (entryKind(h.type ?? '') !== 'file') return stop(new FileTransferError(400, `${p} is not a regular file`));
        remaining = sizeOverride ?? size;
        body = new Readable({ highWaterMark: E2B.files.readBufferBytes, read: () => void archive.resume() });
        // its reader sees a failure through its own listener; one before the reader came is no crash of the server
        body.on('error', () => undefined);
        // the reader went away: the engine's stream is let go
        body.once('close', () => {
          archive.removeListener('data', onData);
          archive.destroy();
        });
        resolve({ size: remaining, body });
        const rest = pending;
        pending = [];
        if (remaining === 0) {
          body.push(null);
          archive.removeListener('data', onData);
          archive.destroy();
          return;
        }
        for (const c of rest) if (remaining > 0) emit(c);
        return;
      }
    };
    archive.on('data', onData);
    archive.on('error', (e: Error) => stop(e));
    archive.on('end', () => {
      if (!body) reject(new FileTransferError(404, `${p} does not exist`));
      else if (remaining > 0) body.destroy(new Error(`the engine's archive of ${p} ended ${remaining} bytes before the file's end`));
    });
  });
}

/** the tar stream of one file: its header, then `data` (exactly `size` bytes), the padding and the end */
function oneFileTar(name: string, data: AsyncIterable<Buffer>, size: number, owner: { uid: number; gid: number; mode: number }): Readable {
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
      // the engine takes a body of small chunks (a slow upload's) 4x faster gathered to a MiB; a
      // chunk as large as a socket read goes as it is (no copy)
      let held: Buffer[] = [];
      let heldBytes = 0;
      const flush = () => {
        const out = held.length === 1 ? held[0]! : Buffer.concat(held);
        held = [];
        heldBytes = 0;
        return out;
      };
      for await (const c of data) {
        sent += c.length;
        if (sent > size) throw new Error(`the body holds more than the ${size} bytes it announced`);
        if (c.length >= E2B.files.wholeChunkBytes) {
          if (heldBytes > 0) yield flush();
          yield c;
          continue;
        }
        held.push(c);
        heldBytes += c.length;
        if (heldBytes >= E2B.files.coalesceBytes) yield flush();
      }
      if (heldBytes > 0) yield flush();
      if (sent !== size) throw new Error(`the body ended after ${sent} of the ${size} bytes it announced`);
      yield Buffer.alloc(((512 - (size % 512)) % 512) + 1024);
    })(),
  );
}

/** where a write goes and whom it belongs to */
interface WriteTarget {
  uid: number;
  gid: number;
  mode: number;
  /** the real path (through a link) */
  real: string;
}

/**
 * Where a write goes, as the container says it (PREPARE_WRITE, one exec), or, for root's new file
 * at an absolute path in a folder that exists, as the engine's archive API says it without an
 * exec (the engine's stat: a fortieth of an exec's time): root's, mode 644. Anything else (a
 * file that exists, whose owner only the container says; a link; a folder to make; a user whose
 * ids only the container knows) is the script's.
 */
async function writeTarget(exec: ContainerExec, user: string | null, p: string): Promise<WriteTarget> {
  const real = path.posix.normalize(p);
  if (user === 'root' && p.startsWith('/') && real !== '/') {
    // a container that is gone says so; any other doubt is the script's to settle
    const isNew = await newInFolder(exec, real).catch((e: unknown) => (e instanceof ContainerGoneError ? gone(e) : false));
    if (isNew) return { uid: 0, gid: 0, mode: 0o644, real };
  }
  const prepared = await script(exec, 'e2b-prepare-write', PREPARE_WRITE, user, p);
  const m = /^(\d+) (\d+) ([0-7]+) (\/.*)$/s.exec(prepared);
  if (!m) throw new FileTransferError(500, `the sandbox said nothing usable of ${p}: ${JSON.stringify(prepared.slice(0, 200))}`);
  return { uid: Number(m[1]), gid: Number(m[2]), mode: parseInt(m[3]!, 8), real: m[4]! };
}

/** nothing is at `real`, and its folder exists (not through a link) */
async function newInFolder(exec: ContainerExec, real: string): Promise<boolean> {
  if ((await exec.stat(real)) !== null) return false;
  const parent = await exec.stat(path.posix.dirname(real));
  return parent !== null && pathKind(parent.mode) === 'dir';
}

/**
 * A body's first bytes, read while the sandbox is asked where they go (at most `max`, in memory:
 * the request is then paused), handed on first when the write begins, the rest read from there.
 */
class ReadAhead {
  private readonly held: Buffer[] = [];
  private bytes = 0;
  private ended = false;
  private error: Error | null = null;
  private readonly onData = (c: Buffer) => {
    this.held.push(c);
    this.bytes += c.length;
    if (this.bytes >= this.max) this.data.pause();
  };
  private readonly onEnd = () => (this.ended = true);
  private readonly onError = (e: Error) => (this.error = e);

  constructor(
    private readonly data: Readable,
    private readonly max: number,
  ) {
    data.on('data', this.onData);
    data.once('end', this.onEnd);
    data.once('error', this.onError);
  }

  /** stops reading ahead */
  stop(): void {
    this.data.off('data', this.onData);
    this.data.off('end', this.onEnd);
    this.data.off('error', this.onError);
    this.data.pause();
  }

  /** what was read ahead, then the rest of the body */
  async *bytesOf(): AsyncGenerator<Buffer> {
    this.stop();
    const { ended, error } = this;
    // handed on, not kept: what was read ahead is let go as the engine takes it
    const held = this.held.splice(0);
    yield* held;
    if (error) throw error;
    if (!ended) yield* this.data as AsyncIterable<Buffer>;
  }
}

/**
 * Hands `data` to the process's stdin as it comes, pausing it while the engine is behind; resolves
 * at its end, or when the process ended first (a script that stopped early: its exit code says
 * why; the rest of the body is left unread, not destroyed), with the body's failure if it broke.
 */
function pump(data: Readable, proc: ExecProcess, ended: Promise<unknown>): Promise<Error | null> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (e: Error | null) => {
      if (settled) return;
      settled = true;
      data.off('data', onData);
      data.off('end', onEnd);
      data.off('error', onError);
      data.off('close', onClose);
      if (e === null && !data.readableEnded) data.pause();
      resolve(e);
    };
    const onData = (c: Buffer) => {
      if (proc.write(c)) return;
      data.pause();
      void Promise.race([proc.drained(), ended]).then(() => {
        if (!settled) data.resume();
      });
    };
    const onEnd = () => done(null);
    const onError = (e: Error) => done(e);
    const onClose = () => done(data.readableEnded ? null : new Error('the request was closed before its end'));
    data.on('data', onData);
    data.once('end', onEnd);
    data.once('error', onError);
    data.once('close', onClose);
    void ended.then(() => done(null));
  });
}

/**
 * Writes a body of unknown length (STREAM_WRITE, one exec): its bytes go to the exec's stdin as
 * they arrive (the request paused while the engine is behind), then the trailer; the script puts
 * the file in place only when the trailer came after them. A body that breaks drops the exec's
 * connection (its stdin ends without the trailer: nothing is put in place).
 */
async function streamWrite(exec: ContainerExec, user: string | null, p: string, data: Readable): Promise<{ real: string; size: number }> {
  const trailer = randomBytes(TRAILER_BYTES / 2).toString('hex');
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let finished!: (e?: Error) => void;
  const ended = new Promise<Error | undefined>((resolve) => (finished = resolve));
  let over = false;
  void ended.then(() => (over = true));
  let proc: ExecProcess;
  try {
    const cmd = toolboxCommand(toolboxOf(exec, 'e2b-stream-write'), 'e2b-stream-write', STREAM_WRITE, [user ?? '', p, trailer]);
    proc = await exec.start(
      { cmd, ...asUser(checkedUser(user)), stdin: true },
      {
        stdout: (c) => void (out.length < 64 && out.push(c)),
        stderr: (c) => void (err.length < 64 && err.push(c)),
        end: (e) => finished(e),
      },
    );
  } catch (e) {
    return gone(e);
  }
  const broken = await pump(data, proc, ended);
  if (broken) {
    proc.close();
    await ended;
    throw new FileTransferError(400, `the upload of ${p} did not arrive whole (nothing was written): ${broken.message}`);
  }
  if (!over) {
    proc.write(trailer);
    proc.endInput();
  }
  const e = await ended;
  if (e) return gone(e);
  let code: number | null;
  try {
    code = await proc.exitCode();
  } catch (x) {
    return gone(x);
  }
  const stderr = Buffer.concat(err).toString('utf8').trim();
  if (code === 12) throw new FileTransferError(400, `the upload of ${p} did not arrive whole (nothing was written)`);
  if (code !== 0) throw httpFailure(code, p, stderr);
  const m = /^(\d+) (\/.*)\n$/s.exec(Buffer.concat(out).toString('utf8'));
  if (!m) throw new FileTransferError(500, `the sandbox said nothing usable of ${p}: ${JSON.stringify(Buffer.concat(out).toString('utf8').slice(0, 200))}`);
  return { size: Number(m[1]), real: m[2]! };
}

/**
 * Writes the file at `p` from `data` (`size` bytes, or null when unknown; `gzip`: compressed),
 * making its folders; resolves with what envd answers for it, and the bytes written. Of known
 * length: the sandbox is asked where the file goes (one exec) while the body's first bytes are
 * read ahead (E2B.files.readAheadBytes), then it goes in as a tar. Of unknown length: streamed
 * through one exec as it arrives (streamWrite).
 */
export async function writeFileStream(
  exec: ContainerExec,
  user: string | null,
  p: string,
  data: Readable,
  opts: { size: number | null; gzip: boolean },
): Promise<WriteInfo & { bytes: number }> {
  if (!p) throw new FileTransferError(400, 'the query names no path: POST /files?path=<file>');
  if (opts.gzip || opts.size === null) {
    const body = opts.gzip ? data.pipe(createGunzip()) : data;
    // a broken request breaks the gunzip too
    if (opts.gzip) data.once('error', (e) => body.destroy(e));
    const { real, size } = await streamWrite(exec, user, p, body);
    return { name: path.posix.basename(real), type: 'file', path: real, bytes: size };
  }
  const ahead = new ReadAhead(data, E2B.files.readAheadBytes);
  let target: WriteTarget;
  try {
    target = await writeTarget(exec, user, p);
  } finally {
    ahead.stop();
  }
  const { real, ...owner } = target;
  const size = opts.size;
  const dir = path.posix.dirname(real);
  try {
    await exec.putArchive(dir, oneFileTar(path.posix.basename(real), ahead.bytesOf(), size, owner));
  } catch (e) {
    if (e instanceof ContainerGoneError) gone(e);
    throw new FileTransferError(data.destroyed || data.readableAborted ? 400 : 500, `${real} could not be written: ${(e as Error).message}`);
  }
  return { name: path.posix.basename(real), type: 'file', path: real, bytes: size };
}
