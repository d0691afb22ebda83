/**
 * The live E2B sandboxes of one server, by id: what the control API creates, finds, lists, kills
 * and times; what the sandbox side routes each call to (by the SDK's E2b-Sandbox-Id). It refuses
 * what a create asks that this server cannot keep (naming it), bounds a sandbox's lifetime by
 * --episode-timeout, drains with the server (every sandbox removed), and tells the reconciler
 * which labelled env ids are its own.
 */
import type { Logger } from 'pino';
import type { LoadedBundle } from '../bundle/index.js';
import { E2B } from '../defaults.js';
import type { Metrics } from '../metrics.js';
import type { NewSandbox } from '../protocol/e2b.js';
import type { DeployLimiter } from '../episodes/capacity/deploy-limiter.js';
import type { Admission } from '../episodes/capacity/admission.js';
import type { EnvSpec, PullProgress, Sandbox } from '../sandbox/sandbox.js';
import { fmtS } from '../util/time.js';
import { isAbortError } from '../util/abort.js';
import { E2bApiError } from './errors.js';
import { E2bSandbox, type SandboxObserver, type SandboxPhase } from './sandbox.js';
import { Templates } from './templates.js';
import { egressFor, type AllowedEntry } from './egress.js';
import type { ModelAccess } from '../episodes/model-access.js';

export interface E2bSettings {
  /** --reset-timeout: the longest a create waits for a slot */
  resetTimeoutMs: number;
  /** --episode-timeout: the longest a sandbox may be asked to live (from the moment it is asked) */
  episodeTimeoutMs: number;
  /** --e2b-image-key, --e2b-images */
  imageKey: string | null;
  imagePatterns: readonly string[];
  /** --egress-allow, its hosts resolved (at start: a create waits for it) */
  egressAllow: Promise<readonly AllowedEntry[]>;
  /** --e2b-model-door: each sandbox gets a door of the model gateway; --e2b-model-door-host: the name it has inside */
  modelDoor: { hostName: string | null } | null;
}

export interface E2bDeps {
  bundle: LoadedBundle;
  sandbox: Pick<Sandbox, 'deploy' | 'teardown' | 'shell' | 'e2bSandboxes' | 'usage' | 'pausing' | 'images'>;
  admission: Admission;
  deploys?: DeployLimiter;
  envSpec: (envName: string) => Promise<EnvSpec>;
  settings: E2bSettings;
  metrics: Metrics;
  log: Logger;
  observer?: SandboxObserver;
  /** the model gateway's side of episodes and sandboxes (--model-url), when the server has one */
  modelAccess?: ModelAccess;
  now?: () => number;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** what a create's metadata may hold: it is listed and filtered on, not stored without bound */
const METADATA_BOUNDS = { entries: 64, keyChars: 256, valueChars: 4096 } as const;

export class E2bSandboxes {
  readonly templates: Templates;
  private readonly live = new Map<string, E2bSandbox>();
  private draining = false;

  constructor(private readonly deps: E2bDeps) {
    this.templates = new Templates({
      bundle: deps.bundle,
      envSpec: deps.envSpec,
      images: deps.sandbox.images,
      imageKey: deps.settings.imageKey,
      imagePatterns: deps.settings.imagePatterns,
      log: deps.log,
    });
  }

  /** why this server cannot serve sandboxes, or null when it can */
  get unavailable(): string | null {
    return this.deps.sandbox.shell && this.deps.sandbox.e2bSandboxes
      ? null
      : 'this sandbox backend does not run E2B sandboxes (--sandbox swarm: not yet): E2B sandboxes need the Docker backend';
  }

  /** a sandbox that exists (waiting, running or paused), by id */
  get(id: string): E2bSandbox | undefined {
    const s = this.live.get(id);
    return s && s.phase !== 'done' ? s : undefined;
  }

