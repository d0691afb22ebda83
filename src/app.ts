/**
 * buildApp(bundle | path, options): the Fastify instance serving a bundle as an OpenEnv
 * environment. It never listens (serve.ts does). Mirrors Python's
 * build_app(bundle_dir, max_concurrent_envs=64, token=..., reward=..., reset_timeout=...).
 * A composition only: the runtime (episode machinery) and the plugins and routes in front of it.
 */
import websocket from '@fastify/websocket';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from 'fastify';
import pino, { type Logger } from 'pino';
import { loadBundle, type ImageProgress, type LoadedBundle } from './bundle/index.js';
import { formatZodError, OptionsSchema, type ServerOptionsInput } from './config.js';
import { CLOSE_GRACE_MS, MAX_FRAME_BYTES } from './defaults.js';
import type { RewardFn } from './episodes/reward.js';
import { refuseEpisodeSources } from './gateway/index.js';
import { autoMaxConnections, ConnectionGuard } from './http-connections.js';
import { loggerHygiene } from './logging.js';
import auth, { pathTokenRewriter, tokenProblem } from './plugins/auth.js';
import httpErrors from './plugins/errors.js';
import openapi from './plugins/openapi.js';
import requestLog from './plugins/request-log.js';
import siteGuard from './plugins/site-guard.js';
import zodSchemas from './plugins/zod-schemas.js';
import { e2bApiRoutes } from './routes/e2b-api.js';
import { e2bEnvdRoutes } from './routes/e2b-envd.js';
import { episodesRoutes } from './routes/episodes.js';
import { infoRoutes } from './routes/info.js';
import { consoleRoutes } from './routes/console.js';
import { mcpRoutes } from './routes/mcp.js';
import { metricsRoutes } from './routes/metrics.js';
import { webRoutes } from './routes/web.js';
import { wsRoutes } from './routes/ws.js';
import { createRuntime, type OpenEnvRuntime } from './runtime.js';
import type { Sandbox } from './sandbox/sandbox.js';

export type { OpenEnvRuntime } from './runtime.js';

export interface AppOptions extends Omit<
  ServerOptionsInput,
  'reward' | 'tokenEnv' | 'tokenFile' | 'host' | 'port' | 'insecureNoToken' | 'buildArg' | 'sandbox'
> {
  /** bearer token; null or undefined: the server is open */
  token?: string | null;
  /** `mean|sum|min|max|<score name>` or a function of the scores */
  reward?: string | RewardFn;
  /** build arguments for the env images, e.g. { NODE_IMAGE: 'my/node:20' } */
  buildArgs?: Record<string, string>;
  /** which sandbox to make (`docker`, the default, or `swarm`), or one to inject (tests) */
  sandbox?: Sandbox | 'docker' | 'swarm';
  /** a pino logger to use; default: JSON on stdout at logLevel */
  logger?: Logger;
  /** how often the reconciler compares the engine with the live episodes (ms) */
  reconcileIntervalMs?: number;
  /** sweep this instance's leftovers at start (default true) */
  sweepOnStart?: boolean;
  /** how far the start-up's env images are (a terminal's progress bar); default: log lines only */
  imageProgress?: ImageProgress;
}

declare module 'fastify' {
  interface FastifyInstance {
    openenv: OpenEnvRuntime;
    /** the client connections: their header deadline, their bound, the close at shutdown */
    connections: ConnectionGuard;
  }
}

