/**
 * Ends every run with one plain line, `Tests: N passed, N failed, N skipped`, that CI systems
 * read whatever the test runner.
 */
import type { Reporter, TestModule } from 'vitest/node';

export default class SummaryReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, errors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const m of modules) {
      for (const t of m.children.allTests()) {
        const state = t.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
        else skipped++;
      }
      // a file that failed to load (syntax error, failing hook) counts as a failure
      if (m.state() === 'failed' && [...m.children.allTests()].every((t) => t.result().state !== 'failed')) failed++;
    }
    failed += errors.length;
    process.stdout.write(`\nTests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
