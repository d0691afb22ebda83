/**
 * The env images of a bundle, one entry per env (its own image, then its sidecars', read from
 * bundleImages: one walk of the manifest): built from their contexts (tagged by content hash,
 * reused when present), looked up without building (`--images prebuilt`), or checked on the
 * engine when the bundle names them. The server makes them in the background, a bounded number
 * at once in manifest order (image-queue.ts); a reset whose env's image is not ready waits for it
 * within its own budget, and that image goes to the front of the queue. A failed build fails the
 * resets of its env only (`image_unavailable`, the build's message). `openenv-bundle check` waits
 * for them all first (buildAll).
 */
import type { Logger } from 'pino';
import { bundleImages, type BundleImage } from './env-images.js';
import type { LoadedBundle } from './loader.js';
import { SandboxError, type EnvSpec, type Sandbox, type SidecarSpec } from '../sandbox/sandbox.js';
import { DEFAULT_IMAGE_BUILD_CONCURRENCY } from '../defaults.js';
import { abortError, isAbortError, throwIfAborted } from '../util/abort.js';
import { fmtS } from '../util/time.js';
import { ImageQueue } from './image-queue.js';
import type { EnvManifest } from './schema.js';
import { envLimits, shellFeatures } from './env-needs.js';
import { EnvImageStateSchema, type EnvImages, type EnvImageState } from '../protocol/server.js';

export { envLimits, shellFeatures } from './env-needs.js';

/**
 * How far the env images are, drawn in place (the command line's progress bar when stderr is a
 * terminal): `done` of `total` images made, `what` naming those being built or checked. The log
 * keeps its lines, each finished image with its `n/total` (parseable logs), at info; at debug
 * when `quiet` (the log is on the same terminal, and would write between the bar's redraws).
 */
export interface ImageProgress {
  update(done: number, total: number, what: string): void;
  end(): void;
  quiet?: boolean;
}

/** how the server gets its env images (--images): builds them, or only looks for them */
export type ImagesMode = 'build' | 'prebuilt';

/** where an env's image is; `missing`: not on the engine, and this server builds nothing (--images prebuilt) */
export const ENV_IMAGE_STATES = EnvImageStateSchema.options;

export interface EnvCatalogOptions {
  /** images built (or checked) at once (--image-build-concurrency) */
  concurrency?: number;
  progress?: ImageProgress;
  /** --images: build (default), or prebuilt (look up, build nothing) */
  mode?: ImagesMode;
}

/** How a caller waits for an env's image: within `timeoutMs`, until `signal`, told once when it has to wait. */
export interface ImageWait {
  timeoutMs?: number;
  signal?: AbortSignal;
  onWait?: (state: EnvImageState) => void;
  /** move the image to the front of the queue (default: yes; the warm pool's refills do not) */
  first?: boolean;
}

interface EnvEntry {
  env: string;
  /** the env's own image first, then its sidecars' */
  images: BundleImage[];
  state: EnvImageState;
  /** why it failed, or is missing: what its resets say */
  error: string | null;
  /** resolves when it is ready, failed or missing (never rejects) */
  settled: Promise<void>;
  settle: () => void;
}

export class EnvCatalog {
  private readonly images = new Map<string, string>();
  /** sidecar images by `<env>/<sidecar>` */
  private readonly sidecarTags = new Map<string, string>();
  private readonly entries = new Map<string, EnvEntry>();
  private readonly queue: ImageQueue;
  /** envs a reset waits for before the queue was filled: they go first */
  private readonly wanted = new Set<string>();
  private gateP: Promise<void> = Promise.resolve();
  /** the start-up gate passed: a ready image's spec is given at once */
  private gatePassed = true;
  private started = false;
  private done = 0;
  /** envs whose images are being made, for the progress bar */
  private readonly inProgress = new Set<string>();
  private readonly mode: ImagesMode;
  private readonly level: 'info' | 'debug';

