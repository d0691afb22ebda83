/**
 * What E2B's in-sandbox daemon (envd) serves, at `/e2b/envd` (E2B_SANDBOX_URL=http://HOST:PORT/e2b/envd)
 * for every sandbox at once: each call names its sandbox in `E2b-Sandbox-Id` (the SDKs send it on
 * every request) and, for a secure sandbox, proves its access token in `X-Access-Token`; the
 * user it acts as is envd's `Authorization: Basic` (RPC) or `username` (files). Connect RPC
 * (process.Process/*, filesystem.Filesystem/*) in its JSON form, the file transfer (`/files`),
 * `/health`, `/envs`, `/metrics`. The server's bearer token is not asked: the sandbox id (about
 * 103 random bits) and its access token are the guard, as on E2B. The work is src/e2b/envd.ts's.
 */
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { MAX_FRAME_BYTES } from '../defaults.js';
import {
  basicUser,
  callTimeoutMs,
  CONNECT_HTTP_STATUS,
  CONNECT_STREAM_JSON,
  ConnectError,
  parseEnvelope,
  parseJson,
  refusedContentType,
  ServerStream,
} from '../e2b/connect-rpc.js';
import { fileTransfer, filesystemService, processService, type CallContext } from '../e2b/envd.js';
import { E2bApiError } from '../e2b/errors.js';
import { boundaryOf, eachPart } from '../e2b/multipart.js';
import { FileTransferError, transferErrorOf } from '../e2b/sandbox-files.js';
import type { E2bSandbox } from '../e2b/sandbox.js';
import { closeUnreadBody, tokenMatches } from '../plugins/auth.js';
import { noteRefusal } from '../plugins/request-log.js';
import { FilesQuerySchema, type WriteInfo } from '../protocol/e2b.js';
import type { OpenEnvRuntime } from '../runtime.js';
import { metricOf } from './e2b-api.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** the sandbox an envd call names (E2b-Sandbox-Id), once its guard let it through */
    e2bSandbox?: E2bSandbox;
  }
}

type Unary = (ctx: CallContext, message: unknown) => unknown;
type Streaming = (ctx: CallContext, message: unknown, req: FastifyRequest) => Promise<ServerStream> | ServerStream;

/** envd's own answer to a failed call outside Connect: `{code, message}` under the status */
function sendHttpError(reply: FastifyReply, status: number, message: string): FastifyReply {
  noteRefusal(reply.request, `envd_${status}`);
  return reply.code(status).send({ code: status, message });
}

