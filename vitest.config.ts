import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { defineConfig } from 'vitest/config';

/** Runs the engine-clean check after every other file, whatever order vitest would pick. */
class LastIsEngineCheck extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const isLast = (f: TestSpecification) => f.moduleId.endsWith('engine-clean.docker.test.ts');
    return [...sorted.filter((f) => !isLast(f)), ...sorted.filter(isLast)];
  }
}

/**
 * Two layers. `fast`: every file that needs no Docker engine (envs run as child processes through
 * test/support/process-sandbox.ts), files in parallel, DOCKER_HOST pointed at nothing so a test
 * that reaches for the engine fails instead of quietly using it. `docker`: the *.docker.test.ts
 * files, which prove what only a real engine proves, one file at a time, after the fast layer.
 */
export default defineConfig({
  test: {
    testTimeout: 120_000,
    hookTimeout: 300_000,
    sequence: { sequencer: LastIsEngineCheck },
    reporters: ['default', './test/summary-reporter.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'fast',
          // most of a fast test's time is waiting on envs, timers and sockets, not CPU: more files
          // than cores at once
          maxWorkers: 4,
          pool: 'threads',
          isolate: false,
          include: ['test/**/*.test.ts'],
          exclude: ['test/**/*.docker.test.ts'],
          globalSetup: ['test/support/fast-global-setup.ts'],
          env: { OPENENV_TEST_LAYER: 'fast', DOCKER_HOST: 'unix:///nonexistent/the-fast-layer-has-no-docker.sock' },
          testTimeout: 30_000,
          hookTimeout: 60_000,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'docker',
          include: ['test/**/*.docker.test.ts'],
          globalSetup: ['test/support/docker-global-setup.ts'],
          env: { OPENENV_TEST_LAYER: 'docker' },
          // Docker-backed files share one engine on a 2-core machine: one file at a time keeps
          // container counts and timings meaningful.
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
