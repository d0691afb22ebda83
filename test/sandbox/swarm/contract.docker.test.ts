/**
 * The Sandbox contract (test/sandbox/contract.ts) on the swarm backend, on the lab (one node: what
 * is proved is the backend, not placement). A swarm sandbox reaches its envs only from a container
 * joined to their overlays, so the suite runs where the server would: in a container on the
 * manager n1, this checkout mounted read-only and n1's socket mounted (contract.in-lab.ts, with its
 * own vitest config). This file starts that run and reads its report: every case of the contract
 * passed, none skipped, and nothing of the instance is left on the swarm. It logs how long the
 * manager still listed an overlay after the teardown that removed it (the harness's settleMs).
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { LOCAL_NODE_IMAGE, uniqueInstance } from '../../support/docker.js';
import { dk, footprint, lab, LAB_DIR, REGISTRY, REPO, runningContainers, sock } from '../../../scripts/lib/swarm-lab.js';
import { describeSwarm } from '../../support/swarm-lab.js';
import { promisify } from 'node:util';

const run = promisify(execFile);
const NAME = 'oe-swarm-contract';

/**
 * The shared libraries the checkout's native modules (rollup's, which vitest loads) link against,
 * mounted read-only from this host at their own paths: the offline node base has node's only.
 */
function nativeLibraryMounts(): string[] {
  const dir = join(REPO, 'node_modules/@rollup');
  const addons = readdirSync(dir).flatMap((pkg) =>
    readdirSync(join(dir, pkg))
      .filter((f) => f.endsWith('.node'))
      .map((f) => join(dir, pkg, f)),
  );
  const libs = new Set(addons.flatMap((a) => [...execFileSync('ldd', [a], { encoding: 'utf8' }).matchAll(/=> (\/\S+)/g)].map((m) => m[1]!)));
  return [...libs].flatMap((l) => ['-v', `${l}:${l}:ro`]);
}

interface JsonReport {
  numTotalTests: number;
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
  testResults: Array<{ assertionResults: Array<{ fullName: string; status: string }> }>;
}

describeSwarm('the Sandbox contract on a swarm', () => {
  let out: string;

  beforeAll(async () => {
    out = mkdtempSync(join(tmpdir(), 'openenv-swarm-contract-'));
    await lab('down', 3);
    await lab('up', 1);
    // the env images build FROM the offline node base, and the suite runs on it
    await run('sh', ['-c', `docker save ${LOCAL_NODE_IMAGE} | docker -H ${sock(1)} load -q`]);
  }, 600_000);

  afterAll(async () => {
    await dk(1, ['rm', '-f', NAME]).catch(() => '');
    await lab('down', 1);
    rmSync(out, { recursive: true, force: true });
  }, 300_000);

  it('every case of the contract passes on the swarm backend, run from a container on the manager, and nothing is left', async () => {
    const instance = uniqueInstance('swarm-contract');
    await dk(1, [
      'run',
      '--name',
      NAME,
      '--label',
      'openenv-swarm-lab.test=1',
      '-v',
      `${REPO}:${REPO}:ro`,
      '-v',
      `${out}:/out`,
      '-v',
      `${LAB_DIR}/n1/docker.sock:/var/run/docker.sock`,
      ...nativeLibraryMounts(),
      '-w',
      REPO,
      '-e',
      `OPENENV_CONTRACT_INSTANCE=${instance}`,
      '-e',
      `OPENENV_CONTRACT_REGISTRY=${REGISTRY}`,
      '-e',
      `OPENENV_CONTRACT_NODE_IMAGE=${LOCAL_NODE_IMAGE}`,
      '-d',
      LOCAL_NODE_IMAGE,
      'node',
      'node_modules/vitest/vitest.mjs',
      'run',
      '--config',
      'test/sandbox/swarm/in-lab.vitest.config.ts',
      // the checkout is read-only here: the config is run as it is, not bundled into a file beside it
      '--configLoader',
      'runner',
      '--reporter=default',
      '--reporter=json',
      '--outputFile.json=/out/report.json',
    ]);
    const code = Number((await dk(1, ['wait', NAME])).trim());
    const logs = await run('docker', ['-H', sock(1), 'logs', NAME], { maxBuffer: 64 * 1024 * 1024 }).then(
      (r) => r.stdout + r.stderr,
      (e: Error) => e.message,
    );
    if (code !== 0) console.error(logs.slice(-20_000));
    expect(code, 'the inner run exits 0').toBe(0);
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as JsonReport;
    const cases = report.testResults.flatMap((f) => f.assertionResults);
    // the contract's cases, each run and passed (a suite that ran nothing would pass vacuously)
    expect(cases.length).toBeGreaterThanOrEqual(14);
    expect(cases.filter((c) => c.status !== 'passed')).toEqual([]);
    expect(report).toMatchObject({ numFailedTests: 0, numPendingTests: 0, numTodoTests: 0, numPassedTests: cases.length });
    expect(cases.every((c) => c.fullName.startsWith('the Sandbox contract: swarm'))).toBe(true);
    // how long the manager still listed what a finished teardown removed (the contract's settled checks)
    const waits = [...logs.matchAll(/settled after (\d+) ms/g)].map((m) => Number(m[1]));
    console.log(`swarm contract: ${waits.length} checks of what was left; the longest waited ${Math.max(0, ...waits)} ms for the manager's listing to settle`);
    const f = await footprint(instance, 1);
    expect([f.services, f.networks, f.stocked, f.tasks, runningContainers(f)]).toEqual([[], [], [], [], 0]);
  });
});
