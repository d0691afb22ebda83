/**
 * buildApp(bundle | path, options): the Fastify instance serving a bundle as an OpenEnv
 * environment. It never listens (serve.ts does). Mirrors Python's
 * build_app(bundle_dir, max_concurrent_envs=64, token=..., reward=..., reset_timeout=...).
 */
import websocket from '@fastify/websocket';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import { loadBundle, type LoadedBundle } from './bundle/index.js';
import { buildArgRecord, formatZodError, OptionsSchema, type ServerOptions, type ServerOptionsInput } from './config.js';
import { Admission } from './episodes/admission.js';
import type { EpisodeSettings } from './episodes/episode.js';
import { EpisodeHistory } from './episodes/history.js';
import { EpisodeManager } from './episodes/manager.js';
import { EpisodeRecorder } from './episodes/recorder.js';
import { makeReward, type RewardFn } from './episodes/reward.js';
import { toHttpError } from './errors.js';
import { EnvCatalog } from './images.js';
import { Metrics } from './metrics.js';
import { pathTokenRewriter, registerAuth } from './plugins/auth.js';
import { loggerHygiene } from './plugins/logging.js';
import { episodesRoutes, RequestEpisodes } from './routes/episodes.js';
import { infoRoutes } from './routes/info.js';
import { McpService, mcpRoutes, wsMcpHandler } from './routes/mcp.js';
import { consoleRoutes } from './routes/console.js';
import { collectRoutes, openapiRoutes } from './routes/openapi.js';
import { webRoutes } from './routes/web.js';
import { MAX_FRAME_BYTES, wsRoutes, type McpHandler, type WsSession } from './routes/ws.js';
import { createDockerSandbox } from './sandbox/docker/factory.js';
import type { Sandbox } from './sandbox/sandbox.js';

export interface AppOptions extends Omit<ServerOptionsInput, 'reward' | 'tokenEnv' | 'host' | 'port' | 'insecureNoToken' | 'buildArg'> {
  /** bearer token; null or undefined: the server is open */
  token?: string | null;
  /** `mean|sum|min|max|<score name>` or a function of the scores */
  reward?: string | RewardFn;
  /** build arguments for the env images, e.g. { NODE_IMAGE: 'my/node:20' } */
  buildArgs?: Record<string, string>;
  /** inject a sandbox (tests); default: Docker */
  sandbox?: Sandbox;
  /** a pino logger to use; default: JSON on stdout at logLevel */
  logger?: Logger;
  /** how often the reconciler compares the engine with the live episodes (ms) */
  reconcileIntervalMs?: number;
  /** sweep this instance's leftovers at start (default true) */
  sweepOnStart?: boolean;
}

export interface OpenEnvRuntime {
  bundle: LoadedBundle;
  options: ServerOptions;
  manager: EpisodeManager;
  admission: Admission;
  sandbox: Sandbox;
  metrics: Metrics;
  catalog: EnvCatalog;
  sessions: Set<WsSession>;
  /** resolves when the engine answered, leftovers were swept and every env image exists */
  ready: Promise<void>;
  /** SIGTERM: no new episodes, waiting resets refused, every episode torn down within the budget */
  drain(timeoutMs?: number): Promise<{ tornDown: number; timedOut: boolean }>;
  setMcpHandler(h: McpHandler): void;
}

declare module 'fastify' {
  interface FastifyInstance {
    openenv: OpenEnvRuntime;
  }
}

