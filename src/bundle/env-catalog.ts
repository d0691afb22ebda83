/**
 * The env images of a bundle: built from their contexts (tagged by content hash, reused when
 * present) or checked on the engine, at start-up, a bounded number at once. Episodes wait here until their env's image
 * exists; a failed build fails their deploy with `image_unavailable` and the reason.
 */
import type { Logger } from 'pino';
import { contextDir, type LoadedBundle } from './loader.js';
import { sidecarBuildName } from './env-images.js';
import path from 'node:path';
import { SandboxError, type EnvSpec, type Sandbox, type SidecarSpec } from '../sandbox/sandbox.js';
import { DEFAULT_IMAGE_BUILD_CONCURRENCY } from '../defaults.js';
import { settleEachAtMost } from '../util/work-pool.js';
import { abortError, isAbortError, throwIfAborted } from '../util/abort.js';
import type { EnvManifest } from './schema.js';

/** What of an env's manifest the lock-down reads: its limits, its asks by name, the runtime it asks for (engine/hardening.ts). */
export function envLimits(env: EnvManifest): Pick<EnvSpec, 'resources' | 'security' | 'runtime'> {
  return {
    resources: {
      memoryMb: env.resources.memory_mb,
      cpus: env.resources.cpus,
      pids: env.resources.pids,
      ...(env.resources.storage_mb !== undefined ? { storageMb: env.resources.storage_mb } : {}),
      ...(env.resources.max_files !== undefined ? { maxFiles: env.resources.max_files } : {}),
    },
    // the lock-down's asks (docs/security.md); the sandbox applies them
    ...(env.security ? { security: env.security, ...(env.security.runtime ? { runtime: env.security.runtime } : {}) } : {}),
  };
}

/**
 * What of a bundle needs a sandbox with a `shell` part (exec and archive access to env
 * containers): shell envs, built-in toolsets and verified tasks. A sandbox without one (the swarm
 * backend, for now) refuses such a bundle at start, naming them, instead of failing every episode.
 */
export function shellFeatures(bundle: Pick<LoadedBundle, 'manifest' | 'splits'>): string[] {
  const out: string[] = [];
  const m = bundle.manifest;
  const shellEnvs = Object.entries(m.envs)
    .filter(([, e]) => e.kind === 'shell')
    .map(([n]) => n);
  if (shellEnvs.length) out.push(`shell envs (${shellEnvs.slice(0, 3).join(', ')}${shellEnvs.length > 3 ? ', …' : ''})`);
  const builtin = Object.entries(m.toolsets)
    .filter(([, t]) => t.builtin.length > 0)
    .map(([n]) => n);
  if (builtin.length) out.push(`built-in toolsets (toolset ${builtin.join(', ')})`);
  let verified = 0;
  for (const tasks of Object.values(bundle.splits)) {
    for (const t of tasks) if (t.verifier || t.per_turn || t.time_budget_s !== undefined || t.env !== undefined) verified++;
  }
  if (verified) out.push(`verified tasks (${verified} task(s) with a verifier, per_turn, time_budget_s or env)`);
  return out;
}
/**
 * How far the start-up's env images are, drawn in place (the command line's progress bar when
 * stderr is a terminal): `done` of `total` images made, `what` naming those being built or checked.
 * The log keeps its lines, each finished image with its `n/total` (parseable logs), at info; at
 * debug when `quiet` (the log is on the same terminal, and would write between the bar's redraws).
 */
export interface ImageProgress {
  update(done: number, total: number, what: string): void;
  end(): void;
  quiet?: boolean;
}

export interface EnvCatalogOptions {
  /** images built (or checked) at once (--image-build-concurrency) */
  concurrency?: number;
  progress?: ImageProgress;
}

export class EnvCatalog {
  private readonly images = new Map<string, string>();
  /** sidecar images by `<env>/<sidecar>` */
  private readonly sidecarTags = new Map<string, string>();
  private gateP: Promise<void> = Promise.resolve();
  building = false;

  constructor(
    private readonly bundle: LoadedBundle,
    private readonly sandbox: Sandbox,
    private readonly buildArgs: Record<string, string>,
    private readonly log: Logger,
    private readonly opts: EnvCatalogOptions = {},
  ) {}

