/**
 * E2B's control API at `/e2b` (E2B_API_URL=http://HOST:PORT/e2b), as the official SDKs call it:
 * create (`POST /sandboxes`, `/v2/sandboxes`), get, list (`GET /v2/sandboxes`, `/sandboxes`),
 * kill, timeout, refresh, pause, resume and connect, metrics. Guarded by `X-API-KEY` (the
 * server's token; `Authorization: Bearer` too); every answer and refusal in E2B's error shape,
 * anything not served named as such. The sandboxes themselves are src/e2b/'s.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { E2B } from '../defaults.js';
import { E2bApiError } from '../e2b/errors.js';
import type { E2bSandbox } from '../e2b/sandbox.js';
import { bearerOf, closeUnreadBody, tokenMatches } from '../plugins/auth.js';
import { noteRefusal } from '../plugins/request-log.js';
import type { ZodTypeProvider } from '../plugins/zod-schemas.js';
import {
  ConnectSandboxSchema,
  ListSandboxesQuerySchema,
  NewSandboxSchema,
  SandboxPauseSchema,
  SandboxRefreshSchema,
  SandboxTimeoutSchema,
  type ListedSandbox,
  type SandboxCreated,
  type SandboxDetail,
  type SandboxMetric,
} from '../protocol/e2b.js';
import type { OpenEnvRuntime } from '../runtime.js';
import { dropReply, withClientGone } from './client-gone.js';
import { isAbortError } from '../util/abort.js';

const IdParams = z.object({ sandboxID: z.string().min(1).max(100) });
const MIB = 1024 * 1024;

/** E2B's error shape for any failure of these routes */
export function sendE2bError(reply: FastifyReply, err: unknown): FastifyReply {
  if (err instanceof E2bApiError) {
    noteRefusal(reply.request, `e2b_${err.status}`);
    if (err.retryAfterS !== undefined) reply.header('retry-after', String(err.retryAfterS));
    return reply.code(err.status).send({ code: err.status, message: err.message });
  }
  const status = (err as { statusCode?: number }).statusCode;
  if (status !== undefined && status >= 400 && status < 500) {
    noteRefusal(reply.request, 'e2b_bad_request');
    return reply.code(status).send({ code: status, message: (err as Error).message });
  }
  reply.request.log.error({ err }, 'e2b request failed');
  return reply.code(500).send({ code: 500, message: `the server failed: ${(err as Error)?.message ?? String(err)}` });
}

