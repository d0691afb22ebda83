/**
 * Which images a bundle needs, one entry per image: each env's, then its sidecars', each either
 * built from a context in the bundle (tagged by content hash under `buildName`) or named by
 * reference. The one walk of the manifest for images: `openenv-bundle build` and the server's
 * catalog (env-catalog.ts) both read this list, with the same build names (an env's,
 * `sidecarBuildName`) and the same builder, so an image built ahead of time carries the tag the
 * server looks for.
 */
import path from 'node:path';
import { contextDir, type LoadedBundle } from './loader.js';

/** the name a sidecar's image is built under: `<env>.sidecars.<sidecar>` */
export function sidecarBuildName(envName: string, sidecar: string): string {
  return `${envName}.sidecars.${sidecar}`;
}

export interface BundleImage {
  /** `<env>`, or `<env>/<sidecar>` */
  name: string;
  env: string;
  sidecar: string | null;
  /** built from a context in the bundle: the name its tag is made from, its folder, and no network for its RUN steps when the bundle says so */
  build: { name: string; contextDir: string; network?: 'none' } | null;
  /** a reference the bundle names instead (`image`): nothing to build */
  image: string | null;
}

/** every image of the bundle, in manifest order; an env with neither build nor image has none */
export function bundleImages(bundle: Pick<LoadedBundle, 'dir' | 'manifest'>): BundleImage[] {
  const out: BundleImage[] = [];
  for (const [env, spec] of Object.entries(bundle.manifest.envs)) {
    const dir = contextDir(bundle, env);
    if (dir || spec.image) {
      out.push({
        name: env,
        env,
        sidecar: null,
        build: dir ? { name: env, contextDir: dir, ...(spec.build_network === 'none' ? { network: 'none' as const } : {}) } : null,
        image: dir ? null : spec.image!,
      });
    }
    for (const [sc, s] of Object.entries(spec.sidecars ?? {})) {
      out.push({
        name: `${env}/${sc}`,
        env,
        sidecar: sc,
        build:
          s.build !== undefined
            ? {
                name: sidecarBuildName(env, sc),
                contextDir: path.resolve(bundle.dir, s.build),
                ...(s.build_network === 'none' ? { network: 'none' as const } : {}),
              }
            : null,
        image: s.build !== undefined ? null : s.image!,
      });
    }
  }
  return out;
}
