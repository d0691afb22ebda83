/** Which images a bundle needs: each env's (built or named), then its sidecars', under the names their tags are made from. */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { bundleImages, sidecarBuildName } from '../../src/bundle/env-images.js';
import { ManifestSchema } from '../../src/bundle/schema.js';

const res = { memory_mb: 128, cpus: 0.5, pids: 64 };

describe('bundleImages', () => {
  it('lists built envs, named envs and both kinds of sidecars, in manifest order, with their build networks', () => {
    const manifest = ManifestSchema.parse({
      name: 'x',
      version: '1.0.0',
      description: 'd',
      default_split: 'train',
      splits: { train: 'tasks/train.jsonl' },
      envs: {
        web: {
          build: 'envs/web',
          build_network: 'none',
          port: 8000,
          resources: res,
          sidecars: { db: { image: 'postgres:16', resources: res }, cache: { build: 'envs/cache', build_network: 'none', resources: res } },
        },
        named: { image: 'ghcr.io/o/env:1', port: 8000, resources: res },
      },
      toolsets: { t: { env: 'web', tools: [] } },
      max_turns: 1,
    });
    const dir = '/b';
    expect(bundleImages({ dir, manifest })).toEqual([
      { name: 'web', env: 'web', sidecar: null, build: { name: 'web', contextDir: path.resolve('/b/envs/web'), network: 'none' }, image: null },
      { name: 'web/db', env: 'web', sidecar: 'db', build: null, image: 'postgres:16' },
      {
        name: 'web/cache',
        env: 'web',
        sidecar: 'cache',
        build: { name: 'web.sidecars.cache', contextDir: path.resolve('/b/envs/cache'), network: 'none' },
        image: null,
      },
      { name: 'named', env: 'named', sidecar: null, build: null, image: 'ghcr.io/o/env:1' },
    ]);
    expect(sidecarBuildName('web', 'cache')).toBe('web.sidecars.cache');
  });
});
