/**
 * Which image a sandbox runs: its `templateID` names an env of the bundle (an imported Harbor
 * task's env included; a task id names its env), or, with --e2b-image-key KEY, its
 * `metadata[KEY]` names an image (slime routes each boot by such a key), allowed only where it
 * matches one of --e2b-images' patterns and pulled when the engine lacks it: a pull at a time per
 * image, at most E2B.pulls.concurrent at once, each within E2B.pulls.timeoutMs, its progress in
 * the log (and told to the sandbox that waits for it, for the console).
 */
import type { Logger } from 'pino';
import type { LoadedBundle } from '../bundle/index.js';
import { E2B } from '../defaults.js';
import { SandboxError, type EnvImages, type EnvSpec, type PullProgress } from '../sandbox/sandbox.js';
import { E2bApiError } from './errors.js';

export interface TemplateDeps {
  bundle: LoadedBundle;
  /** a bundle env's spec, its image ready (the catalog's) */
  envSpec: (envName: string) => Promise<EnvSpec>;
  images: EnvImages;
  /** --e2b-image-key */
  imageKey: string | null;
  /** --e2b-images */
  imagePatterns: readonly string[];
  log: Logger;
}

export interface ResolvedTemplate {
  /** what the sandbox reports as its templateID */
  templateId: string;
  spec: EnvSpec;
  /** the image the metadata named, when it did */
  image: string | null;
}

/** `*` any run of characters, `?` one; the rest as it is */
export function imagePatternMatches(pattern: string, image: string): boolean {
  const re = new RegExp(
    `^${pattern
      .replace(/[.+^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '.*')
      .replace(/\?/g, '.')}$`,
  );
  return re.test(image);
}

const IMAGE_REF = /^[a-z0-9][a-z0-9._/:@-]{0,254}$/i;

/** a pull under way: the sandboxes waiting for it hear its progress, one that joins late its last word first */
interface PullUnderWay {
  done: Promise<void>;
  listeners: Set<(p: PullProgress) => void>;
  last: PullProgress | null;
}

export class Templates {
  /** the pulls under way, by image */
  private readonly pulls = new Map<string, PullUnderWay>();
  private pulling = 0;
  private readonly pullQueue: (() => void)[] = [];

  constructor(private readonly deps: TemplateDeps) {}

  /** the env names a templateID may give */
  names(): string[] {
    return Object.keys(this.deps.bundle.manifest.envs);
  }

  /**
   * The env a create asks for. Rejects with an E2bApiError saying what to set or name when it
   * names nothing this server serves.
   */
  async resolve(
    templateId: string,
    metadata: Record<string, string>,
    envVars: Record<string, string>,
    opts: { onPull?: (p: PullProgress) => void; signal?: AbortSignal } = {},
  ): Promise<ResolvedTemplate> {
    const { imageKey } = this.deps;
    const image = imageKey !== null ? metadata[imageKey] : undefined;
    if (image !== undefined) return { templateId, image, spec: await this.imageSpec(image, envVars, opts) };
    const envName = this.envOf(templateId);
    const spec = await this.deps.envSpec(envName);
    return { templateId, image: null, spec: { ...spec, environment: { ...spec.environment, ...envVars } } };
  }

  private envOf(templateId: string): string {
    const { bundle } = this.deps;
    if (Object.hasOwn(bundle.manifest.envs, templateId)) return templateId;
    const task = bundle.byId.get(templateId);
    if (task) return bundle.envOf(task).name;
    const hint =
      this.deps.imageKey === null
        ? ' To route sandboxes to images by a metadata key (slime sets SLIME_AGENT_SANDBOX_IMAGE_METADATA_KEY), start the server with --e2b-image-key KEY and --e2b-images PATTERN.'
        : ` Or name an image in metadata["${this.deps.imageKey}"].`;
    return this.fail(
      404,
      `template ${JSON.stringify(templateId.slice(0, 200))} does not exist on this server: a template is an env of the bundle (${this.names().join(', ')}) or a task id.${hint}`,
    );
  }

  private fail(status: number, message: string): never {
    throw new E2bApiError(status, message);
  }

