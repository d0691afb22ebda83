/**
 * envd's services as one sandbox serves them: the process service (Start and Connect streamed,
 * List, SendInput, SendSignal, CloseStdin), the filesystem service (Stat, ListDir, MakeDir, Move,
 * Remove), and the file transfer. Each takes a call's parsed message and answers its JSON (or
 * streams it), records what it did for the console and the metrics, and fails with a
 * ConnectError (FileTransferError for the file transfer) saying why. The routes
 * (src/routes/e2b-envd.ts) only find the sandbox and speak HTTP.
 */
import type { Readable } from 'node:stream';
import type { z } from 'zod';
import {
  camelKeys,
  CloseStdinRequestSchema,
  ConnectRequestSchema,
  ListDirRequestSchema,
  MoveRequestSchema,
  PathRequestSchema,
  SendInputRequestSchema,
  SendSignalRequestSchema,
  StartRequestSchema,
  type ProcessEvent,
  type WriteInfo,
} from '../protocol/e2b.js';
import { describeIssues } from '../protocol/zod-issues.js';
import type { Metrics } from '../metrics.js';
import { ConnectError, ServerStream } from './connect-rpc.js';
import { checkedUser, filesystemOps } from './filesystem.js';
import { FileTransferError, openDownload, writeFileStream, type FileDownload } from './sandbox-files.js';
import type { E2bSandbox } from './sandbox.js';
import type { SandboxProcess } from './processes.js';

/** a call's message, checked against its schema (names in snake_case taken too) */
export function messageOf<S extends z.ZodTypeAny>(schema: S, raw: unknown): z.output<S> {
  const parsed = schema.safeParse(camelKeys(raw ?? {}));
  if (!parsed.success) throw new ConnectError('invalid_argument', describeIssues(parsed.error, { root: 'message' }));
  return parsed.data as z.output<S>;
}

const KEEPALIVE: ProcessEvent = { keepalive: {} };

export interface CallContext {
  sandbox: E2bSandbox;
  /** the user the call names (Authorization: Basic), null: the image's own */
  user: string | null;
  metrics: Metrics;
}

/** times a call into e2b_call_seconds and the console's transcript */
async function timed<T>(ctx: CallContext, call: string, args: unknown, fn: () => Promise<T>, resultOf: (r: T) => unknown = () => null): Promise<T> {
  const started = Date.now();
  try {
    const r = await fn();
    ctx.metrics.sandboxCalls.observe({ call, outcome: 'ok' }, (Date.now() - started) / 1000);
    ctx.sandbox.record(call, args, resultOf(r), null, started);
    return r;
  } catch (e) {
    ctx.metrics.sandboxCalls.observe({ call, outcome: 'error' }, (Date.now() - started) / 1000);
    ctx.sandbox.record(call, args, null, (e as Error).message, started);
    throw e;
  }
}

/** the process's events, from `proc`, into the call's stream; the stream ends with the process or with the reader */
function pipeProcess(proc: SandboxProcess, stream: ServerStream): void {
  const unsubscribe = proc.subscribe({ write: (ev) => stream.write({ event: ev }), drained: () => stream.drained(), end: () => stream.end() });
  stream.body.on('close', unsubscribe);
}