export async function buildApp(bundleOrPath: string | LoadedBundle, options: AppOptions = {}): Promise<FastifyInstance> {
  const { token = null, reward, buildArgs, sandbox, logger, reconcileIntervalMs, sweepOnStart, imageProgress, ...rest } = options;
  const injected = typeof sandbox === 'object' ? sandbox : undefined;
  const parsed = OptionsSchema.safeParse({
    ...rest,
    reward: typeof reward === 'string' ? reward : undefined,
    sandbox: typeof sandbox === 'string' ? sandbox : undefined,
  });
  if (!parsed.success) throw new Error(`invalid buildApp options:\n${formatZodError(parsed.error, (k) => k)}`);
  if (token && tokenProblem(token)) throw new Error(`invalid buildApp options:\ntoken: ${tokenProblem(token)}`);
  const opts = parsed.data;
  const bundle = typeof bundleOrPath === 'string' ? await loadBundle(bundleOrPath) : bundleOrPath;
  const log = logger ?? pino({ level: opts.logLevel, ...loggerHygiene(token) });
  if (opts.tokenInPath && !token) log.warn('--token-in-path is ignored: the server has no token');

  const runtime = await createRuntime({ options: opts, bundle, log, reward, buildArgs, sandbox: injected, reconcileIntervalMs, sweepOnStart, imageProgress });
  const app = Fastify({
    loggerInstance: log as unknown as FastifyBaseLogger,
    trustProxy: opts.trustProxy ? opts.trustProxy.split(',').map((s) => s.trim()) : false,
    bodyLimit: MAX_FRAME_BYTES,
    // every socket has a deadline: the headers (checked often enough to hold it), the whole request
    requestTimeout: opts.requestTimeout * 1000,
    http: {
      headersTimeout: opts.headersTimeout * 1000,
      connectionsCheckingInterval: Math.min(5000, Math.max(100, (opts.headersTimeout * 1000) / 4)),
    },
    // one line per request, written when it is answered (plugins/request-log.ts), not fastify's two
    logController: new LogController({ disableRequestLogging: true }),
    // a URL the router refuses (a path parameter over 100 characters, bad percent-encoding) is
    // answered in our shape, without echoing the URL back
    frameworkErrors: (err, req, reply) => {
      const tooLong = (err as { code?: string }).code === 'FST_ERR_MAX_PARAM_LENGTH';
      req.log.info({ event: 'bad_url', code: (err as { code?: string }).code }, 'refused a malformed URL');
      void (reply as unknown as FastifyReply)
        .code(tooLong ? 414 : 400)
        .header('content-type', 'application/json; charset=utf-8')
        .send({
          error: tooLong ? 'uri_too_long' : 'invalid_request',
          message: tooLong ? 'a path parameter is longer than 100 characters: no episode id or file name is' : 'the URL is malformed (bad percent-encoding)',
        });
    },
    // --token-in-path: /t/<token>/... is stripped before routing (HTTP and WebSocket upgrades)
    ...(opts.tokenInPath && token ? { rewriteUrl: pathTokenRewriter(token) } : {}),
  });
  app.decorate('openenv', runtime);
  // with the gateway on, envs are meant to reach the server: never its API, only their doors
  // (and with an egress allowlist, which gives sandboxes a way to the host: never its API either)
  if ((runtime.modelAccess || opts.egressAllow.length > 0) && opts.sandbox === 'docker') refuseEpisodeSources(app.server, opts.subnetPool);
  const connections = new ConnectionGuard(app.server, {
    max: opts.maxConnections || autoMaxConnections(opts.maxConcurrentEnvs),
    headersTimeoutMs: opts.headersTimeout * 1000,
    log,
  });
  app.decorate('connections', connections);

  await app.register(requestLog);
  await app.register(zodSchemas);
  await app.register(httpErrors);
  // before any route: it documents every route registered after it
  await app.register(openapi, { title: bundle.manifest.name, description: bundle.manifest.description ?? bundle.description ?? '', bearer: Boolean(token) });
  // The websocket plugin's hooks go first: an upgrade answered with plain HTTP (401, 404...) keeps
  // its socket (Node's HTTP server let go of it at 'upgrade'), which would hold server.close()
  // forever; the plugin closes it, but only for requests its own onRequest hook has seen.
  await app.register(websocket, {
    options: { maxPayload: MAX_FRAME_BYTES },
    // an error on an open socket is the peer's (a frame over the limit, bad UTF-8, a reset
    // connection): ws has already closed it with the right code; a warning, not a stack
    errorHandler: (err, socket, req) => {
      req.log.warn({ event: 'ws_protocol_error', message: err.message, code: (err as { code?: string }).code }, 'WebSocket error from the peer; closing');
      socket.terminate();
    },
  });
  await app.register(siteGuard, { allowedHosts: opts.allowedHosts, allowedOrigins: opts.allowedOrigins });
  // the E2B side guards itself: the API key (the same token) and each sandbox's access token
  await app.register(auth, { token, ownGuard: (path) => path === '/e2b' || path.startsWith('/e2b/') });
  await app.register(infoRoutes, { runtime });
  await app.register(wsRoutes, { runtime });
  await app.register(episodesRoutes, { runtime });
  await app.register(mcpRoutes, { runtime });
  await app.register(metricsRoutes, { runtime });
  await app.register(consoleRoutes, { runtime });
  await app.register(webRoutes);
  await app.register(e2bApiRoutes, { prefix: '/e2b', runtime, token });
  await app.register(e2bEnvdRoutes, { prefix: '/e2b/envd', runtime });

  // Open WebSockets block server.close(): they are closed by the drain, before it. So do idle
  // and half-sent connections and streams whose reader went away: once drained, those not in a
  // request are closed until the server is, and after CLOSE_GRACE_MS every one left.
  app.addHook('preClose', async () => {
    await runtime.drain();
    const closeInactive = setInterval(() => connections.closeInactive(), 100);
    const closeAll = setTimeout(() => app.server.closeAllConnections(), CLOSE_GRACE_MS);
    closeInactive.unref();
    closeAll.unref();
    app.server.once('close', () => {
      clearInterval(closeInactive);
      clearTimeout(closeAll);
    });
    connections.closeInactive();
  });
  app.addHook('onClose', async () => {
    await runtime.close();
    if (typeof bundleOrPath === 'string') await bundle.cleanup();
  });
  return app;
}
