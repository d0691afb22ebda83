import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { defineConfig } from 'vitest/config';

/** Runs the engine-clean check after every other file, whatever order vitest would pick. */
class LastIsEngineCheck extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const isLast = (f: TestSpecification) => f.moduleId.endsWith('engine-clean.test.ts');
    return [...sorted.filter((f) => !isLast(f)), ...sorted.filter(isLast)];
  }
}

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    // Docker-backed files share one engine on a 2-core machine: one file at a time keeps
    // container counts and timings meaningful.
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 300_000,
    sequence: { sequencer: LastIsEngineCheck },
    reporters: ['default', './test/summary-reporter.ts'],
  },
});