export const processService = {
  /** Start: the command runs (its pid first on the stream), then its output, then its end */
  async start(ctx: CallContext, raw: unknown, timeoutMs: number | null, keepaliveMs: number | null): Promise<ServerStream> {
    const m = messageOf(StartRequestSchema, raw);
    if (m.pty !== undefined && m.pty !== null)
      throw new ConnectError('unimplemented', 'a PTY does not exist on this server: run the command without one (commands.run)');
    const user = checkedUser(ctx.user);
    const started = Date.now();
    const processes = ctx.sandbox.processes;
    if (!processes) throw new ConnectError('unavailable', `sandbox ${ctx.sandbox.id} is not running`);
    let proc: SandboxProcess;
    try {
      proc = await processes.start({
        cmd: m.process.cmd,
        args: m.process.args,
        envs: m.process.envs,
        ...(m.process.cwd ? { cwd: m.process.cwd } : {}),
        ...(m.tag ? { tag: m.tag } : {}),
        stdin: m.stdin === true,
        user,
        timeoutMs,
      });
    } catch (e) {
      ctx.metrics.sandboxCalls.observe({ call: 'process.start', outcome: 'error' }, (Date.now() - started) / 1000);
      ctx.sandbox.record(
        'commands.run',
        { cmd: [m.process.cmd, ...m.process.args].join(' '), user, cwd: m.process.cwd ?? null },
        null,
        (e as Error).message,
        started,
      );
      throw e;
    }
    void proc.ended.then((end) =>
      ctx.metrics.sandboxCalls.observe({ call: 'process.start', outcome: end.exited && end.exitCode === 0 ? 'ok' : 'error' }, (Date.now() - started) / 1000),
    );
    const stream = new ServerStream(keepaliveMs, { event: KEEPALIVE });
    pipeProcess(proc, stream);
    return stream;
  },

  /** Connect: a running process's events from now on (its pid first) */
  connect(ctx: CallContext, raw: unknown, keepaliveMs: number | null): ServerStream {
    const m = messageOf(ConnectRequestSchema, raw);
    const proc = table(ctx).find(m.process);
    const stream = new ServerStream(keepaliveMs, { event: KEEPALIVE });
    pipeProcess(proc, stream);
    return stream;
  },

  list(ctx: CallContext): { processes: ReturnType<SandboxProcess['info']>[] } {
    return { processes: table(ctx).list() };
  },

  async sendInput(ctx: CallContext, raw: unknown): Promise<Record<string, never>> {
    const m = messageOf(SendInputRequestSchema, raw);
    if (m.input.pty !== undefined) throw new ConnectError('unimplemented', 'a PTY does not exist on this server: send stdin');
    const proc = table(ctx).find(m.process);
    await proc.writeStdin(Buffer.from(m.input.stdin ?? '', 'base64'));
    return {};
  },

  async sendSignal(ctx: CallContext, raw: unknown): Promise<Record<string, never>> {
    const m = messageOf(SendSignalRequestSchema, raw);
    const sig = m.signal === 'SIGNAL_SIGKILL' || m.signal === 9 ? 'KILL' : m.signal === 'SIGNAL_SIGTERM' || m.signal === 15 ? 'TERM' : null;
    if (sig === null) throw new ConnectError('invalid_argument', 'signal must be SIGNAL_SIGTERM or SIGNAL_SIGKILL');
    const proc = table(ctx).find(m.process);
    await timed(ctx, 'process.signal', { pid: proc.pid, signal: sig }, () => proc.signal(sig));
    return {};
  },

  closeStdin(ctx: CallContext, raw: unknown): Record<string, never> {
    const m = messageOf(CloseStdinRequestSchema, raw);
    table(ctx).find(m.process).closeStdin();
    return {};
  },
};

function table(ctx: CallContext) {
  const t = ctx.sandbox.processes;
  if (!t) throw new ConnectError('unavailable', `sandbox ${ctx.sandbox.id} is not running`);
  return t;
}

export const filesystemService = {
  async stat(ctx: CallContext, raw: unknown) {
    const m = messageOf(PathRequestSchema, raw);
    return { entry: await timed(ctx, 'filesystem.stat', { path: m.path }, () => filesystemOps.stat(ctx.sandbox.exec, ctx.user, m.path)) };
  },
  async listDir(ctx: CallContext, raw: unknown) {
    const m = messageOf(ListDirRequestSchema, raw);
    const entries = await timed(
      ctx,
      'filesystem.list',
      { path: m.path, depth: m.depth },
      () => filesystemOps.listDir(ctx.sandbox.exec, ctx.user, m.path, m.depth),
      (r) => ({ entries: r.length }),
    );
    return { entries };
  },
  async makeDir(ctx: CallContext, raw: unknown) {
    const m = messageOf(PathRequestSchema, raw);
    return { entry: await timed(ctx, 'filesystem.make_dir', { path: m.path }, () => filesystemOps.makeDir(ctx.sandbox.exec, ctx.user, m.path)) };
  },
  async move(ctx: CallContext, raw: unknown) {
    const m = messageOf(MoveRequestSchema, raw);
    return {
      entry: await timed(ctx, 'filesystem.move', { source: m.source, destination: m.destination }, () =>
        filesystemOps.move(ctx.sandbox.exec, ctx.user, m.source, m.destination),
      ),
    };
  },
  async remove(ctx: CallContext, raw: unknown) {
    const m = messageOf(PathRequestSchema, raw);
    await timed(ctx, 'filesystem.remove', { path: m.path }, () => filesystemOps.remove(ctx.sandbox.exec, ctx.user, m.path));
    return {};
  },
};

export const fileTransfer = {
  async read(ctx: CallContext, path: string): Promise<FileDownload> {
    if (!path) throw new FileTransferError(400, 'the query names no path: GET /files?path=<file>');
    const d = await timed(
      ctx,
      'files.read',
      { path, user: ctx.user },
      () => openDownload(ctx.sandbox.exec, ctx.user, path),
      (r) => ({ bytes: r.size }),
    );
    ctx.metrics.sandboxFileBytes.inc({ direction: 'out' }, d.size);
    return d;
  },

  /** `size`: the body's length when the request says it (else it streams through the toolbox: sandbox-files.ts) */
  async write(ctx: CallContext, path: string, data: Readable, opts: { size: number | null; gzip: boolean }): Promise<WriteInfo> {
    const { bytes, ...info } = await timed(
      ctx,
      'files.write',
      { path, user: ctx.user, gzip: opts.gzip },
      () => writeFileStream(ctx.sandbox.exec, ctx.user, path, data, opts),
      (r) => ({ bytes: r.bytes }),
    );
    ctx.metrics.sandboxFileBytes.inc({ direction: 'in' }, bytes);
    return info;
  },
};
