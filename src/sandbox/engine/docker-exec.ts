/**
 * ContainerExec over dockerode: processes through the engine's exec API (attached, not a TTY, so
 * stdout and stderr arrive as the engine's multiplexed frames), files through its archive API.
 * No `docker` CLI.
 */
import type { Duplex } from 'node:stream';
import type Dockerode from 'dockerode';
import { engineMessage, isNotFound, statusOf } from './errors.js';
import { commandAsUser, isRootUser } from '../toolbox.js';
import {
  ContainerGoneError,
  type ContainerExec,
  type ExecProcess,
  type ExecRequest,
  type FileChange,
  type OutputHandlers,
  type PathStat,
} from '../container-exec.js';

/** how often, and how many times, exitCode() asks the engine while it still reports the process running */
const EXIT_POLL = { attempts: 20, delayMs: 25 } as const;

/** 404 no such container, 409 container stopped or paused: nothing will run there any more */
function goneOrThrow(err: unknown, id: string, doing: string): never {
  const status = statusOf(err);
  if (status === 404 && /no such container/i.test(engineMessage(err))) throw new ContainerGoneError(`container ${id.slice(0, 12)} is gone (${doing})`);
  if (status === 409 || (status === 500 && /is not running|container .* is restarting/i.test(engineMessage(err)))) {
    throw new ContainerGoneError(`container ${id.slice(0, 12)} is not running (${doing}): ${engineMessage(err)}`);
  }
  throw err;
}

/**
 * Splits the engine's multiplexed stream (frames of an 8-byte header: stream type, three zero
 * bytes, big-endian length; then the payload) as chunks arrive. Payloads are handed on as they
 * come, a frame split over several chunks in several pieces, so nothing is copied but headers.
 */
export class FrameDemuxer {
  private header = Buffer.alloc(0);
  private remaining = 0;
  private target: 1 | 2 = 1;

  constructor(private readonly onFrame: (stream: 1 | 2, payload: Buffer) => void) {}

  push(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length) {
      if (this.remaining > 0) {
        const take = Math.min(this.remaining, chunk.length - at);
        this.onFrame(this.target, chunk.subarray(at, at + take));
        this.remaining -= take;
        at += take;
        continue;
      }
      const need = 8 - this.header.length;
      const part = chunk.subarray(at, at + need);
      this.header = this.header.length === 0 ? Buffer.from(part) : Buffer.concat([this.header, part]);
      at += part.length;
      if (this.header.length < 8) return;
      // stdin (0) never comes back; anything but 2 is taken as stdout
      this.target = this.header[0] === 2 ? 2 : 1;
      this.remaining = this.header.readUInt32BE(4);
      this.header = Buffer.alloc(0);
    }
  }
}

export class DockerContainerExec implements ContainerExec {
  constructor(
    private readonly docker: Dockerode,
    readonly id: string,
    readonly toolbox: string | null = null,
  ) {}

  private get container(): Dockerode.Container {
    return this.docker.getContainer(this.id);
  }

