/**
 * The episode machinery of one server, without HTTP: the sandbox, the env images, admission,
 * the episodes, the sessions that hold them, metrics, start-up (engine check, sweep, image
 * builds), health and the drain. `buildApp` puts routes in front of it.
 *
 * Long because it wires the whole machinery once, in the order a start needs (sandbox, images,
 * admission, pool, episodes, sessions, health, the drain); every part it wires lives in a room of
 * its own.
 */
import type { Logger } from 'pino';
import { abortError, isAbortError } from './util/abort.js';
import { EnvCatalog, type ImageProgress, type LoadedBundle } from './bundle/index.js';
import { buildArgRecord, layerDefaults, networkStockSize, schemaDefault, SERVER_OPTIONS, splitLanes, type ServerOptions } from './config.js';
import { CHECK_INSTANCE_PREFIX, DEFAULT_REWARD } from './defaults.js';
import { Admission } from './episodes/capacity/admission.js';
import { DeployLimiter } from './episodes/capacity/deploy-limiter.js';
import { WarmPool } from './episodes/capacity/pool.js';
import type { EpisodeSettings } from './episodes/episode.js';
import { EpisodeHistory } from './console/history.js';
import { EpisodeManager } from './episodes/manager.js';
import { ModelAccess } from './episodes/model-access.js';
import { ipv4Forwarding, ModelGateway, UpstreamSchema, wildcardListenPorts, type GatewayObserver } from './gateway/index.js';
import { checkRecordDir, EpisodeRecorder } from './console/recorder.js';
import { makeReward, type RewardFn } from './episodes/reward.js';
import { Metrics } from './metrics.js';
import { createDockerSandbox } from './sandbox/docker/factory.js';
import { createSwarmSandbox } from './sandbox/swarm/factory.js';
import type { Sandbox } from './sandbox/sandbox.js';
import type { EnvGrant } from './protocol/bundle.js';
import { Sessions } from './sessions/sessions.js';
import { E2bSandboxes } from './e2b/sandboxes.js';
import { resolveEgressAllow } from './e2b/egress.js';

/** A deploy that gets its turn starts after a random 0..this delay, so a burst does not hit the engine in lockstep. */
const DEPLOY_JITTER_MS = 20;

/** How often the reconciler compares the engine's labelled resources with the live episodes. */
const RECONCILE_INTERVAL_MS = 60_000;

/** /health asks the engine at most this often. */
const HEALTH_ENGINE_CHECK_MS = 2000;

export interface RuntimeOptions {
  options: ServerOptions;
  bundle: LoadedBundle;
  log: Logger;
  reward?: string | RewardFn;
  buildArgs?: Record<string, string>;
  /** an injected sandbox (tests); default: Docker, owned (closed) by the runtime */
  sandbox?: Sandbox;
  /** puts a sandbox of the caller's in front of the runtime's (injected or made), e.g. check's env reuse; the runtime closes what it made through it */
  wrapSandbox?: (sandbox: Sandbox) => Sandbox;
  reconcileIntervalMs?: number;
  sweepOnStart?: boolean;
  /** how far the env images are, drawn in place (a terminal's progress bar); default: log lines with n/total */
  imageProgress?: ImageProgress;
  /** `ready` waits for every env image (openenv-bundle check); default: they are made in the background once the server is ready */
  imagesFirst?: boolean;
}