function first(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** `Keepalive-Ping-Interval` (seconds): how often a stream says it is alive */
function keepaliveMs(req: FastifyRequest): number | null {
  const v = Number(first(req.headers['keepalive-ping-interval']));
  return Number.isFinite(v) && v > 0 ? Math.max(1000, v * 1000) : null;
}

export async function e2bEnvdRoutes(app: FastifyInstance, { runtime }: { runtime: OpenEnvRuntime }): Promise<void> {
  const { e2b, metrics } = runtime;

  // bodies as envd takes them: Connect's JSON (an empty unary body is an empty message), enveloped
  // stream requests, and files streamed through (never held whole)
  app.removeContentTypeParser('application/json');
  for (const type of ['application/json', CONNECT_STREAM_JSON, 'application/proto', 'application/connect+proto']) {
    app.addContentTypeParser(type, { parseAs: 'buffer', bodyLimit: MAX_FRAME_BYTES }, (_req, body, done) => done(null, body));
  }
  for (const type of ['application/octet-stream', 'multipart/form-data']) app.addContentTypeParser(type, (_req, payload, done) => done(null, payload));

  app.setErrorHandler((err, req, reply) => {
    if (err instanceof ConnectError) {
      noteRefusal(req, `connect_${err.code}`);
      return reply.code(CONNECT_HTTP_STATUS[err.code]).send(err.body);
    }
    // an upload refused before its end (a folder where the file would go): its rest is not waited for
    if (err instanceof FileTransferError && !req.raw.readableEnded) closeUnreadBody(reply);
    if (err instanceof FileTransferError || err instanceof E2bApiError) return sendHttpError(reply, err.status, err.message);
    const status = (err as { statusCode?: number }).statusCode;
    if (status !== undefined && status >= 400 && status < 500) return sendHttpError(reply, status, (err as Error).message);
    req.log.error({ err }, 'envd request failed');
    return sendHttpError(reply, 500, `the server failed: ${(err as Error)?.message ?? String(err)}`);
  });
  app.setNotFoundHandler((req, reply) => {
    closeUnreadBody(reply);
    const path = req.url.split('?')[0]!.replace(/^\/e2b\/envd/, '');
    if (/^\/[A-Za-z0-9_.]+\/[A-Za-z0-9_]+$/.test(path)) {
      return reply.code(501).send(new ConnectError('unimplemented', `${path.slice(1)} does not exist on this server's envd`).body);
    }
    return sendHttpError(
      reply,
      404,
      `${req.method} ${path} does not exist on this server's envd (it serves process.Process, filesystem.Filesystem, /files, /health, /envs, /metrics)`,
    );
  });

  // the guard: the sandbox named, running (or paused), and its access token when it is secure
  app.addHook('onRequest', async (req, reply) => {
    const id = first(req.headers['e2b-sandbox-id']);
    if (!id) {
      closeUnreadBody(reply);
      return sendHttpError(
        reply,
        400,
        'an envd call names its sandbox in the E2b-Sandbox-Id header (the E2B SDKs send it: set E2B_SANDBOX_URL to http://HOST:PORT/e2b/envd)',
      );
    }
    const s = e2b.get(id);
    if (!s || !s.live) {
      closeUnreadBody(reply);
      // 502 is what the SDKs read as "the sandbox is not running" (their health check, their timeout error)
      return sendHttpError(reply, 502, `sandbox ${id.slice(0, 64)} is not running: it was killed, reached its timeout, or never existed`);
    }
    if (s.params.secure) {
      const given = first(req.headers['x-access-token']);
      if (given === undefined || !tokenMatches(given, s.accessToken)) {
        closeUnreadBody(reply);
        noteRefusal(req, 'envd_access_token');
        const message =
          given === undefined ? `sandbox ${id} is secure: its calls carry its access token (X-Access-Token)` : `the access token is not sandbox ${id}'s`;
        return reply.code(401).send(isRpc(req) ? new ConnectError('unauthenticated', message).body : { code: 401, message });
      }
    }
    req.e2bSandbox = s;
  });

  const context = (req: FastifyRequest, user: string | null): CallContext => ({ sandbox: req.e2bSandbox!, user, metrics });

  const unary = (path: string, fn: Unary) =>
    app.post(path, async (req, reply) => {
      const refused = refusedContentType(req.headers['content-type'], false);
      if (refused) throw refused;
      const message = parseJson((req.body as Buffer | undefined) ?? Buffer.alloc(0));
      const out = await connectCall(() => fn(context(req, basicUser(req.headers.authorization)), message));
      return reply.code(200).header('content-type', 'application/json').send(JSON.stringify(out));
    });

  const streaming = (path: string, fn: Streaming) =>
    app.post(path, async (req, reply) => {
      let stream: ServerStream;
      try {
        const refused = refusedContentType(req.headers['content-type'], true);
        if (refused) throw refused;
        const message = parseEnvelope((req.body as Buffer | undefined) ?? Buffer.alloc(0));
        stream = await connectCall(() => fn(context(req, basicUser(req.headers.authorization)), message, req));
      } catch (e) {
        // a stream's errors travel in its end-of-stream message, under 200
        stream = new ServerStream(null, {});
        const err = e instanceof ConnectError ? e : new ConnectError('internal', (e as Error).message);
        noteRefusal(req, `connect_${err.code}`);
        stream.end(err);
      }
      return reply.code(200).header('content-type', CONNECT_STREAM_JSON).send(stream.body);
    });

  streaming('/process.Process/Start', (ctx, m, req) => processService.start(ctx, m, callTimeoutMs(req.headers['connect-timeout-ms']), keepaliveMs(req)));
  streaming('/process.Process/Connect', (ctx, m, req) => processService.connect(ctx, m, keepaliveMs(req)));
  unary('/process.Process/List', (ctx) => processService.list(ctx));
  unary('/process.Process/SendInput', (ctx, m) => processService.sendInput(ctx, m));
  unary('/process.Process/SendSignal', (ctx, m) => processService.sendSignal(ctx, m));
  unary('/process.Process/CloseStdin', (ctx, m) => processService.closeStdin(ctx, m));
  unary('/filesystem.Filesystem/Stat', (ctx, m) => filesystemService.stat(ctx, m));
  unary('/filesystem.Filesystem/ListDir', (ctx, m) => filesystemService.listDir(ctx, m));
  unary('/filesystem.Filesystem/MakeDir', (ctx, m) => filesystemService.makeDir(ctx, m));
  unary('/filesystem.Filesystem/Move', (ctx, m) => filesystemService.move(ctx, m));
  unary('/filesystem.Filesystem/Remove', (ctx, m) => filesystemService.remove(ctx, m));
  streaming('/filesystem.Filesystem/WatchDir', () => {
    throw new ConnectError('unimplemented', 'watching a folder does not exist on this server: list it again (files.list) to see what changed');
  });

  app.get('/files', async (req, reply) => {
    const q = FilesQuerySchema.parse(req.query);
    const ctx = context(req, q.username ?? null);
    const d = await fileCall(() => fileTransfer.read(ctx, q.path ?? ''));
    return reply.code(200).header('content-type', 'application/octet-stream').header('content-length', String(d.size)).send(d.body);
  });

  app.post('/files', async (req, reply) => {
    const q = FilesQuerySchema.parse(req.query);
    const ctx = context(req, q.username ?? null);
    const type = (req.headers['content-type'] ?? '').toLowerCase();
    const body = req.body as Readable;
    const gzip = first(req.headers['content-encoding'])?.toLowerCase() === 'gzip';
    if (type.startsWith('multipart/form-data')) {
      const boundary = boundaryOf(req.headers['content-type']);
      if (!boundary) throw new FileTransferError(400, 'a multipart/form-data upload declares its boundary in its content-type');
      const written: WriteInfo[] = [];
      await fileCall(() =>
        eachPart(body, boundary, async (part) => {
          const path = q.path ?? part.filename ?? '';
          written.push(await fileTransfer.write(ctx, path, part.body, { size: null, gzip: false }));
        }).catch((e: unknown) => {
          if (e instanceof FileTransferError || e instanceof ConnectError) throw e;
          throw new FileTransferError(400, `the multipart upload is malformed: ${(e as Error).message}`);
        }),
      );
      if (written.length === 0) throw new FileTransferError(400, 'the multipart upload holds no file');
      return reply.code(200).send(written);
    }
    if (!(body instanceof Readable)) throw new FileTransferError(400, 'upload a file as application/octet-stream or multipart/form-data');
    // the body's length, when the request says it and it is what arrives (no gzip to undo)
    const length = first(req.headers['content-length']);
    const size = length !== undefined && /^\d+$/.test(length) && req.headers['transfer-encoding'] === undefined ? Number(length) : null;
    const info = await fileCall(() => fileTransfer.write(ctx, q.path ?? '', body, { size, gzip }));
    return reply.code(200).send([info]);
  });

  app.get('/health', async (_req, reply) => reply.code(204).send());
  app.get('/envs', async (req) => req.e2bSandbox!.params.envVars);
  app.get('/metrics', async (req) => {
    const m = await metricOf(req.e2bSandbox!, runtime);
    return {
      ts: m.timestampUnix,
      cpu_count: m.cpuCount,
      cpu_used_pct: m.cpuUsedPct,
      mem_total: m.memTotal,
      mem_used: m.memUsed,
      mem_total_mib: Math.round(m.memTotal / 1024 / 1024),
      mem_used_mib: Math.round(m.memUsed / 1024 / 1024),
      disk_total: m.diskTotal,
      disk_used: m.diskUsed,
    };
  });
}

function isRpc(req: FastifyRequest): boolean {
  return /^\/e2b\/envd\/[A-Za-z0-9_.]+\.[A-Za-z0-9_]+\/[A-Za-z0-9_]+$/.test(req.url.split('?')[0]!);
}

/** a call's failure as a ConnectError (a paused or gone sandbox: unavailable) */
async function connectCall<T>(fn: () => T | Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof E2bApiError) throw new ConnectError(e.status === 502 ? 'unavailable' : 'failed_precondition', e.message);
    throw e;
  }
}

/** a file transfer's failure in its HTTP shape */
async function fileCall<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof ConnectError) throw transferErrorOf(e);
    throw e;
  }
}