  async start(req: ExecRequest, handlers: OutputHandlers): Promise<ExecProcess> {
    let exec: Dockerode.Exec;
    let stream: Duplex;
    try {
      exec = await this.container.exec({
        // a user named (not root): through the toolbox, so that no capability of the container's stays with it
        Cmd: this.toolbox && req.user && !isRootUser(req.user) ? commandAsUser(this.toolbox, req.cmd) : req.cmd,
        AttachStdin: req.stdin === true,
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
        ...(req.env ? { Env: Object.entries(req.env).map(([k, v]) => `${k}=${v}`) } : {}),
        ...(req.workdir ? { WorkingDir: req.workdir } : {}),
        ...(req.user ? { User: req.user } : {}),
      });
      stream = (await exec.start({ hijack: true, stdin: req.stdin === true })) as Duplex;
    } catch (err) {
      goneOrThrow(err, this.id, `starting ${req.cmd[0] ?? 'a process'}`);
    }
    const demux = new FrameDemuxer((which, payload) => (which === 2 ? handlers.stderr(payload) : handlers.stdout(payload)));
    let ended = false;
    const end = (error?: Error) => {
      if (ended) return;
      ended = true;
      handlers.end(error);
    };
    stream.on('data', (chunk: Buffer) => demux.push(chunk));
    stream.on('end', () => end());
    stream.on('close', () => end());
    stream.on('error', (e: Error) => end(e));
    return {
      write: (data) => (ended ? true : stream.write(data)),
      drained: () =>
        ended || !stream.writableNeedDrain
          ? Promise.resolve()
          : new Promise<void>((resolve) => {
              const done = () => {
                stream.off('drain', done);
                stream.off('close', done);
                resolve();
              };
              stream.once('drain', done);
              stream.once('close', done);
            }),
      // a half-close of the hijacked connection: the engine closes the process's stdin
      endInput: () => {
        if (!ended) stream.end();
      },
      pause: () => stream.pause(),
      resume: () => stream.resume(),
      exitCode: async () => {
        for (let i = 0; i < EXIT_POLL.attempts; i++) {
          try {
            const info = await exec.inspect();
            if (!info.Running) return info.ExitCode ?? null;
          } catch {
            return null;
          }
          await new Promise((r) => setTimeout(r, EXIT_POLL.delayMs));
        }
        return null;
      },
      close: () => {
        stream.destroy();
        end();
      },
    };
  }

  /**
   * A 404 of the archive API means a missing path or a missing container, and a HEAD request
   * carries no message to tell which: the container's own state decides.
   */
  private async missingPath(err: unknown, doing: string): Promise<boolean> {
    if (!isNotFound(err)) return false;
    try {
      const info = await this.container.inspect();
      if (info.State.Running) return true;
    } catch {
      // gone
    }
    throw new ContainerGoneError(`container ${this.id.slice(0, 12)} is gone or stopped (${doing})`);
  }

  async changes(): Promise<FileChange[]> {
    let list: { Path: string; Kind: number }[] | null;
    try {
      list = (await this.container.changes()) as { Path: string; Kind: number }[] | null;
    } catch (err) {
      goneOrThrow(err, this.id, 'listing its changed paths');
    }
    const kinds = ['modified', 'added', 'deleted'] as const;
    return (list ?? []).map((c) => ({ path: c.Path, kind: kinds[c.Kind] ?? 'modified' }));
  }

  async putArchive(dir: string, tar: Buffer | NodeJS.ReadableStream, opts: { copyUidGid?: boolean } = {}): Promise<void> {
    try {
      await this.container.putArchive(tar, { path: dir, ...(opts.copyUidGid ? { copyUIDGID: '1' } : {}) });
    } catch (err) {
      if (await this.missingPath(err, `copying files into ${dir}`)) throw new Error(`no folder ${dir} in the container`, { cause: err });
      goneOrThrow(err, this.id, `copying files into ${dir}`);
    }
  }

  async getArchive(path: string): Promise<NodeJS.ReadableStream & { destroy(): void }> {
    try {
      return (await this.container.getArchive({ path })) as NodeJS.ReadableStream & { destroy(): void };
    } catch (err) {
      if (await this.missingPath(err, `reading ${path}`)) throw new Error(`no such file or folder in the container: ${path}`, { cause: err });
      goneOrThrow(err, this.id, `reading ${path}`);
    }
  }

  async stat(path: string): Promise<PathStat | null> {
    let res: { headers?: Record<string, string | string[] | undefined>; resume?: () => void };
    try {
      res = (await this.container.infoArchive({ path })) as typeof res;
    } catch (err) {
      if (await this.missingPath(err, `looking at ${path}`)) return null;
      goneOrThrow(err, this.id, `looking at ${path}`);
    }
    res.resume?.();
    const header = res.headers?.['x-docker-container-path-stat'];
    const text = Array.isArray(header) ? header[0] : header;
    if (!text) throw new Error(`the engine said nothing of ${path} (no path-stat header)`);
    return JSON.parse(Buffer.from(text, 'base64').toString('utf8')) as PathStat;
  }
}