export interface OpenEnvRuntime {
  bundle: LoadedBundle;
  options: ServerOptions;
  manager: EpisodeManager;
  admission: Admission;
  /** --max-concurrent-deploys */
  deploys: DeployLimiter;
  /** --warm-pool above 0 */
  pool: WarmPool | null;
  sandbox: Sandbox;
  metrics: Metrics;
  catalog: EnvCatalog;
  sessions: Sessions;
  /** what the web console shows: live transcripts and the last --history ended episodes */
  history: EpisodeHistory;
  /** --record: every ended episode's transcript appended to a daily JSONL file */
  recorder: EpisodeRecorder | null;
  /** the E2B-compatible sandboxes (src/e2b/, docs/e2b.md) */
  e2b: E2bSandboxes;
  /** the model gateway's side of episodes (--model-url or --model-from-reset), else null */
  modelAccess: ModelAccess | null;
  /** the reward as /bundle reports it: a rule's name, or "custom" */
  rewardName: string;
  /** env name → what it runs with (the lock-down, docs/security.md), each once its image is ready (absent before, and when the sandbox sets none) */
  granted: Record<string, EnvGrant>;
  /** resolves when the engine answered, leftovers were swept and the toolbox is ready (with imagesFirst: every env image exists too) */
  ready: Promise<void>;
  /** resolves when every env image is ready, failed or missing, and each ready env's lock-down is in `granted` (never rejects) */
  imagesSettled: Promise<void>;
  /** null when the server can serve episodes, else why not (for /health) */
  unhealthy(): Promise<string | null>;
  /** SIGTERM: no new episodes, waiting resets refused, every episode torn down within the budget */
  drain(timeoutMs?: number): Promise<{ tornDown: number; timedOut: boolean }>;
  /** after the drain: stops the reconciler and releases the sandbox (if the runtime made it) */
  close(): Promise<void>;
}

