/**
 * What the shell tools and the verifier need of a container, and nothing more: start a process in
 * it (the engine's exec API), copy files in and out (its archive API), look at a path. A sandbox
 * that offers it (its `shell` part, sandbox.ts) hands one per deployed env; the Docker
 * implementation is engine/docker-exec.ts; tests implement the same few calls.
 */
import * as tar from 'tar';

export interface ExecRequest {
  /** the program and its arguments (no shell is put in front) */
  cmd: string[];
  /** variables added to the container's own environment */
  env?: Record<string, string>;
  /** where the process starts; default: the image's WORKDIR */
  workdir?: string;
  /** user[:group] or uid[:gid]; default: the image's USER */
  user?: string;
  /** attach the process's standard input (write to it with ExecProcess.write) */
  stdin?: boolean;
}

export interface OutputHandlers {
  /** a chunk of the process's standard output, in the order the engine sent them */
  stdout(chunk: Buffer): void;
  /** a chunk of its standard error */
  stderr(chunk: Buffer): void;
  /**
   * The connection ended: the process exited and nothing holds its output open any more, or the
   * engine dropped it (`error`). Called once.
   */
  end(error?: Error): void;
}

export interface ExecProcess {
  /**
   * Writes to the process's standard input (started with `stdin: true`). False: the connection's
   * buffer is full, and a writer of a large stream waits for `drained()` before writing more.
   */
  write(data: string | Buffer): boolean;
  /** resolves once what was written has gone to the engine (or the connection ended) */
  drained(): Promise<void>;
  /** closes its standard input (what it reads next is the end), its output still read */
  endInput(): void;
  /** stops reading its output (the process blocks once its pipes fill) until resume() */
  pause(): void;
  resume(): void;
  /** its exit code once the engine reports it ended; null while it runs or when the engine cannot say */
  exitCode(): Promise<number | null>;
  /** drops the connection: the process's standard input closes; nothing more is read */
  close(): void;
}

/**
 * What the engine says of a path (Docker's X-Docker-Container-Path-Stat). `mode` is Go's
 * os.FileMode: permission bits plus type bits (PATH_MODE below).
 */
export interface PathStat {
  name: string;
  size: number;
  mode: number;
  mtime: string;
  /** for a symbolic link, the path it points to (absolute, resolved in the container); else "" */
  linkTarget: string;
}

/** A path of a container that differs from its image. */
export interface FileChange {
  path: string;
  kind: 'modified' | 'added' | 'deleted';
}

/** Go's os.FileMode type bits, as the engine reports them. */
export const PATH_MODE = {
  dir: 2 ** 31,
  symlink: 2 ** 27,
  device: 2 ** 26,
  namedPipe: 2 ** 25,
  socket: 2 ** 24,
  charDevice: 2 ** 21,
  irregular: 2 ** 19,
} as const;

export function pathKind(mode: number): 'file' | 'dir' | 'symlink' | 'other' {
  // bitwise operators work on 32-bit integers: the top bit (dir) survives as the sign bit
  const has = (bit: number) => (mode & bit) !== 0;
  if (has(PATH_MODE.dir)) return 'dir';
  if (has(PATH_MODE.symlink)) return 'symlink';
  return Object.values(PATH_MODE).some(has) ? 'other' : 'file';
}

export interface ContainerExec {
  /** the container's id (or a backend's name for it), for messages */
  readonly id: string;
  /**
   * The toolbox's binary in this container (src/sandbox/toolbox.ts): what every step of the
   * server's own runs there, never a binary of the image. Null: the container has none, and the
   * server's steps cannot run in it.
   */
  readonly toolbox: string | null;
  /** starts a process; rejects with ContainerGoneError when the container is not running */
  start(req: ExecRequest, handlers: OutputHandlers): Promise<ExecProcess>;
  /** extracts a tar archive (whole, or streamed) into the folder `dir` (which must exist) */
  putArchive(dir: string, tar: Buffer | NodeJS.ReadableStream, opts?: { copyUidGid?: boolean }): Promise<void>;
  /**
   * What changed in the container's filesystem since it was made from its image (the engine's
   * `GET /containers/{id}/changes`): each path, and whether it was modified, added or deleted.
   */
  changes(): Promise<FileChange[]>;
  /** a tar archive of `path` (a file or a folder and everything in it); rejects when it does not exist */
  getArchive(path: string): Promise<NodeJS.ReadableStream & { destroy(): void }>;
  /** what the engine says of `path`, or null when nothing is there */
  stat(path: string): Promise<PathStat | null>;
}

/** The container is gone or stopped: nothing can run in it any more. */
export class ContainerGoneError extends Error {
  override readonly name = 'ContainerGoneError';
}

/**
 * A shell env's readiness probe: the toolbox's `true` in its container answers with exit code 0
 * within `timeoutMs` (the engine's exec API takes the container's processes and namespaces).
 */
export async function probeExec(exec: ContainerExec, timeoutMs: number, signal: AbortSignal): Promise<{ ok: boolean; answer: string }> {
  let proc: ExecProcess | null = null;
  const stop = new AbortController();
  const ended = new Promise<Error | undefined>((resolve) => {
    const timer = setTimeout(() => resolve(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    const onAbort = () => resolve(new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    stop.signal.addEventListener('abort', () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    });
    if (exec.toolbox === null) {
      resolve(new Error(`container ${exec.id.slice(0, 12)} has no toolbox to probe it with`));
      return;
    }
    void exec.start({ cmd: [exec.toolbox, 'true'], user: '0' }, { stdout: () => {}, stderr: () => {}, end: (e) => resolve(e) }).then(
      (p) => (proc = p),
      (e: Error) => resolve(e),
    );
  });
  try {
    const error = await ended;
    if (error) return { ok: false, answer: error.message };
    const code = await (proc as ExecProcess | null)?.exitCode();
    return code === 0 ? { ok: true, answer: 'exit code 0' } : { ok: false, answer: `exit code ${code}` };
  } finally {
    stop.abort();
    (proc as ExecProcess | null)?.close();
  }
}

/** A one-file tar archive: `rel` (relative to the folder it is extracted in) holding `data`. */
export function singleFileTar(rel: string, data: Buffer, opts: { mode: number; uid: number; gid: number }): Buffer {
  const header: tar.HeaderData = { path: rel, mode: opts.mode, uid: opts.uid, gid: opts.gid, size: data.length, mtime: new Date(), type: 'File' };
  const blocks: Buffer[] = [];
  const block = Buffer.alloc(512);
  // a path too long for the ustar header (or ids too large) also needs a PAX header, first
  if (new tar.Header(header).encode(block)) blocks.push(new tar.Pax(header).encode());
  blocks.push(block, data, Buffer.alloc((512 - (data.length % 512)) % 512), Buffer.alloc(1024));
  return Buffer.concat(blocks);
}