  /** a sandbox the API may act on, or a 404 in E2B's words */
  must(id: string): E2bSandbox {
    const s = this.get(id);
    if (!s) throw new E2bApiError(404, `sandbox ${JSON.stringify(id.slice(0, 64))} does not exist (it was killed, reached its timeout, or never existed)`);
    return s;
  }

  /** sandboxes in creation order */
  all(): E2bSandbox[] {
    return [...this.live.values()].filter((s) => s.phase !== 'done');
  }

  /** whether an env id labelled on the engine is a sandbox's (the reconciler leaves it alone) */
  holds(envId: string): boolean {
    return this.live.has(envId);
  }

  counts(): Record<Exclude<SandboxPhase, 'done'>, number> {
    const c = { waiting: 0, deploying: 0, running: 0, paused: 0 };
    for (const s of this.live.values()) if (s.phase !== 'done') c[s.phase]++;
    return c;
  }

  /** sandboxes holding an env slot now (deploying, running, paused, or ended with their env not yet removed): not episodes */
  get slotsHeld(): number {
    let n = 0;
    for (const s of this.live.values()) if (s.holdsSlot) n++;
    return n;
  }

  /**
   * Creates a sandbox as POST /sandboxes (`v1`) or /v2/sandboxes asks: resolves once it runs, or
   * rejects with an E2bApiError saying why not (or an AbortError: the client left).
   */
  async create(body: NewSandbox, version: 'v1' | 'v2', clientGone: AbortSignal): Promise<E2bSandbox> {
    const { metrics, settings } = this.deps;
    if (this.draining) {
      metrics.sandboxCreates.inc({ outcome: 'shutting_down' });
      throw new E2bApiError(503, 'the server is shutting down: create the sandbox on another one');
    }
    let params;
    try {
      if (this.unavailable) throw new E2bApiError(501, `sandboxes do not exist on this server: ${this.unavailable}`);
      const base = this.paramsOf(body, version);
      params = { ...base, egress: egressFor(await settings.egressAllow, base) };
    } catch (e) {
      metrics.sandboxCreates.inc({ outcome: 'refused' });
      throw e;
    }
    const sb = new E2bSandbox(
      {
        sandbox: this.deps.sandbox,
        shell: this.deps.sandbox.shell!,
        ...(this.deps.sandbox.usage ? { usage: this.deps.sandbox.usage } : {}),
        ...(this.deps.sandbox.pausing ? { pausing: this.deps.sandbox.pausing } : {}),
        admission: this.deps.admission,
        ...(this.deps.deploys ? { deploys: this.deps.deploys } : {}),
        envSpec: this.deps.envSpec,
        metrics,
        log: this.deps.log,
        ...(this.deps.observer ? { observer: this.deps.observer } : {}),
        ...(this.deps.now ? { now: this.deps.now } : {}),
        ...(settings.modelDoor && this.deps.modelAccess ? { modelDoor: { access: this.deps.modelAccess, hostName: settings.modelDoor.hostName } } : {}),
      },
      { ...params, queueTimeoutMs: settings.resetTimeoutMs },
    );
    this.live.set(sb.id, sb);
    void sb.tornDown.then(() => this.live.delete(sb.id));
    const pulls: number[] = [];
    const onPull = (p: PullProgress) => {
      // the console hears a pull's progress at most every tenth of its bytes
      const tenth = p.totalBytes > 0 ? Math.floor((10 * p.bytes) / p.totalBytes) : 0;
      if (pulls.includes(tenth)) return;
      pulls.push(tenth);
      sb.record(
        'image.pull',
        { image: body.metadata?.[settings.imageKey ?? ''] ?? null },
        { status: p.status, layers: p.layers, bytes: p.bytes, total_bytes: p.totalBytes },
        null,
        Date.now(),
      );
    };
    try {
      await sb.start(
        (signal) => this.templates.resolve(params.templateId, params.metadata, params.envVars, { onPull, signal }).then((r) => r.spec),
        clientGone,
      );
    } catch (e) {
      const status = e instanceof E2bApiError ? e.status : 0;
      const outcome = isAbortError(e)
        ? 'aborted'
        : status === 429
          ? 'capacity'
          : status === 503
            ? 'shutting_down'
            : status >= 500
              ? 'deploy_failed'
              : 'refused';
      metrics.sandboxCreates.inc({ outcome });
      throw e;
    }
    metrics.sandboxCreates.inc({ outcome: 'started' });
    return sb;
  }