export async function e2bApiRoutes(root: FastifyInstance, { runtime, token }: { runtime: OpenEnvRuntime; token: string | null }): Promise<void> {
  const app = root.withTypeProvider<ZodTypeProvider>();
  const { e2b, options } = runtime;
  const clientID = options.instance;

  app.setErrorHandler((err, _req, reply) => sendE2bError(reply, err));
  app.setNotFoundHandler((req, reply) =>
    sendE2bError(
      closeUnreadBody(reply),
      new E2bApiError(
        404,
        `${req.method} ${req.url.split('?')[0]} does not exist on this server's E2B API (it serves sandboxes: create, get, list, kill, timeout, refresh, pause, connect, metrics; no templates, snapshots, volumes or teams)`,
      ),
    ),
  );

  // the SDKs' key (X-API-KEY) is the server's token; with no token the server is open
  app.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
    if (!token) return;
    const given = first(req.headers['x-api-key']) ?? bearerOf(req.headers.authorization) ?? null;
    if (given !== null && tokenMatches(given, token)) return;
    closeUnreadBody(reply);
    return sendE2bError(
      reply,
      new E2bApiError(
        401,
        given === null
          ? "this server needs its token as the API key: set E2B_API_KEY to it (X-API-KEY); a token of the e2b_ + 40 hex form passes the SDKs' own check"
          : "the API key (X-API-KEY) is not this server's token",
      ),
    );
  });

  const created = (s: E2bSandbox): SandboxCreated => ({
    sandboxID: s.id,
    templateID: s.templateId,
    clientID,
    envdVersion: E2B.envdVersion,
    ...(s.params.secure ? { envdAccessToken: s.accessToken } : {}),
    trafficAccessToken: null,
    domain: null,
  });
  const listed = (s: E2bSandbox): ListedSandbox => ({
    sandboxID: s.id,
    templateID: s.templateId,
    clientID,
    startedAt: new Date(s.startedAt ?? s.createdAt).toISOString(),
    endAt: new Date(s.endAt).toISOString(),
    cpuCount: s.spec?.resources.cpus ?? 0,
    memoryMB: s.spec?.resources.memoryMb ?? 0,
    diskSizeMB: s.spec?.resources.storageMb ?? 0,
    envdVersion: E2B.envdVersion,
    metadata: s.params.metadata,
    state: s.state,
  });
  const detail = (s: E2bSandbox): SandboxDetail => ({
    ...listed(s),
    domain: null,
    ...(s.params.secure ? { envdAccessToken: s.accessToken } : {}),
    allowInternetAccess: s.params.allowInternetAccess,
    ...(s.params.network ? { network: s.params.network } : {}),
    lifecycle: { onTimeout: 'kill', autoResume: false },
  });
  /** a sandbox the API may act on: created (not still waiting for its slot) */
  const running = (id: string): E2bSandbox => {
    const s = e2b.must(id);
    if (!s.live) throw new E2bApiError(409, `sandbox ${id} is still starting`);
    return s;
  };

  const create = async (body: z.output<typeof NewSandboxSchema>, version: 'v1' | 'v2', reply: FastifyReply) => {
    let s: E2bSandbox;
    try {
      s = await withClientGone(reply, (gone) => e2b.create(body, version, gone));
    } catch (e) {
      // the client left while its sandbox waited or deployed: nothing to answer
      if (isAbortError(e)) return dropReply(reply);
      throw e;
    }
    return reply.code(201).send(created(s));
  };
  app.post('/sandboxes', { schema: { summary: 'E2B: create a sandbox (NewSandbox)', body: NewSandboxSchema } }, (req, reply) => create(req.body, 'v1', reply));
  app.post('/v2/sandboxes', { schema: { summary: 'E2B: create a sandbox (NewSandboxV2)', body: NewSandboxSchema } }, (req, reply) =>
    create(req.body, 'v2', reply),
  );

  app.get('/v2/sandboxes', { schema: { summary: 'E2B: list sandboxes', querystring: ListSandboxesQuerySchema } }, async (req, reply) => {
    const q = req.query;
    const wanted = metadataFilter(q.metadata);
    const states = (Array.isArray(q.state) ? q.state : q.state !== undefined ? [q.state] : []).flatMap((x) => x.split(',')).filter(Boolean);
    const all = e2b
      .all()
      .filter((s) => s.live)
      .filter((s) => (states.length === 0 ? true : states.includes(s.state)))
      .filter((s) => (q.template ? s.templateId === q.template : true))
      .filter((s) => wanted.every(([k, v]) => s.params.metadata[k] === v));
    const offset = q.nextToken ? Number(Buffer.from(q.nextToken, 'base64url').toString()) || 0 : 0;
    const limit = q.limit ?? 100;
    const page = all.slice(offset, offset + limit);
    if (offset + limit < all.length) reply.header('x-next-token', Buffer.from(String(offset + limit)).toString('base64url'));
    return page.map(listed);
  });
  app.get('/sandboxes', { schema: { summary: 'E2B: list running sandboxes (v1)', querystring: ListSandboxesQuerySchema } }, async (req) => {
    const wanted = metadataFilter(req.query.metadata);
    return e2b
      .all()
      .filter((s) => s.live && wanted.every(([k, v]) => s.params.metadata[k] === v))
      .map(listed);
  });

  app.get('/sandboxes/:sandboxID', { schema: { summary: 'E2B: a sandbox', params: IdParams } }, async (req) => detail(running(req.params.sandboxID)));

  app.delete('/sandboxes/:sandboxID', { schema: { summary: 'E2B: kill a sandbox', params: IdParams } }, async (req, reply) => {
    if (!(await e2b.kill(req.params.sandboxID)))
      throw new E2bApiError(404, `sandbox ${req.params.sandboxID} does not exist (it was killed, reached its timeout, or never existed)`);
    return reply.code(204).send();
  });

  app.post(
    '/sandboxes/:sandboxID/timeout',
    { schema: { summary: 'E2B: set when a sandbox ends', params: IdParams, body: SandboxTimeoutSchema } },
    async (req, reply) => {
      const s = running(req.params.sandboxID);
      const ms = Math.max(1, req.body.timeout) * 1000;
      e2b.checkTimeout(ms);
      s.setTimeoutMs(ms);
      return reply.code(204).send();
    },
  );

  app.post(
    '/sandboxes/:sandboxID/refreshes',
    { schema: { summary: 'E2B: keep a sandbox alive', params: IdParams, body: SandboxRefreshSchema.nullish() } },
    async (req, reply) => {
      const s = running(req.params.sandboxID);
      const ms = req.body?.duration !== undefined ? Math.max(1, req.body.duration) * 1000 : s.params.timeoutMs;
      e2b.checkTimeout(ms);
      // a refresh never shortens a sandbox's life
      if (s.endAt < Date.now() + ms) s.setTimeoutMs(ms);
      return reply.code(204).send();
    },
  );

  app.post(
    '/sandboxes/:sandboxID/pause',
    { schema: { summary: 'E2B: pause a sandbox (the engine pauses its container)', params: IdParams, body: SandboxPauseSchema.nullish() } },
    async (req, reply) => {
      if (req.body?.memory === false)
        throw new E2bApiError(400, 'a pause without its memory does not exist on this server: the engine freezes the processes, memory and all');
      await running(req.params.sandboxID).pause();
      return reply.code(204).send();
    },
  );

  /** connect: a paused sandbox resumes (201), a running one answers (200); its timeout is set (resumed) or only extended (running) */
  const connect = async (id: string, body: { timeout?: number } | null | undefined, reply: FastifyReply, resumeOnly: boolean) => {
    const s = running(id);
    const ms = body?.timeout !== undefined ? Math.max(1, body.timeout) * 1000 : null;
    if (ms !== null) e2b.checkTimeout(ms);
    if (s.state === 'paused') {
      await s.resume();
      if (ms !== null) s.setTimeoutMs(ms);
      return reply.code(201).send(created(s));
    }
    if (resumeOnly) throw new E2bApiError(409, `sandbox ${s.id} is already running`);
    if (ms !== null && s.endAt < Date.now() + ms) s.setTimeoutMs(ms);
    return reply.code(200).send(created(s));
  };
  const connectSchema = { params: IdParams, body: ConnectSandboxSchema.nullish() };
  app.post('/sandboxes/:sandboxID/connect', { schema: { summary: 'E2B: connect to a sandbox, resuming it when paused', ...connectSchema } }, (req, reply) =>
    connect(req.params.sandboxID, req.body, reply, false),
  );
  app.post('/v2/sandboxes/:sandboxID/connect', { schema: { summary: 'E2B: connect to a sandbox, resuming it when paused', ...connectSchema } }, (req, reply) =>
    connect(req.params.sandboxID, req.body, reply, false),
  );
  app.post('/sandboxes/:sandboxID/resume', { schema: { summary: 'E2B: resume a paused sandbox', ...connectSchema } }, (req, reply) =>
    connect(req.params.sandboxID, req.body, reply, true),
  );

  app.get(
    '/sandboxes/:sandboxID/metrics',
    { schema: { summary: "E2B: a sandbox's resource use (one entry: its use so far)", params: IdParams } },
    async (req) => {
      const s = running(req.params.sandboxID);
      return [await metricOf(s, runtime)];
    },
  );
}