export async function createRuntime(ro: RuntimeOptions): Promise<OpenEnvRuntime> {
  const { options: opts, bundle, log } = ro;
  // a folder that cannot take the records is refused now, not at the first ended episode
  if (opts.record) await checkRecordDir(opts.record);
  let sandbox: Sandbox;
  /** where this process reaches envs from (what an env could reach through it), when it made a Docker sandbox */
  let placement: 'host' | 'container' | null = null;
  if (ro.sandbox) {
    sandbox = ro.sandbox;
  } else {
    const made =
      opts.sandbox === 'swarm'
        ? await createSwarmSandbox({
            instance: opts.instance,
            bundleName: bundle.manifest.name,
            registry: opts.registry ?? null,
            nodeEngines: opts.swarmNodeEngine,
            networkStock: networkStockSize(opts),
            runtime: opts.runtime,
            layerDefaults: layerDefaults(opts),
            ...(opts.toolbox !== undefined ? { toolbox: opts.toolbox } : {}),
            logger: log.child({ component: 'sandbox' }),
          })
        : await createDockerSandbox({
            instance: opts.instance,
            bundleName: bundle.manifest.name,
            subnetPool: opts.subnetPool,
            inContainer: opts.inContainer,
            networkStock: networkStockSize(opts),
            runtime: opts.runtime,
            recycleNetworks: !opts.noNetworkRecycling,
            stockForShell: stockForShell(bundle, opts),
            ...(opts.toolbox !== undefined ? { toolbox: opts.toolbox } : {}),
            layerDefaults: layerDefaults(opts),
            logger: log.child({ component: 'sandbox' }),
          });
    sandbox = made.sandbox;
    if (opts.sandbox === 'docker') placement = made.attachedTo ? 'container' : 'host';
    if (made.attachedTo) {
      log.info(
        { container: made.attachedTo.slice(0, 12), sandbox: opts.sandbox },
        opts.sandbox === 'swarm'
          ? 'swarm: joining each episode overlay from this container to reach its env'
          : 'running in a container: joining each episode network to reach its env',
      );
    }
  }

  if (ro.wrapSandbox) sandbox = ro.wrapSandbox(sandbox);

  const settings: EpisodeSettings = {
    resetTimeoutMs: opts.resetTimeout * 1000,
    splitLanes: splitLanes(opts.splitPriority),
    toolTimeoutMs: opts.toolTimeout * 1000,
    episodeTimeoutMs: opts.episodeTimeout * 1000,
    maxSteps: opts.maxSteps,
  };
  // a rule for a split the bundle lacks does nothing: said, unless it is the default's (eval=high)
  const defaultRules = schemaDefault(SERVER_OPTIONS.splitPriority.schema) as string[];
  for (const [split, lane] of settings.splitLanes) {
    if (!Object.hasOwn(bundle.splits, split) && !defaultRules.includes(`${split}=${lane}`))
      log.warn({ split, lane }, `--split-priority ${split}=${lane}: the bundle has no split "${split}" (splits: ${Object.keys(bundle.splits).join(', ')})`);
  }
  const reward = ro.reward ?? opts.reward ?? bundle.manifest.reward;
  const catalog = new EnvCatalog(bundle, sandbox, { ...buildArgRecord(opts.buildArg), ...(ro.buildArgs ?? {}) }, log.child({ component: 'images' }), {
    concurrency: opts.imageBuildConcurrency,
    mode: opts.images,
    ...(ro.imageProgress ? { progress: ro.imageProgress } : {}),
  });
  const admission = new Admission(opts.maxConcurrentEnvs, opts.maxWaiting);
  const deploys = new DeployLimiter({ limit: opts.maxConcurrentDeploys, jitterMs: DEPLOY_JITTER_MS });
  let pool: WarmPool | null = null;
  let e2b: E2bSandboxes | null = null;
  const metrics = new Metrics({
    // slots the warm pool and E2B sandboxes hold are not episodes
    running: () => admission.activeCount - (pool?.slotsHeld ?? 0) - (e2b?.slotsHeld ?? 0),
    sandboxes: () => e2b?.counts() ?? { waiting: 0, deploying: 0, running: 0, paused: 0 },
    deploysInFlight: () => deploys.inFlight,
    deploysWaiting: () => deploys.waiting,
    pool: () => pool?.status() ?? null,
    waiting: () => admission.waitingByLane(),
    capacity: () => admission.capacity,
    networks: () => sandbox.networksInUse(),
    networkStock: () => sandbox.stock?.stats() ?? null,
    envImages: () => catalog.counts(),
  });
  const recorder = opts.record ? new EpisodeRecorder(opts.record, log.child({ component: 'recorder' })) : null;
  const history = new EpisodeHistory({ size: opts.history, onFinal: recorder ? (t) => recorder.write(t) : undefined });
  const gatewayLog = log.child({ component: 'gateway' });
  const modelAccess = makeModelAccess(opts, sandbox, gatewayLog, {
    // every call goes into its episode's transcript (the console, --record), before its teardown ends
    call: (r) => {
      history.onModelCall(r);
      metrics.modelCalls.inc({ outcome: r.outcome });
      if (r.outcome === 'ok') metrics.modelCallSeconds.observe({ stream: String(r.stream) }, r.latency_ms / 1000);
      if (r.usage) {
        metrics.modelTokens.inc({ kind: 'input' }, r.usage.input_tokens);
        metrics.modelTokens.inc({ kind: 'output' }, r.usage.output_tokens);
      }
      gatewayLog.debug(
        { event: 'model_call', episode_id: r.episode_id, seq: r.seq, api: r.api, status: r.status, outcome: r.outcome, ms: r.latency_ms, usage: r.usage },
        'model call',
      );
    },
    ended: (id, end) => {
      const episode = manager.get(id);
      if (episode) episode.modelAccessEnded(end.reason, end.message);
      else e2b?.get(id)?.modelAccessEnded(end);
    },
  });
  if (modelAccess) {
    gatewayLog.info(
      { event: 'gateway_on', model_url: opts.modelUrl ?? null, model: opts.model ?? null, from_reset: opts.modelFromReset, port: opts.gatewayPort },
      "the model gateway is on: each episode's env gets a credential and a door on its network",
    );
    warnOfExposure(placement, gatewayLog);
  }
  if (opts.warmPool > 0) {
    pool = new WarmPool({
      size: opts.warmPool,
      group: opts.warmPoolGroup,
      ...(modelAccess ? { doors: modelAccess } : {}),
      bundle,
      sandbox,
      admission,
      deploys,
      // refills deploy only envs whose image is ready (a slot is not held through a build), told as each one is
      envSpec: async (name) => catalog.spec(name, { first: false }),
      imageReady: (name) => catalog.imageState(name) === 'ready',
      metrics,
      log: log.child({ component: 'pool' }),
      ...(sandbox.shell ? { shell: sandbox.shell } : {}),
    });
  }
  const manager = new EpisodeManager(
    {
      bundle,
      sandbox,
      admission,
      deploys,
      pool: pool ?? undefined,
      envSpec: (name, wait) => catalog.spec(name, wait),
      settings,
      reward: makeReward(reward),
      log,
      metrics,
      observer: history,
      ...(modelAccess ? { modelAccess } : {}),
    },
    log,
  );
  // --egress-allow's hosts, resolved once at start (a create waits for them; a failure fails the start)
  const egressAllow = resolveEgressAllow(opts.egressAllow);
  egressAllow.catch(() => undefined);
  e2b = new E2bSandboxes({
    bundle,
    sandbox,
    admission,
    deploys,
    envSpec: async (name) => catalog.spec(name),
    settings: {
      resetTimeoutMs: settings.resetTimeoutMs,
      episodeTimeoutMs: settings.episodeTimeoutMs,
      imageKey: opts.e2bImageKey ?? null,
      imagePatterns: opts.e2bImages,
      egressAllow,
      modelDoor: opts.e2bModelDoor || opts.e2bModelDoorHost !== undefined ? { hostName: opts.e2bModelDoorHost ?? null } : null,
    },
    metrics,
    log: log.child({ component: 'e2b' }),
    observer: history,
    ...(modelAccess ? { modelAccess } : {}),
  });
  const sandboxes = e2b;
  manager.addHolder((id) => sandboxes.holds(id));
  const sessions = new Sessions({ manager, bundle, log, idleTimeoutMs: opts.idleTimeout * 1000, pingIntervalMs: opts.pingInterval * 1000 });

  const granted: Record<string, EnvGrant> = {};
  let imagesSettled!: () => void;
  const settledImages = new Promise<void>((r) => (imagesSettled = r));
  /** aborted by the drain: a start-up still building images stops there (the builds cancelled on the engine) */
  const startup = new AbortController();
  // an env image that failed is logged by the catalog, with its reason (unless a progress bar shows it)
  let imagesFailed = false;
  const ready = (async () => {
    await sandbox.ping();
    // every runtime an env is to run under, on the engine before anything runs (--runtime, an env's own ask)
    for (const r of new Set([opts.runtime, ...Object.values(bundle.manifest.envs).map((e) => e.security?.runtime)]))
      if (r && sandbox.lockdown) await sandbox.lockdown.checkRuntime(r);
    // --egress-allow: the host rules it needs can be set here, and its hosts resolve
    if (opts.egressAllow.length > 0) {
      if (!sandbox.egress) throw new Error('--egress-allow: this sandbox opens no egress (the Docker sandbox does)');
      await sandbox.egress.check();
      const entries = await egressAllow;
      log.info(
        { event: 'egress_allow', destinations: entries.map((e) => `${e.host}:${e.port} (${e.ips.join(', ')})`) },
        'sandboxes may reach these destinations, and nothing else',
      );
    }
    // --e2b-model-door on the engine's host: a sandbox's door is on its bridge's host address, and
    // the host's rules close the rest of the host to it (from a container the bridge has no host address)
    if (opts.e2bModelDoor || opts.e2bModelDoorHost !== undefined) {
      if (placement === 'host') {
        if (!sandbox.egress) throw new Error('--e2b-model-door: this sandbox sets no rules on its host (the Docker sandbox does)');
        await sandbox.egress.check().catch((e: Error) => {
          throw new Error(
            `--e2b-model-door on the engine's host closes the rest of the host to each sandbox with rules in INPUT, which this server cannot set; run it in a container (compose) instead, where a sandbox's network has no host address, or as below. ${e.message}`,
            { cause: e },
          );
        });
      }
      log.info(
        { event: 'e2b_model_door', host_name: opts.e2bModelDoorHost ?? null, port: opts.gatewayPort },
        opts.e2bModelDoorHost
          ? `each sandbox gets a model door, named ${opts.e2bModelDoorHost} inside it, that sends the harness's own key upstream`
          : 'each sandbox gets a model door with a credential of its own',
      );
    }
    // before anything is swept: refuses to start while a live server holds this instance name
    await sandbox.instanceClaim?.claim();
    if (ro.sweepOnStart !== false) {
      // `check` runs under a fresh name each time: what a killed one left is nobody's to sweep but ours
      const abandoned = await sandbox.deadInstances?.sweep(CHECK_INSTANCE_PREFIX);
      if (abandoned && abandoned.instances.length > 0) {
        log.warn(
          { event: 'abandoned_sweep', ...abandoned },
          `removed ${abandoned.containers.length} container(s) and ${abandoned.networks.length} network(s) that dead runs of ${abandoned.instances.join(', ')} left behind`,
        );
      }
      const swept = await sandbox.sweep();
      if (swept.containers.length || swept.networks.length) {
        log.warn(
          { event: 'startup_sweep', instance: opts.instance, containers: swept.containers, networks: swept.networks },
          `removed ${swept.containers.length} container(s) and ${swept.networks.length} network(s) a previous run of instance "${opts.instance}" left behind`,
        );
      } else {
        log.info({ event: 'startup_sweep', instance: opts.instance }, 'nothing left behind by a previous run');
      }
    }
    // networks are made ahead of demand while the images build, each in a refill turn of
    // --max-concurrent-deploys: resets go first, so a burst larger than the stock is not slowed
    // by its refills
    if (!manager.isDraining) sandbox.stock?.start((fn, signal) => deploys.run(fn, { priority: 'refill', signal }));
    // the images: all first (check), else in the background from here, a reset waiting for its own (docs/images.md)
    if (ro.imagesFirst) {
      await catalog.buildAll(startup.signal).catch((e: unknown) => {
        imagesFailed = !isAbortError(e);
        throw e;
      });
    } else {
      await catalog.prepare();
      catalog.start(startup.signal);
    }
    // the warm pool refills with an env once its image is ready
    for (const name of Object.keys(bundle.manifest.envs)) void catalog.settled(name).then(() => pool?.imagesChanged());
    // each env's lock-down once its image is ready
    const lockdown = sandbox.lockdown;
    if (lockdown) {
      const grants = Promise.all(
        Object.keys(bundle.manifest.envs).map(async (name) => {
          await catalog.settled(name);
          if (catalog.imageState(name) === 'ready') granted[name] = await lockdown.granted(catalog.specOf(name));
        }),
      ).then(() => log.info({ event: 'lockdown', envs: granted }, 'envs locked down'));
      void grants.catch((e: unknown) => log.warn({ err: (e as Error).message }, 'could not tell what the envs are granted')).finally(imagesSettled);
      if (ro.imagesFirst) await grants;
    } else {
      void catalog.allSettled().then(imagesSettled);
    }
    manager.startReconciler(ro.reconcileIntervalMs ?? RECONCILE_INTERVAL_MS);
    if (pool && !manager.isDraining) {
      log.info(
        { event: 'pool_start', warm_pool: opts.warmPool, max_concurrent_deploys: opts.maxConcurrentDeploys },
        `filling the warm pool with ${opts.warmPool} env(s)`,
      );
      pool.start();
    }
  })();
  let readyError: Error | null = null;
  let isReady = false;
  ready.then(
    () => (isReady = true),
    (e: Error) => {
      readyError = e;
      if (startup.signal.aborted && isAbortError(e)) log.info({ event: 'startup_stopped', err: e.message }, 'start-up stopped by the drain');
      // the failure once, where it is known: an image's by the catalog, any other here
      else if (imagesFailed && !ro.imageProgress?.quiet) log.error('the server cannot serve episodes: an env image could not be made (logged above)');
      else log.error({ err: e.message }, 'the server cannot serve episodes');
    },
  );
  // episodes wait for the start-up, then for their own env's image; a failed start-up fails their deploy with the reason
  catalog.gate(ready);

  let engineCheck = { at: 0, ok: true };
  // two servers found holding one instance name: the later one stops serving, saying why
  let lostInstance: string | null = null;
  sandbox.instanceClaim?.onLost((why) => {
    lostInstance = why;
    log.error({ event: 'instance_lost', instance: opts.instance }, `${why}: this server stops serving; stop it, or start it with another --instance`);
    void drain();
  });
  const unhealthy = async (): Promise<string | null> => {
    if (lostInstance) return `lost the instance name: ${lostInstance}`;
    if (manager.isDraining) return 'draining: the server is shutting down';
    if (readyError) return `start-up failed: ${readyError.message}`;
    if (!isReady) return 'starting';
    // one env's failed image fails its own resets; every one failed: nothing can be served
    const unavailable = catalog.allUnavailable();
    if (unavailable.length > 0) {
      const few = unavailable.slice(0, 3).map((u) => `env "${u.env}": ${u.error}`);
      return `no env image could be made (${unavailable.length} of ${unavailable.length}): ${few.join('; ')}${unavailable.length > 3 ? '; …' : ''}`;
    }
    if (Date.now() - engineCheck.at > HEALTH_ENGINE_CHECK_MS) {
      engineCheck = {
        at: Date.now(),
        ok: await sandbox.ping().then(
          () => true,
          () => false,
        ),
      };
    }
    return engineCheck.ok ? null : 'the Docker engine does not answer';
  };

  let drained: Promise<{ tornDown: number; timedOut: boolean }> | null = null;
  /**
   * Refuses new episodes and tears every live one down, with what was made ahead of demand (the
   * sandbox's stock), all within one budget: `timedOut` when either was still going at its end.
   */
  const drain = (timeoutMs = opts.shutdownTimeout * 1000) => {
    drained ??= (async () => {
      const deadline = Date.now() + timeoutMs;
      startup.abort(abortError('the server is draining'));
      const closing = sessions.shutdownSockets();
      const unprepared = (sandbox.stock?.stop() ?? Promise.resolve()).then(
        () => true,
        (e: unknown) => {
          log.warn({ err: (e as Error).message }, 'could not remove what was made ahead of demand');
          return true;
        },
      );
      // the manager's drain refuses the queue's waiters first (synchronously): a create still
      // waiting for a slot is answered 503, not cut off by its sandbox's close
      const episodesGone = manager.drain(timeoutMs);
      const sandboxesGone = sandboxes.drain();
      const result = await episodesGone;
      let sandboxBudget: NodeJS.Timeout | undefined;
      const sandboxesInTime = await Promise.race([
        sandboxesGone.then(() => true),
        new Promise<false>((r) => {
          sandboxBudget = setTimeout(() => r(false), Math.max(0, deadline - Date.now()));
        }),
      ]);
      clearTimeout(sandboxBudget);
      if (!sandboxesInTime) log.warn('E2B sandboxes were not all torn down within the drain budget');
      await closing;
      let budget: NodeJS.Timeout | undefined;
      const inTime = await Promise.race([
        unprepared,
        new Promise<false>((r) => {
          // what ends a removal that hangs: it keeps the process alive until then (cleared below)
          budget = setTimeout(() => r(false), Math.max(0, deadline - Date.now()));
        }),
      ]);
      clearTimeout(budget);
      if (!inTime) log.warn('what was made ahead of demand was not all removed within the drain budget');
      return { tornDown: result.tornDown, timedOut: result.timedOut || !inTime || !sandboxesInTime };
    })();
    return drained;
  };

  const close = async () => {
    await ready.catch(() => undefined);
    await drain();
    // builds the drain stopped: cancelled on the engine before the sandbox goes
    await catalog.idle();
    manager.stopReconciler();
    await modelAccess?.close();
    sessions.stop();
    await recorder?.flush();
    if (!ro.sandbox) await sandbox.close();
  };

  return {
    bundle,
    options: opts,
    manager,
    admission,
    deploys,
    pool,
    sandbox,
    metrics,
    catalog,
    sessions,
    history,
    recorder,
    e2b: sandboxes,
    modelAccess,
    rewardName: typeof reward === 'function' ? 'custom' : (reward ?? DEFAULT_REWARD),
    granted,
    ready,
    imagesSettled: settledImages,
    unhealthy,
    drain,
    close,
  };
}