  private async imageSpec(
    image: string,
    envVars: Record<string, string>,
    opts: { onPull?: (p: PullProgress) => void; signal?: AbortSignal },
  ): Promise<EnvSpec> {
    const key = this.deps.imageKey!;
    if (!IMAGE_REF.test(image)) this.fail(400, `metadata["${key}"] ${JSON.stringify(image.slice(0, 200))} is not an image reference`);
    const patterns = this.deps.imagePatterns;
    if (!patterns.some((p) => imagePatternMatches(p, image))) {
      this.fail(
        403,
        patterns.length === 0
          ? `image ${image} does not exist among the images this server may run: it runs none by metadata until the operator allows them with --e2b-images PATTERN (e.g. --e2b-images '${image.replace(/:[^/:]*$/, '')}:*')`
          : `image ${image} does not exist among the images this server may run (--e2b-images ${patterns.join(' ')}): the operator allows it by adding a pattern that matches it to --e2b-images`,
      );
    }
    await this.ensureImage(image, opts);
    return {
      name: 'e2b',
      image,
      port: 0,
      readyPath: '/',
      deployTimeoutMs: E2B.image.deployTimeoutMs,
      resources: { memoryMb: E2B.image.memoryMb, cpus: E2B.image.cpus, pids: E2B.image.pids, storageMb: E2B.image.storageMb },
      environment: envVars,
      kind: 'shell',
    };
  }

  /** the image on the engine: there already, or pulled (one pull per image; the caller may stop waiting) */
  private async ensureImage(image: string, opts: { onPull?: (p: PullProgress) => void; signal?: AbortSignal }): Promise<void> {
    const { images } = this.deps;
    try {
      await images.check(image);
      return;
    } catch (e) {
      if (!(e instanceof SandboxError) || e.fact !== 'no_image') throw e;
    }
    if (!images.pull) this.fail(503, `image ${image} is not on the engine and this sandbox pulls none: pull it on every node first`);
    let pull = this.pulls.get(image);
    if (!pull) {
      const started: PullUnderWay = {
        done: Promise.resolve(),
        listeners: new Set(),
        last: null,
      };
      started.done = this.pull(image, (p) => {
        started.last = p;
        started.listeners.forEach((l) => l(p));
      }).finally(() => this.pulls.delete(image));
      // its failure is each waiter's to hear; one that comes when all have stopped waiting is no one's
      started.done.catch(() => undefined);
      this.pulls.set(image, started);
      pull = started;
    }
    // a sandbox that joins a pull under way hears where it is, then the rest
    const listener = opts.onPull;
    if (listener) {
      pull.listeners.add(listener);
      if (pull.last) listener(pull.last);
    }
    const stop = opts.signal;
    try {
      await (stop
        ? Promise.race([pull.done, new Promise<never>((_r, reject) => stop.addEventListener('abort', () => reject(stop.reason as Error), { once: true }))])
        : pull.done);
    } finally {
      if (listener) pull.listeners.delete(listener);
    }
  }

  private async pull(image: string, tell: (p: PullProgress) => void): Promise<void> {
    const { log } = this.deps;
    await this.turn();
    const started = Date.now();
    let lastLog = 0;
    const signal = AbortSignal.timeout(E2B.pulls.timeoutMs);
    log.info({ event: 'image_pull', image }, `pulling ${image} for a sandbox`);
    try {
      await this.deps.images.pull!(image, {
        signal,
        onProgress: (p) => {
          tell(p);
          if (Date.now() - lastLog < 5000) return;
          lastLog = Date.now();
          log.info(
            { event: 'image_pull_progress', image, layers: p.layers, bytes: p.bytes, total_bytes: p.totalBytes },
            `pulling ${image}: ${mb(p.bytes)} of ${mb(p.totalBytes)} MB`,
          );
        },
      });
      log.info({ event: 'image_pulled', image, pull_s: (Date.now() - started) / 1000 }, `pulled ${image}`);
    } catch (e) {
      const why = signal.aborted ? `it took longer than ${E2B.pulls.timeoutMs / 1000} s` : (e as Error).message;
      log.warn({ event: 'image_pull_failed', image, err: why }, `could not pull ${image}`);
      this.fail(
        502,
        `image ${image} could not be pulled (${why}): it does not exist in its registry, or the engine cannot reach it; pull it on the engine yourself`,
      );
    } finally {
      this.release();
    }
  }

  private turn(): Promise<void> {
    if (this.pulling < E2B.pulls.concurrent) {
      this.pulling++;
      return Promise.resolve();
    }
    return new Promise((r) => this.pullQueue.push(r));
  }

  private release(): void {
    const next = this.pullQueue.shift();
    if (next) next();
    else this.pulling--;
  }
}

const mb = (b: number) => (b / 1e6).toFixed(1);