  constructor(
    private readonly bundle: LoadedBundle,
    private readonly sandbox: Sandbox,
    private readonly buildArgs: Record<string, string>,
    private readonly log: Logger,
    private readonly opts: EnvCatalogOptions = {},
  ) {
    this.mode = opts.mode ?? 'build';
    this.level = opts.progress?.quiet ? 'debug' : 'info';
    this.queue = new ImageQueue(opts.concurrency ?? DEFAULT_IMAGE_BUILD_CONCURRENCY);
    const byEnv = new Map<string, BundleImage[]>(Object.keys(bundle.manifest.envs).map((e) => [e, []]));
    for (const img of bundleImages(bundle)) byEnv.get(img.env)!.push(img);
    for (const [env, images] of byEnv) {
      let settle!: () => void;
      const settled = new Promise<void>((r) => (settle = r));
      const entry: EnvEntry = { env, images, state: 'queued', error: null, settled, settle };
      if (!images.some((i) => i.sidecar === null)) this.finish(entry, 'failed', `env "${env}" names neither a build context nor an image`);
      this.entries.set(env, entry);
    }
  }

  /**
   * The refusals of a bundle this sandbox cannot serve, then what the server's own steps in envs
   * need before any env runs (the shell toolbox). Part of the start-up, before it is ready.
   */
  async prepare(): Promise<void> {
    const needsShell = shellFeatures(this.bundle);
    if (needsShell.length && !this.sandbox.shell) {
      throw new Error(
        `bundle ${this.bundle.manifest.name} uses what this sandbox does not serve: ${needsShell.join('; ')}. ` +
          'They need exec access to env containers, which this sandbox does not give: serve it with --sandbox docker, or --sandbox swarm (docs/harbor.md, docs/scaling.md)',
      );
    }
    const withSidecars = Object.entries(this.bundle.manifest.envs).filter(([, e]) => Object.keys(e.sidecars ?? {}).length > 0);
    if (withSidecars.length && !this.sandbox.sidecars) {
      throw new Error(
        `bundle ${this.bundle.manifest.name} has envs with sidecars (${withSidecars.map(([n, e]) => `${n}: ${Object.keys(e.sidecars!).join(', ')}`).join('; ')}), ` +
          'which this sandbox does not run (the swarm sandbox does not yet): serve it with --sandbox docker (docs/bundle-format.md, "Sidecars")',
      );
    }
    // the server's own steps in those envs run its toolbox, never the image's binaries: it must be there before any env is
    if (needsShell.length) await this.sandbox.shell!.prepare();
  }

  /**
   * Starts making every env image in the background, in manifest order (those a reset already
   * waits for first), --image-build-concurrency at once. `signal` (the server's drain) stops
   * them: builds running are cancelled on the engine, none starts. Idempotent.
   */
  start(signal?: AbortSignal): void {
    if (this.started) return;
    this.started = true;
    const order = [...this.wanted, ...[...this.entries.keys()].filter((e) => !this.wanted.has(e))];
    for (const env of order) {
      const entry = this.entries.get(env)!;
      if (entry.state === 'queued') this.queue.add(env, () => this.make(entry, signal));
    }
    const stop = () => {
      const dropped = this.queue.stop();
      const c = this.counts();
      if (c.ready < this.entries.size)
        this.log.info(
          { event: 'images_stopped', ready: c.ready, total: this.entries.size, cancelled: this.queue.active, not_started: dropped.length },
          `env images stopped by the drain (${c.ready} of ${this.entries.size} ready; builds running cancelled)`,
        );
    };
    if (signal?.aborted) stop();
    else signal?.addEventListener('abort', stop, { once: true });
    this.show();
    void this.allSettled().then(() => {
      this.opts.progress?.end();
      if (this.mode === 'prebuilt') this.reportMissing();
    });
  }