  /**
   * Builds (or checks) every env image, --image-build-concurrency at a time, reporting how far
   * they are. A failed one stops none of the others (what they built is kept: the images exist
   * and are named here); then it rejects naming every env that failed and why. `signal` (the
   * server's drain, the command's Ctrl-C) stops them: builds running are cancelled on the engine,
   * none starts, and it rejects with an AbortError.
   */
  async buildAll(signal?: AbortSignal): Promise<void> {
    const needsShell = shellFeatures(this.bundle);
    if (needsShell.length && !this.sandbox.shell) {
      throw new Error(
        `bundle ${this.bundle.manifest.name} uses what this sandbox does not serve: ${needsShell.join('; ')}. ` +
          'They need exec access to env containers, which the Docker sandbox has and the swarm sandbox does not yet: serve it with --sandbox docker (docs/harbor.md)',
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
    const envs = Object.entries(this.bundle.manifest.envs);
    const total = envs.length;
    const bar = this.opts.progress;
    const level = bar?.quiet ? 'debug' : 'info';
    const running = new Set<string>();
    let done = 0;
    const show = () => {
      if (!bar) return;
      const names = [...running];
      bar.update(
        done,
        total,
        `env images${names.length ? ` (in progress: ${names.slice(0, 3).join(', ')}${names.length > 3 ? `, +${names.length - 3}` : ''})` : ''}`,
      );
    };
    this.building = true;
    try {
      const outcomes = await settleEachAtMost(envs, this.opts.concurrency ?? DEFAULT_IMAGE_BUILD_CONCURRENCY, async ([name, env]) => {
        throwIfAborted(signal);
        const dir = contextDir(this.bundle, name);
        running.add(name);
        show();
        const started = Date.now();
        try {
          if (dir) {
            this.log[level]({ env: name, context: dir }, `building env image "${name}"`);
            const tag = await this.sandbox.images.build({
              bundleName: this.bundle.manifest.name,
              envName: name,
              contextDir: dir,
              buildArgs: this.buildArgs,
              ...(env.build_network === 'none' ? { network: 'none' as const } : {}),
              ...(signal ? { signal } : {}),
              onProgress: (line) => {
                const l = line.trim();
                if (l) this.log[level]({ env: name, build: l }, `build ${name}: ${l}`);
              },
            });
            this.images.set(name, tag);
            const of = `${++done}/${total}`;
            this.log[level]({ env: name, image: tag, build_s: (Date.now() - started) / 1000, of }, `env image "${name}" ready (${of}): ${tag}`);
          } else if (env.image) {
            await this.sandbox.images.check(env.image);
            this.images.set(name, env.image);
            const of = `${++done}/${total}`;
            this.log[level]({ env: name, image: env.image, of }, `env image "${name}" present (${of}): ${env.image}`);
          } else {
            done++;
          }
          await this.sidecarImages(name, env, signal, level);
        } catch (e) {
          if (isAbortError(e)) throw e;
          const of = `${++done}/${total}`;
          if (!bar?.quiet) this.log.error({ env: name, of, err: (e as Error).message }, `env image "${name}" failed (${of}): ${(e as Error).message}`);
          throw e;
        } finally {
          running.delete(name);
          show();
        }
      });
      if (signal?.aborted) throw abortError(`stopped before the env images were made (${done} of ${total} ready)`);
      const errors = outcomes.flatMap((o) => (o.ok ? [] : [o.error]));
      // a bundle of one env fails with that env's own error, as it did before builds ran in parallel
      if (total === 1 && errors.length === 1) throw errors[0];
      const failed = outcomes.flatMap((o, i) => (o.ok ? [] : [`env "${envs[i]![0]}": ${(o.error as Error).message}`]));
      if (failed.length) {
        throw new SandboxError(
          'no_image',
          `${failed.length} of ${total} env image(s) could not be made (the ${total - failed.length} other(s) are ready and cached): ${failed.join('; ')}`,
        );
      }
    } finally {
      bar?.end();
      this.building = false;
    }
  }

  /** the images of an env's sidecars, built (build_network as an env's) or checked, after its own */
  private async sidecarImages(envName: string, env: EnvManifest, signal: AbortSignal | undefined, level: 'info' | 'debug'): Promise<void> {
    for (const [sc, spec] of Object.entries(env.sidecars ?? {})) {
      throwIfAborted(signal);
      const key = `${envName}/${sc}`;
      if (spec.build !== undefined) {
        const tag = await this.sandbox.images.build({
          bundleName: this.bundle.manifest.name,
          envName: sidecarBuildName(envName, sc),
          contextDir: path.resolve(this.bundle.dir, spec.build),
          buildArgs: this.buildArgs,
          ...(spec.build_network === 'none' ? { network: 'none' as const } : {}),
          ...(signal ? { signal } : {}),
          onProgress: (line) => {
            const l = line.trim();
            if (l) this.log[level]({ env: envName, sidecar: sc, build: l }, `build ${envName} sidecar ${sc}: ${l}`);
          },
        });
        this.sidecarTags.set(key, tag);
      } else {
        await this.sandbox.images.check(spec.image!);
        this.sidecarTags.set(key, spec.image!);
      }
      this.log[level]({ env: envName, sidecar: sc, image: this.sidecarTags.get(key) }, `sidecar image "${envName}/${sc}" ready`);
    }
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

  /** Episodes wait for `p` (start-up) before their first deploy. */
  gate(p: Promise<void>): void {
    this.gateP = p;
  }

  async spec(envName: string): Promise<EnvSpec> {
    try {
      await this.gateP;
    } catch (e) {
      throw new SandboxError('no_image', `the server could not prepare its env images: ${(e as Error).message}`);
    }
    return this.specOf(envName);
  }

  /** the env's spec once its image is ready (buildAll), without waiting for the start-up */
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
}