  /** the create's request, checked: what this server cannot keep is refused by name */
  private paramsOf(body: NewSandbox, version: 'v1' | 'v2') {
    const refuse = (what: string, why: string) => {
      throw new E2bApiError(400, `${what} does not exist on this server: ${why}`);
    };
    if (body.autoPause === true) refuse('autoPause', 'a sandbox is killed at its timeout (pause one yourself with POST /sandboxes/{id}/pause)');
    if (body.autoResume?.enabled === true) refuse('autoResume', 'a paused sandbox is resumed by connect');
    if (body.mcp !== undefined && body.mcp !== null) refuse('mcp', "E2B's MCP gateway is not served");
    if (body.iam !== undefined && body.iam !== null) refuse('iam', 'workload identity tokens are not served');
    if (body.volumeMounts && body.volumeMounts.length > 0) refuse('volumeMounts', 'volumes are not served');
    const net = body.network;
    if (net?.egressProxy !== undefined) refuse('network.egressProxy', 'egress goes straight to the destinations --egress-allow lists');
    if (net?.rules !== undefined) refuse('network.rules', 'egress requests are not rewritten');
    if (net?.maskRequestHost !== undefined || (net?.httpsPorts && net.httpsPorts.length > 0))
      refuse('network.maskRequestHost/httpsPorts', "a sandbox's ports are not published (reach its processes through commands)");
    const envVars = body.envVars ?? {};
    for (const k of Object.keys(envVars))
      if (!ENV_NAME.test(k)) throw new E2bApiError(400, `envVars: ${JSON.stringify(k.slice(0, 64))} is not an environment variable name`);
    const metadata = body.metadata ?? {};
    const entries = Object.entries(metadata);
    if (entries.length > METADATA_BOUNDS.entries || entries.some(([k, v]) => k.length > METADATA_BOUNDS.keyChars || v.length > METADATA_BOUNDS.valueChars)) {
      throw new E2bApiError(
        400,
        `metadata holds at most ${METADATA_BOUNDS.entries} entries, keys of ${METADATA_BOUNDS.keyChars} and values of ${METADATA_BOUNDS.valueChars} characters`,
      );
    }
    const timeoutS = body.timeout ?? E2B.timeoutS[version];
    const timeoutMs = Math.max(1, timeoutS) * 1000;
    this.checkTimeout(timeoutMs);
    return {
      templateId: body.templateID,
      metadata,
      envVars,
      secure: version === 'v2' ? true : body.secure === true,
      timeoutMs,
      allowInternetAccess: body.allow_internet_access ?? null,
      network: net ? { ...(net.allowOut ? { allowOut: net.allowOut } : {}), ...(net.denyOut ? { denyOut: net.denyOut } : {}) } : null,
    };
  }

  /** a lifetime asked for, within --episode-timeout */
  checkTimeout(ms: number): void {
    const max = this.deps.settings.episodeTimeoutMs;
    if (ms > max)
      throw new E2bApiError(
        400,
        `a timeout of ${fmtS(ms)} is longer than this server lets a sandbox live (--episode-timeout ${fmtS(max)}): ask for less, or start the server with a longer --episode-timeout`,
      );
  }

  /** DELETE /sandboxes/{id}: false when there is no such sandbox */
  async kill(id: string): Promise<boolean> {
    const s = this.get(id);
    if (!s) return false;
    await s.close('killed');
    return true;
  }

  /** SIGTERM: no new sandboxes, every one torn down (its waiting creates are refused by the admission's drain) */
  async drain(): Promise<void> {
    this.draining = true;
    await Promise.all([...this.live.values()].map((s) => s.close('shutdown')));
  }
}