/**
 * Whether the network stock makes shell envs' networks (hostless, not joined) rather than http
 * envs': when every env of the bundle is a shell env and no env gets a model door (no gateway),
 * every deploy wants that kind; a mixed bundle keeps the http kind (its shell envs make their own).
 */
export function stockForShell(bundle: LoadedBundle, opts: Partial<Pick<ServerOptions, 'modelUrl' | 'modelFromReset'>>): boolean {
  const envs = Object.values(bundle.manifest.envs);
  return envs.length > 0 && envs.every((e) => e.kind === 'shell') && opts.modelUrl === undefined && !opts.modelFromReset;
}

/** the gateway and the episodes' side of it, when the server has a model upstream or takes one per reset */
function makeModelAccess(opts: ServerOptions, sandbox: Sandbox, log: Logger, observer: GatewayObserver): ModelAccess | null {
  if (opts.modelUrl === undefined && !opts.modelFromReset) return null;
  if (!sandbox.modelDoors)
    throw new Error('--model-url / --model-from-reset: this sandbox opens no model gateway door on its networks (the Docker sandbox does)');
  const headers: Record<string, string> = {};
  if (opts.modelKeyEnv !== undefined) {
    const key = process.env[opts.modelKeyEnv];
    if (!key) throw new Error(`--model-key-env ${opts.modelKeyEnv}: that environment variable is not set`);
    headers.authorization = `Bearer ${key}`;
  }
  const defaultUpstream = opts.modelUrl ? UpstreamSchema.parse({ base_url: opts.modelUrl, headers, ...(opts.model ? { model: opts.model } : {}) }) : null;
  const budgets = {
    ...(opts.modelCalls !== undefined ? { calls: opts.modelCalls } : {}),
    ...(opts.modelTokens !== undefined ? { tokens: opts.modelTokens } : {}),
    ...(opts.modelTime !== undefined ? { wall_time_s: opts.modelTime } : {}),
  };
  const gateway = new ModelGateway({ observer, limits: { port: opts.gatewayPort, callTimeoutMs: opts.modelCallTimeout * 1000 } });
  return new ModelAccess({ gateway, defaultUpstream, defaultModel: opts.model ?? null, fromReset: opts.modelFromReset, budgets });
}

/** what, besides its door, an episode's env could reach through this process's namespace (docs/gateway.md), said at start */
function warnOfExposure(placement: 'host' | 'container' | null, log: Logger): void {
  if (placement === 'host') {
    const ports = wildcardListenPorts();
    if (ports.length > 0)
      log.warn(
        { event: 'gateway_exposure', wildcard_ports: ports },
        `host services listening on every address answer an env at its bridge's host address too (ports ${ports.join(', ')}): bind them to specific addresses, run the server in a container, or add the input rule of docs/gateway.md`,
      );
  } else if (placement === 'container' && ipv4Forwarding() === true) {
    log.warn(
      { event: 'gateway_exposure', ip_forward: true },
      "this container forwards IPv4: run it with sysctl net.ipv4.ip_forward=0 (compose.yaml does), so no env's packet is routed on to its other networks",
    );
  }
}
