/**
 * The inner run of contract.docker.test.ts, in a container on the swarm lab's manager: the Sandbox
 * contract on the swarm backend, alone. This checkout is mounted read-only there: nothing is cached.
 */
import { defineConfig } from 'vitest/config';

export default defineConfig({
  cacheDir: '/tmp/openenv-vitest-in-lab',
  test: {
    include: ['test/sandbox/swarm/contract.in-lab.ts'],
    testTimeout: 180_000,
    hookTimeout: 300_000,
    fileParallelism: false,
  },
});
