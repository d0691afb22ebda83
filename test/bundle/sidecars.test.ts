/**
 * The bundle format's sidecars (docs/bundle-format.md, "Sidecars"): what loads (their defaults),
 * what each mistake says, that their images are made at start with the env's and given in its
 * spec, and that a sandbox that runs none refuses the bundle at start, naming them.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { EnvCatalog, loadBundle } from '../../src/bundle/index.js';
import type { ImageBuildRequest } from '../../src/sandbox/sandbox.js';
import { baseManifest, bundleError, removeTempDirs, writeBundle } from './helpers.js';

afterAll(removeTempDirs);

const silent = { info() {}, warn() {}, error() {}, debug() {} } as never;

function manifest(sidecars: Record<string, unknown>): Record<string, any> {
  return { ...baseManifest(), envs: { e: { build: 'envs/e', sidecars } } };
}

const FILES = { 'sidecars/db/Dockerfile': 'FROM scratch\n' };

describe('sidecars', () => {
  it('load with small defaults; their images are built or checked at start, after the env’s, and given in its spec', async () => {
    const b = await loadBundle(
      writeBundle({
        manifest: manifest({
          db: { build: 'sidecars/db', build_network: 'none', environment: { KV_PORT: '7000' }, healthcheck: { command: ['kv', 'check'] } },
          cache: { image: 'openenv-local/redis:7', resources: { memory_mb: 64 } },
        }),
        files: FILES,
      }),
    );
    expect(b.manifest.envs.e!.sidecars).toEqual({
      db: {
        build: 'sidecars/db',
        build_network: 'none',
        environment: { KV_PORT: '7000' },
        healthcheck: { command: ['kv', 'check'], interval_s: 1, timeout_s: 10, retries: 3, start_period_s: 0 },
        resources: { memory_mb: 256, cpus: 0.5, pids: 128 },
      },
      cache: { image: 'openenv-local/redis:7', environment: {}, resources: { memory_mb: 64, cpus: 0.5, pids: 128 } },
    });
    const builds: ImageBuildRequest[] = [];
    const checked: string[] = [];
    const sandbox = {
      sidecars: true,
      images: {
        build: async (req: ImageBuildRequest) => {
          builds.push(req);
          return `built/${req.envName}:1`;
        },
        check: async (ref: string) => {
          checked.push(ref);
        },
      },
    };
    const catalog = new EnvCatalog(b, sandbox as never, {}, silent);
    await catalog.buildAll();
    expect(builds.map((r) => [r.envName, r.contextDir.endsWith('/sidecars/db') || r.contextDir.endsWith('/envs/e'), r.network ?? 'default'])).toEqual([
      ['e', true, 'default'],
      ['e.sidecars.db', true, 'none'],
    ]);
    expect(checked).toEqual(['openenv-local/redis:7']);
    expect(catalog.specOf('e').sidecars).toEqual([
      {
        name: 'db',
        image: 'built/e.sidecars.db:1',
        environment: { KV_PORT: '7000' },
        healthcheck: { command: ['kv', 'check'], intervalS: 1, timeoutS: 10, retries: 3, startPeriodS: 0 },
        resources: { memoryMb: 256, cpus: 0.5, pids: 128 },
      },
      { name: 'cache', image: 'openenv-local/redis:7', environment: {}, resources: { memoryMb: 64, cpus: 0.5, pids: 128 } },
    ]);
  });

  it('a sandbox that runs no sidecars (the swarm) refuses the bundle at start, naming them', async () => {
    const b = await loadBundle(writeBundle({ manifest: manifest({ db: { build: 'sidecars/db' } }), files: FILES }));
    const sandbox = { images: { build: async () => 'x', check: async () => {} } };
    await expect(new EnvCatalog(b, sandbox as never, {}, silent).buildAll()).rejects.toThrow(
      /bundle test-bundle has envs with sidecars \(e: db\), which this sandbox does not run \(the swarm sandbox does not yet\): serve it with --sandbox docker/,
    );
  });

  it.each([
    ['both build and image', { db: { build: 'sidecars/db', image: 'x' } }, 'expected either "build" or "image", got both'],
    ['neither build nor image', { db: {} }, 'expected "build" (a folder of the bundle) or "image" (an image reference), got neither'],
    ['a name that is no host name', { My_DB: { image: 'x' } }, 'sidecar "My_DB" must match'],
    ['an unknown field', { db: { image: 'x', ports: [5432] } }, 'unknown field'],
    ['a build folder with no Dockerfile', { db: { build: 'sidecars/none' } }, 'envs.e.sidecars.db.build'],
    ['an empty healthcheck command', { db: { image: 'x', healthcheck: { command: '' } } }, 'expected a shell command'],
  ])('refuses %s', async (_what, sidecars, message) => {
    const err = await bundleError(loadBundle(writeBundle({ manifest: manifest(sidecars), files: { ...FILES, 'sidecars/none/README': 'x\n' } })));
    expect(err.message).toContain(message);
  });
});