/** `k=v&k2=v2` (each part URL-encoded, the whole once more by the query) as pairs */
function metadataFilter(q: string | undefined): [string, string][] {
  if (!q) return [];
  return [...new URLSearchParams(q).entries()].map(([k, v]) => [safeDecode(k), safeDecode(v)]);
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

function first(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** one metric of a sandbox: its CPU over its life so far, the most memory it held, what it wrote, against its bounds */
export async function metricOf(s: E2bSandbox, runtime: OpenEnvRuntime): Promise<SandboxMetric> {
  const now = Date.now();
  const res = s.spec?.resources;
  const handle = s.handle;
  const reading = handle && runtime.sandbox.usage ? await runtime.sandbox.usage.read(handle, AbortSignal.timeout(E2B_METRIC_READ_MS)).catch(() => null) : null;
  const lifeS = Math.max(0.001, (now - (s.startedAt ?? now)) / 1000);
  const cpus = res?.cpus ?? 1;
  return {
    timestamp: new Date(now).toISOString(),
    timestampUnix: Math.floor(now / 1000),
    cpuCount: cpus,
    cpuUsedPct: reading?.cpuS != null ? Math.min(100, (100 * reading.cpuS) / lifeS / cpus) : 0,
    memUsed: reading?.peakMemoryBytes ?? 0,
    memTotal: (res?.memoryMb ?? 0) * MIB,
    memCache: 0,
    diskUsed: reading?.bytesWritten ?? 0,
    diskTotal: (res?.storageMb ?? 0) * MIB,
  };
}

const E2B_METRIC_READ_MS = 2000;