  /**
   * Builds (or checks) every env image and waits for them all (`openenv-bundle check`). A failed
   * one stops none of the others; then it rejects naming every env that failed and why. `signal`
   * stops them and it rejects with an AbortError.
   */
  async buildAll(signal?: AbortSignal): Promise<void> {
    await this.prepare();
    this.start(signal);
    await Promise.race([this.allSettled(), this.stoppedBy(signal)]);
    await this.queue.idle();
    const total = this.entries.size;
    if (signal?.aborted) throw abortError(`stopped before the env images were made (${this.counts().ready} of ${total} ready)`);
    const failed = [...this.entries.values()].filter((e) => e.state === 'failed' || e.state === 'missing');
    // a bundle of one env fails with that env's own error
    if (total === 1 && failed.length === 1) throw new SandboxError('no_image', failed[0]!.error!);
    if (failed.length) {
      throw new SandboxError(
        'no_image',
        `${failed.length} of ${total} env image(s) could not be made (the ${total - failed.length} other(s) are ready and cached): ${failed.map((e) => `env "${e.env}": ${e.error}`).join('; ')}`,
      );
    }
  }

  /** resolves when every env's image is ready, failed or missing */
  allSettled(): Promise<void> {
    return Promise.all([...this.entries.values()].map((e) => e.settled)).then(() => undefined);
  }

  /** resolves when what `start` set going has stopped (builds cancelled or done): the drain waits for it */
  idle(): Promise<void> {
    return this.queue.idle();
  }

  /** resolves when `env`'s image is ready, failed or missing, without moving it up the queue */
  settled(env: string): Promise<void> {
    return this.entries.get(env)?.settled ?? Promise.resolve();
  }

  /** where `env`'s image is (undefined: no such env) */
  imageState(env: string): EnvImageState | undefined {
    return this.entries.get(env)?.state;
  }

  /** env images by state */
  counts(): Record<EnvImageState, number> {
    const out = Object.fromEntries(ENV_IMAGE_STATES.map((s) => [s, 0])) as Record<EnvImageState, number>;
    for (const e of this.entries.values()) out[e.state]++;
    return out;
  }

  /** the envs whose image failed or is missing, with why */
  unavailable(): { env: string; error: string }[] {
    return [...this.entries.values()].filter((e) => e.state === 'failed' || e.state === 'missing').map((e) => ({ env: e.env, error: e.error ?? e.state }));
  }

  /** the same, but [] unless every env's image failed or is missing (then the server serves nothing) */
  allUnavailable(): { env: string; error: string }[] {
    const out = this.unavailable();
    return out.length === this.entries.size ? out : [];
  }

  /** the counts and "N of M env images ready (…)" while not all are ready; null when they are */
  status(): EnvImages | null {
    const counts = this.counts();
    const total = this.entries.size;
    if (counts.ready === total) return null;
    const rest = ENV_IMAGE_STATES.filter((s) => s !== 'ready' && counts[s] > 0).map((s) => `${counts[s]} ${s}`);
    return { total, counts, summary: `${counts.ready} of ${total} env images ready (${rest.join(', ')})` };
  }

  /** Episodes wait for `p` (the server's start-up) before asking for an image; a failed start-up fails them. */
  gate(p: Promise<void>): void {
    this.gateP = p;
    this.gatePassed = false;
    p.then(
      () => (this.gatePassed = true),
      () => undefined,
    );
  }

  /**
   * The env's spec once its image is ready. Not ready yet: the image goes to the front of the
   * queue (unless it is being made), `wait.onWait` is told, and the call waits, at most
   * `wait.timeoutMs` (then a SandboxError not_ready_in_time naming the image and its state).
   * Failed or missing: a SandboxError no_image with the reason, at once. Ready: the spec itself,
   * not a promise (a reset takes its place in the slot queue in its arrival order).
   */
  spec(envName: string, wait: ImageWait = {}): EnvSpec | Promise<EnvSpec> {
    if (this.gatePassed && this.entries.get(envName)?.state === 'ready') return this.specOf(envName);
    return this.waitForSpec(envName, wait);
  }

