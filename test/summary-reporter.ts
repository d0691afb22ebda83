/**
 * Ends every run with one plain line, `Tests: N passed, N failed, N skipped`, that CI systems
 * read whatever the test runner. In CI (CI set, as .ci/run sets it) a test that did not run fails
 * the run: every skipped or todo test is named, and the exit code is 1. Elsewhere a skip is only
 * counted: a machine without Docker or Chromium skips those suites with a loud message.
 */
import type { Reporter, TestModule } from 'vitest/node';

export default class SummaryReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, errors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = 0;
    const notRun: string[] = [];
    for (const m of modules) {
      for (const t of m.children.allTests()) {
        const state = t.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
        else notRun.push(`${m.moduleId.replace(`${process.cwd()}/`, '')} > ${t.fullName} (${t.options.mode === 'todo' ? 'todo' : state})`);
      }
      // a file that failed to load (syntax error, failing hook) counts as a failure
      if (m.state() === 'failed' && [...m.children.allTests()].every((t) => t.result().state !== 'failed')) failed++;
    }
    failed += errors.length;
    process.stdout.write(`\nTests: ${passed} passed, ${failed} failed, ${notRun.length} skipped\n`);
    if (inCi() && notRun.length > 0) {
      process.stdout.write(`\nCI runs every test: ${notRun.length} did not run, which fails the run:\n${notRun.map((n) => `  ${n}\n`).join('')}`);
      // vitest only ever raises the exit code to 1; it never lowers it back
      process.exitCode = 1;
    }
  }
}

/** CI is set, as test/support/docker.ts reads it (Docker and Chromium suites fail there instead of skipping) */
function inCi(): boolean {
  return Boolean(process.env.CI);
}