export async function buildApp(bundleOrPath: string | LoadedBundle, options: AppOptions = {}): Promise<FastifyInstance> {
  const { token, reward, buildArgs, sandbox: injected, logger, reconcileIntervalMs, sweepOnStart, ...rest } = options;
  const parsed = OptionsSchema.safeParse({ ...rest, reward: typeof reward === 'string' ? reward : undefined });
  if (!parsed.success) {
    throw new Error(`invalid buildApp options:\n${formatZodError(parsed.error, (k) => k)}`);
  }
  const opts = parsed.data;
  const bundle = typeof bundleOrPath === 'string' ? await loadBundle(bundleOrPath) : bundleOrPath;
  const log = logger ?? pino({ level: opts.logLevel, ...loggerHygiene(token ?? null) });

  const app = Fastify({
    loggerInstance: log as unknown as FastifyBaseLogger,
    trustProxy: opts.trustProxy ? opts.trustProxy.split(',').map((s) => s.trim()) : false,
    bodyLimit: MAX_FRAME_BYTES,
    // --token-in-path: /t/<token>/... is stripped before routing (HTTP and WebSocket upgrades)
    ...(opts.tokenInPath && token ? { rewriteUrl: pathTokenRewriter(token) } : {}),
  });
  if (opts.tokenInPath && !token) log.warn('--token-in-path is ignored: the server has no token');
  // every route from here on, for /openapi.json
  const servedRoutes = collectRoutes(app);

  let sandbox: Sandbox;
  if (injected) {
    sandbox = injected;
  } else {
    const made = await createDockerSandbox({
      instance: opts.instance,
      bundleName: bundle.manifest.name,
      subnetPool: opts.subnetPool,
      inContainer: opts.inContainer,
      logger: log.child({ component: 'sandbox' }),
    });
    sandbox = made.sandbox;
    if (made.attachedTo) log.info({ container: made.attachedTo.slice(0, 12) }, 'running in a container: joining each episode network to reach its env');
  }

  const settings: EpisodeSettings = {
    resetTimeoutMs: opts.resetTimeout * 1000,
    toolTimeoutMs: opts.toolTimeout * 1000,
    episodeTimeoutMs: opts.episodeTimeout * 1000,
    maxSteps: opts.maxSteps,
  };
  const rewardFn = makeReward(reward ?? bundle.manifest.reward);
  const sessions = new Set<WsSession>();
  const catalog = new EnvCatalog(bundle, sandbox, { ...buildArgRecord(opts.buildArg), ...(buildArgs ?? {}) }, log.child({ component: 'images' }));
  const admission = new Admission(opts.maxConcurrentEnvs, opts.maxWaiting);
  const metrics = new Metrics({
    running: () => admission.activeCount,
    waiting: () => admission.waitingCount,
    capacity: () => admission.capacity,
    networks: () => sandbox.networksInUse(),
  });
  // the web console's memory of episodes, and --record's transcript file
  const recorder = opts.record ? new EpisodeRecorder(opts.record, log.child({ component: 'recorder' })) : null;
  const history = new EpisodeHistory({ size: opts.history, onFinal: recorder ? (t) => recorder.write(t) : undefined });
  const manager = new EpisodeManager(
    { bundle, sandbox, admission, envSpec: (name) => catalog.spec(name), settings, reward: rewardFn, log, metrics, observer: history },
    log,
  );

  const ready = (async () => {
    await sandbox.ping();
    if (sweepOnStart !== false) {
      const swept = await sandbox.sweep();
      if (swept.containers.length || swept.networks.length) {
        log.warn({ event: 'startup_sweep', instance: opts.instance, containers: swept.containers, networks: swept.networks }, `removed ${swept.containers.length} container(s) and ${swept.networks.length} network(s) a previous run of instance "${opts.instance}" left behind`);
      } else {
        log.info({ event: 'startup_sweep', instance: opts.instance }, 'nothing left behind by a previous run');
      }
    }
    await catalog.buildAll();
    manager.startReconciler(reconcileIntervalMs ?? 60_000);
  })();
  let readyError: Error | null = null;
  let isReady = false;
  ready.then(
    () => (isReady = true),
    (e: Error) => {
      readyError = e;
      log.error({ err: e.message }, 'the server cannot serve episodes');
    },
  );
  // episodes wait for the images; a failed start-up fails their deploy with the reason
  catalog.gate(ready);

  let lastPing = { at: 0, ok: true };
  const unhealthy = async (): Promise<string | null> => {
    if (manager.isDraining) return 'draining: the server is shutting down';
    if (readyError) return `start-up failed: ${(readyError as Error).message}`;
    if (!isReady) return catalog.building ? 'building env images' : 'starting';
    if (Date.now() - lastPing.at > 2000) {
      lastPing = { at: Date.now(), ok: await sandbox.ping().then(() => true, () => false) };
    }
    return lastPing.ok ? null : 'the Docker engine does not answer';
  };

  let mcp: McpHandler | undefined;
  let drained: Promise<{ tornDown: number; timedOut: boolean }> | null = null;
  const drain = (timeoutMs = opts.shutdownTimeout * 1000) => {
    drained ??= (async () => {
      const closing = Promise.all([...sessions].map((s) => s.shutdown()));
      const result = await manager.drain(timeoutMs);
      await closing;
      return result;
    })();
    return drained;
  };

  app.decorate('openenv', {
    bundle,
    options: opts,
    manager,
    admission,
    sandbox,
    metrics,
    catalog,
    sessions,
    ready,
    drain,
    setMcpHandler: (h: McpHandler) => (mcp = h),
  } satisfies OpenEnvRuntime);

  app.setErrorHandler((err, req, reply) => {
    const { status, body } = toHttpError(err);
    if (status >= 500) req.log.error({ err }, 'request failed');
    const e = err as Error;
    if (status === 500 && (err as { statusCode?: number }).statusCode && (err as { statusCode: number }).statusCode < 500) {
      // fastify's own 4xx (bad JSON body, payload too large...): keep its status and message
      const code = (err as { statusCode: number }).statusCode;
      return reply.code(code).send({ error: 'invalid_request', message: e.message });
    }
    if (body.error === 'capacity_reached') reply.header('retry-after', String((body as { retry_after_s?: number }).retry_after_s ?? 1));
    return reply.code(status).send(body);
  });
  app.setNotFoundHandler((req, reply) => reply.code(404).send({ error: 'not_found', message: `no route ${req.method} ${req.url.split('?')[0]}` }));

  // Docker's healthcheck polls /health every few seconds and Prometheus scrapes /metrics: their
  // request lines would drown the episodes' in an operator's log (an error they raise still shows).
  app.addHook('onRoute', (route) => {
    if (route.url === '/health' || route.url === '/metrics') route.logLevel = 'warn';
  });
  // The websocket plugin's hooks go first: an upgrade answered with plain HTTP (401, 404...) keeps
  // its socket (Node's HTTP server let go of it at 'upgrade'), which would hold server.close()
  // forever; the plugin closes it, but only for requests its own onRequest hook has seen.
  await app.register(websocket, { options: { maxPayload: MAX_FRAME_BYTES } });
  registerAuth(app, token ?? null);
  await app.register(infoRoutes, {
    bundle,
    unhealthy,
    settings: {
      max_concurrent_envs: opts.maxConcurrentEnvs,
      max_waiting: opts.maxWaiting,
      reset_timeout_s: opts.resetTimeout,
      tool_timeout_s: opts.toolTimeout,
      idle_timeout_s: opts.idleTimeout,
      episode_timeout_s: opts.episodeTimeout,
      max_steps: opts.maxSteps,
      reward: typeof reward === 'function' ? 'custom' : (reward ?? bundle.manifest.reward ?? 'mean'),
    },
  });
  await app.register(wsRoutes, {
    manager,
    sessions,
    idleTimeoutMs: opts.idleTimeout * 1000,
    pingIntervalMs: opts.pingInterval * 1000,
    get mcp() {
      return mcp;
    },
  });
  const requestEpisodes = new RequestEpisodes(opts.idleTimeout * 1000, log.child({ component: 'http-episodes' }));
  const mcpService = new McpService({ manager, tracker: requestEpisodes, bundle, log: log.child({ component: 'mcp' }) });
  app.openenv.setMcpHandler(wsMcpHandler(mcpService));
  await app.register(episodesRoutes, { manager, tracker: requestEpisodes });
  await app.register(mcpRoutes, { service: mcpService });
  await app.register(consoleRoutes, { bundle, history, admission, recorder, isDraining: () => manager.isDraining });
  await app.register(webRoutes);
  await app.register(openapiRoutes, {
    routes: servedRoutes,
    info: { title: bundle.manifest.name, description: bundle.manifest.description ?? bundle.description ?? '', bearer: Boolean(token) },
  });
  app.get('/metrics', async (_req, reply) => {
    reply.header('content-type', metrics.registry.contentType);
    return metrics.registry.metrics();
  });

  // Open WebSockets block server.close(): close them first.
  app.addHook('preClose', async () => {
    await drain();
  });
  app.addHook('onClose', async () => {
    await ready.catch(() => undefined);
    await drain();
    await recorder?.flush();
    manager.stopReconciler();
    if (!injected) await sandbox.close();
    if (typeof bundleOrPath === 'string') await bundle.cleanup();
  });
  return app;
}