  private async waitForSpec(envName: string, wait: ImageWait): Promise<EnvSpec> {
    const started = Date.now();
    try {
      await this.gateP;
    } catch (e) {
      throw new SandboxError('no_image', `the server could not prepare its env images: ${(e as Error).message}`);
    }
    const entry = this.entries.get(envName);
    if (!entry) throw new SandboxError('no_image', `no image for env "${envName}"`);
    if (entry.state === 'queued' || entry.state === 'building') {
      if (wait.first === false) {
        // waits in its turn
      } else if (!this.started) this.wanted.add(envName);
      else if (this.queue.first(envName))
        this.log.info({ env: envName, event: 'image_first' }, `env image "${envName}" moved to the front: a reset waits for it`);
      wait.onWait?.(entry.state);
      await this.waitFor(entry, started, wait);
    }
    if (entry.state === 'missing') throw new SandboxError('not_prebuilt', entry.error ?? `no image for env "${envName}"`);
    if (entry.state === 'failed') throw new SandboxError('no_image', entry.error ?? `no image for env "${envName}"`);
    return this.specOf(envName);
  }

  private async waitFor(entry: EnvEntry, started: number, wait: ImageWait): Promise<void> {
    const left = wait.timeoutMs === undefined ? null : Math.max(0, wait.timeoutMs - (Date.now() - started));
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const outcome = await Promise.race([
      entry.settled.then(() => 'settled' as const),
      ...(left !== null ? [new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), left)))] : []),
      ...(wait.signal ? [new Promise<'aborted'>((r) => wait.signal!.addEventListener('abort', (onAbort = () => r('aborted')), { once: true }))] : []),
    ]);
    clearTimeout(timer);
    if (onAbort) wait.signal!.removeEventListener('abort', onAbort);
    if (outcome === 'aborted') throwIfAborted(wait.signal);
    if (outcome === 'timeout') {
      throw new SandboxError(
        'not_ready_in_time',
        `the image of env "${entry.env}" was not ready within the reset's ${fmtS(wait.timeoutMs!)}: it is ${entry.state === 'building' ? 'being built' : `queued (${this.queue.queued.indexOf(entry.env) + 1} in line)`}`,
      );
    }
  }

  /** the env's spec once its image is ready, without waiting */
  specOf(envName: string): EnvSpec {
    const image = this.images.get(envName);
    const env = this.bundle.manifest.envs[envName];
    if (!image || !env) throw new SandboxError('no_image', `no image for env "${envName}"`);
    return {
      name: envName,
      image,
      port: env.port,
      readyPath: env.ready_path,
      deployTimeoutMs: env.deploy_timeout_s * 1000,
      environment: env.environment,
      kind: env.kind,
      ...(env.workdir !== undefined ? { workdir: env.workdir } : {}),
      ...envLimits(env),
      ...(env.sidecars && Object.keys(env.sidecars).length > 0 ? { sidecars: this.sidecarSpecs(envName, env) } : {}),
    };
  }

  /** one env's images, its own then its sidecars': built, looked up (prebuilt) or checked */
  private async make(entry: EnvEntry, signal: AbortSignal | undefined): Promise<void> {
    if (signal?.aborted) return;
    entry.state = 'building';
    this.inProgress.add(entry.env);
    this.show();
    const started = Date.now();
    const level = this.level;
    const total = this.entries.size;
    let what = `env image "${entry.env}"`;
    try {
      for (const img of entry.images) {
        what = img.sidecar === null ? `env image "${entry.env}"` : `sidecar image "${img.name}"`;
        let ref: string;
        if (img.build) {
          if (this.mode === 'build') this.log[level]({ env: entry.env, image: img.name, context: img.build.contextDir }, `building ${what}`);
          ref = await this.sandbox.images.build({
            bundleName: this.bundle.manifest.name,
            envName: img.build.name,
            contextDir: img.build.contextDir,
            buildArgs: this.buildArgs,
            ...(img.build.network ? { network: img.build.network } : {}),
            ...(this.mode === 'prebuilt' ? { lookOnly: true } : {}),
            ...(signal ? { signal } : {}),
            onProgress: (line) => {
              const l = line.trim();
              if (l) this.log[level]({ env: entry.env, image: img.name, build: l }, `build ${img.name}: ${l}`);
            },
          });
        } else {
          await this.sandbox.images.check(img.image!);
          ref = img.image!;
        }
        if (img.sidecar === null) this.images.set(entry.env, ref);
        else this.sidecarTags.set(img.name, ref);
      }
      const of = `${++this.done}/${total}`;
      const image = this.images.get(entry.env);
      const word = entry.images[0]?.build ? 'ready' : 'present';
      this.log[level]({ env: entry.env, image, build_s: (Date.now() - started) / 1000, of }, `env image "${entry.env}" ${word} (${of}): ${image}`);
      this.finish(entry, 'ready', null);
    } catch (e) {
      if (isAbortError(e) || signal?.aborted) {
        entry.state = 'queued';
        return;
      }
      const of = `${++this.done}/${total}`;
      const msg = (e as Error).message;
      if (this.mode === 'prebuilt' && e instanceof SandboxError && e.fact === 'no_image') {
        this.log.debug({ env: entry.env, of, err: msg }, `${what} is not on the engine (${of})`);
        this.finish(
          entry,
          'missing',
          `${what} is not on the engine, and this server builds none (--images prebuilt): ${this.buildCommand()} makes it (${msg})`,
        );
      } else {
        if (!this.opts.progress?.quiet) this.log.error({ env: entry.env, of, err: msg }, `${what} failed (${of}): ${msg}`);
        this.finish(entry, 'failed', msg);
      }
    } finally {
      this.inProgress.delete(entry.env);
      this.show();
    }
  }

  private finish(entry: EnvEntry, state: EnvImageState, error: string | null): void {
    entry.state = state;
    entry.error = error;
    entry.settle();
  }

  private stoppedBy(signal: AbortSignal | undefined): Promise<void> {
    if (!signal) return new Promise(() => undefined);
    if (signal.aborted) return Promise.resolve();
    return new Promise((r) => signal.addEventListener('abort', () => r(), { once: true }));
  }

  private buildCommand(): string {
    return `\`openenv-bundle build ${this.bundle.dir}\``;
  }

  /** --images prebuilt: the envs whose images are not on the engine, named once */
  private reportMissing(): void {
    const missing = [...this.entries.values()].filter((e) => e.state === 'missing').map((e) => e.env);
    if (missing.length === 0) {
      this.log.info({ event: 'images_prebuilt', envs: this.entries.size }, `every env image is on the engine (${this.entries.size})`);
      return;
    }
    const few = missing.slice(0, 5).join(', ') + (missing.length > 5 ? `, +${missing.length - 5} more` : '');
    this.log.warn(
      { event: 'images_missing', count: missing.length, total: this.entries.size, envs: missing.slice(0, 20) },
      `${missing.length} of ${this.entries.size} env image(s) are not on the engine (--images prebuilt): ${few}. Their tasks' resets fail; ${this.buildCommand()} builds them`,
    );
  }

  /** the progress bar: how many are made, and which are in progress */
  private show(): void {
    const bar = this.opts.progress;
    if (!bar) return;
    const names = [...this.inProgress];
    bar.update(
      this.done,
      this.entries.size,
      `env images${names.length ? ` (in progress: ${names.slice(0, 3).join(', ')}${names.length > 3 ? `, +${names.length - 3}` : ''})` : ''}`,
    );
  }

  /** the env's sidecars as the sandbox runs them, their images ready */
  private sidecarSpecs(envName: string, env: EnvManifest): SidecarSpec[] {
    return Object.entries(env.sidecars ?? {}).map(([sc, s]) => {
      const image = this.sidecarTags.get(`${envName}/${sc}`);
      if (!image) throw new SandboxError('no_image', `no image for sidecar "${sc}" of env "${envName}"`);
      return {
        name: sc,
        image,
        environment: s.environment,
        ...(s.healthcheck
          ? {
              healthcheck: {
                command: s.healthcheck.command,
                intervalS: s.healthcheck.interval_s,
                timeoutS: s.healthcheck.timeout_s,
                retries: s.healthcheck.retries,
                startPeriodS: s.healthcheck.start_period_s,
              },
            }
          : {}),
        resources: { memoryMb: s.resources.memory_mb, cpus: s.resources.cpus, pids: s.resources.pids },
      };
    });
  }
}
