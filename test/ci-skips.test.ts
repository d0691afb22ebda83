/**
 * CI runs every test: with CI set, a run in which a test was skipped or left todo fails (exit 1)
 * and names it; without CI the same run passes and counts it. Vitest itself is run, as CI runs it,
 * on a throwaway test file with this repository's summary reporter.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DIR = path.join(ROOT, 'test-artifacts', `ci-skips-${process.pid}`);
const VITEST = path.join(ROOT, 'node_modules', 'vitest', 'vitest.mjs');

function run(file: string, ci: boolean): { status: number | null; out: string } {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.CI;
  if (ci) env.CI = 'true';
  const r = spawnSync(process.execPath, [VITEST, 'run', '--root', DIR, '--config', path.join(DIR, 'vitest.config.mjs'), file], {
    env,
    encoding: 'utf8',
    timeout: 120_000,
  });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

describe('a run with a test that did not run', () => {
  beforeAll(() => {
    mkdirSync(DIR, { recursive: true });
    writeFileSync(
      path.join(DIR, 'vitest.config.mjs'),
      `export default { test: { reporters: ['dot', ${JSON.stringify(path.join(ROOT, 'test', 'summary-reporter.ts'))}], include: ['*.test.mjs'] } };\n`,
    );
    // inside the repository: `vitest` resolves to its node_modules
    const vitestImport = "import { it } from 'vitest';\n";
    writeFileSync(
      path.join(DIR, 'skipped.test.mjs'),
      `${vitestImport}it('runs', () => {});\nit.skip('is skipped', () => {});\nit.todo('is still to write');\n`,
    );
    writeFileSync(path.join(DIR, 'all-run.test.mjs'), `${vitestImport}it('runs', () => {});\n`);
  });
  afterAll(() => rmSync(DIR, { recursive: true, force: true }));

  it('fails in CI, naming each test that did not run', () => {
    const r = run('skipped.test.mjs', true);
    expect(r.status, r.out).toBe(1);
    expect(r.out).toContain('Tests: 1 passed, 0 failed, 2 skipped');
    expect(r.out).toContain('skipped.test.mjs > is skipped (skipped)');
    expect(r.out).toContain('skipped.test.mjs > is still to write (todo)');
  });

  it('passes outside CI, the skips counted', () => {
    const r = run('skipped.test.mjs', false);
    expect(r.status, r.out).toBe(0);
    expect(r.out).toContain('Tests: 1 passed, 0 failed, 2 skipped');
  });

  it('passes in CI when every test ran', () => {
    const r = run('all-run.test.mjs', true);
    expect(r.status, r.out).toBe(0);
    expect(r.out).toContain('Tests: 1 passed, 0 failed, 0 skipped');
  });
});
