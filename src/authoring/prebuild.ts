/**
 * Every image a bundle needs, made ahead of time on an engine (`openenv-bundle build`): each built
 * from its context by the server's own machinery (engine/image-build.ts: the same content-hash
 * tag, so a server on that engine finds it and builds nothing), or, when the bundle names an
 * image, pulled when the engine lacks it; optionally pushed to a registry (the swarm's:
 * swarm/registry.ts). A bounded number at once; one failure stops none of the others.
 */
import type Dockerode from 'dockerode';
import { isAbortError, throwIfAborted } from '../util/abort.js';
import { bundleImages, type BundleImage } from '../bundle/env-images.js';
import type { LoadedBundle } from '../bundle/loader.js';
import { buildEnvImage, imageExists, pullImage } from '../sandbox/docker/index.js';
import type { ImageBuildRequest } from '../sandbox/sandbox.js';
import { pushToRegistry, splitTag } from '../sandbox/swarm/registry.js';
import { settleEachAtMost } from '../util/work-pool.js';

/** lines of a failed build's output kept to show with its error */
export const BUILD_TAIL_LINES = 12;

export type PrebuildState = 'built' | 'present' | 'pulled' | 'failed';

export interface PrebuiltImage {
  /** `<env>` or `<env>/<sidecar>` */
  name: string;
  /** built: the content-hash tag a server looks for; named: the bundle's reference; null when it failed before either was known */
  ref: string | null;
  /** built here, already on the engine, pulled (a named image the engine lacked), or failed (building, pulling or pushing) */
  state: PrebuildState;
  /** with a registry: `<registry>/<repo>:<tag>@sha256:…` as pushed; null otherwise (named images are not pushed) */
  pushed: string | null;
  seconds: number;
  error: string | null;
  /** the last lines of the build's output, when it failed */
  tail: string[];
  /** what a server's engine runs to have the pushed image under the tag it looks for (pullCommands) */
  pull: string[];
}

export interface PrebuildReport {
  bundle: string;
  registry: string | null;
  /** the build arguments the tags were made with: a server must be given the same to find them */
  buildArgs: Record<string, string>;
  images: PrebuiltImage[];
  counts: Record<PrebuildState, number>;
}

export interface PrebuildOptions {
  docker: Dockerode;
  buildArgs: Record<string, string>;
  /** images made at once */
  concurrency: number;
  /** HOST:PORT[/PATH] to push every built image to; none: nothing pushed */
  registry?: string | null;
  signal?: AbortSignal;
  /** an image begins, `done` of `total` being done */
  onStart?: (name: string, done: number, total: number) => void;
  /** an image is done, the `done`-th of `total` */
  onDone?: (image: PrebuiltImage, done: number, total: number) => void;
}

/**
 * How a server's engine gets a pushed image under the tag it looks for: pulled by digest, then
 * tagged with its content-hash tag. Empty when nothing was pushed.
 */
export function pullCommands(image: Pick<PrebuiltImage, 'ref' | 'pushed'>): string[] {
  if (!image.pushed || !image.ref) return [];
  const [named, digest] = image.pushed.split('@') as [string, string | undefined];
  const byDigest = digest ? `${splitTag(named).repo}@${digest}` : named;
  return [`docker pull ${byDigest}`, `docker tag ${byDigest} ${image.ref}`];
}

async function makeOne(bundleName: string, img: BundleImage, opts: PrebuildOptions, inflight: Map<string, Promise<string>>): Promise<PrebuiltImage> {
  const started = Date.now();
  const tail: string[] = [];
  const out: PrebuiltImage = { name: img.name, ref: img.image, state: 'failed', pushed: null, seconds: 0, error: null, tail: [], pull: [] };
  try {
    throwIfAborted(opts.signal);
    if (img.build) {
      // one hash of the context and one look at the engine: the builder says whether it built
      let built = false;
      const req: ImageBuildRequest = {
        bundleName,
        envName: img.build.name,
        contextDir: img.build.contextDir,
        buildArgs: opts.buildArgs,
        ...(img.build.network ? { network: img.build.network } : {}),
        ...(opts.signal ? { signal: opts.signal } : {}),
        onProgress: (line) => {
          tail.push(line);
          if (tail.length > BUILD_TAIL_LINES) tail.shift();
        },
        onBuilding: () => (built = true),
      };
      out.ref = await buildEnvImage(opts.docker, req, inflight);
      out.state = built ? 'built' : 'present';
      // a failed push fails the image (the catch below), built or not
      if (opts.registry) out.pushed = await pushToRegistry(opts.docker, out.ref, opts.registry);
    } else if (await imageExists(opts.docker, img.image!)) {
      out.state = 'present';
    } else {
      await pullImage(opts.docker, img.image!, () => undefined, opts.signal);
      out.state = 'pulled';
    }
  } catch (e) {
    if (isAbortError(e) || opts.signal?.aborted) throw e;
    out.state = 'failed';
    out.error = (e as Error).message;
    out.tail = tail.filter((l) => !l.startsWith('ERROR: '));
  }
  out.seconds = (Date.now() - started) / 1000;
  out.pull = pullCommands(out);
  return out;
}

/** Makes every image of the bundle, `concurrency` at a time; rejects only when `signal` stops it (an AbortError). */
export async function prebuildImages(bundle: Pick<LoadedBundle, 'dir' | 'manifest'>, opts: PrebuildOptions): Promise<PrebuildReport> {
  const images = bundleImages(bundle);
  const inflight = new Map<string, Promise<string>>();
  let done = 0;
  const outcomes = await settleEachAtMost(images, opts.concurrency, async (img) => {
    throwIfAborted(opts.signal);
    opts.onStart?.(img.name, done, images.length);
    const made = await makeOne(bundle.manifest.name, img, opts, inflight);
    opts.onDone?.(made, ++done, images.length);
    return made;
  });
  const aborted = outcomes.find((o) => !o.ok);
  if (aborted && !aborted.ok) throw aborted.error;
  const made = outcomes.flatMap((o) => (o.ok ? [o.value] : []));
  const counts: Record<PrebuildState, number> = { built: 0, present: 0, pulled: 0, failed: 0 };
  for (const m of made) counts[m.state]++;
  return { bundle: bundle.manifest.name, registry: opts.registry ?? null, buildArgs: opts.buildArgs, images: made, counts };
}
