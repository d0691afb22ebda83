/**
 * A verifier that could not run its tests is no 0 (docs/harbor.md, "Tests that fetch"), as a user
 * meets it: the built CLI, child processes, real Docker. The fixture `needs-network` has the
 * standard Terminal-Bench test.sh (apt-get install curl, curl … | sh for uv, uvx pytest): import
 * names it as a task whose tests fetch; check plays its golden solution, which the verifier cannot
 * score offline, and reports `verifier_failed` with the verifier's output tail, not "scored 0".
 * The other direction on the same image: a test.sh whose fetch fails as noisily but whose own check
 * then runs and fails keeps its real 0, and check (its text) shows the verifier's output beside that score.
 */
import { spawnSync } from 'node:child_process';
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeDocker } from '../support/docker.js';
import { BASE_IMAGE_RULE, ensureDebianBase } from './helpers.js';

const CLI = path.resolve(import.meta.dirname, '../../dist/cli/openenv-bundle.js');
const FIXTURE = path.resolve(import.meta.dirname, '../fixtures/harbor-tasks/needs-network');

function run(args: string[]) {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 600_000 });
}

interface CheckJson {
  ok: boolean;
  problems: { where: string; message: string }[];
  played: { episodes: number; plays_s: number; golden: { passed: number; played: number; reward: number | null } };
}

/** bundle names of this suite's own, so that its images are the ones it removes */
const suffix = `${process.pid}-${Date.now().toString(36)}`;
const bundles: string[] = [];

function importTask(src: string, out: string): string {
  const name = `vfail-${path.basename(out)}-${suffix}`;
  bundles.push(name);
  const r = run(['import', 'harbor', src, '--out', out, '--name', name, '--base-image', BASE_IMAGE_RULE]);
  expect(r.status, r.stdout + r.stderr).toBe(0);
  return r.stdout;
}

function check(bundle: string): CheckJson {
  const r = run(['check', bundle, '--json']);
  expect(r.status, r.stdout + r.stderr).toBe(1);
  return JSON.parse(r.stdout) as CheckJson;
}

describeDocker('a verifier that could not run its tests: verifier_failed, with its output', () => {
  let tmp: string;
  beforeAll(async () => {
    ensureDebianBase();
    tmp = await mkdtemp(path.join(tmpdir(), 'harbor-verifier-failed-'));
  });
  afterAll(async () => {
    if (tmp) await rm(tmp, { recursive: true, force: true });
    // the env images check built for this suite's bundles (openenv-bundle/<bundle>-<env>:<hash>), and nothing else
    for (const name of bundles) {
      const ls = spawnSync('docker', ['images', '--format', '{{.Repository}}:{{.Tag}}', `openenv-bundle/${name}-*`], { encoding: 'utf8' });
      const refs = ls.stdout.split('\n').filter(Boolean);
      if (refs.length > 0) spawnSync('docker', ['rmi', ...refs], { encoding: 'utf8' });
    }
  });

  it("import names the task whose tests fetch; check's golden play ends verifier_failed with the verifier's output tail, not a score of 0", () => {
    const out = path.join(tmp, 'needs-network');
    const imported = importTask(FIXTURE, out);
    expect(imported).toMatch(
      /tests\/test\.sh: its tests fetch at run time \(apt-get install, apt-get update, curl … \| sh, uvx\): envs have no network here.*docs\/harbor\.md#tests-that-fetch\) \(task needs-network\)/,
    );

    const started = Date.now();
    const c = check(out);
    const wall = (Date.now() - started) / 1000;
    const golden = c.problems.find((p) => p.message.startsWith('the golden solution'));
    expect(golden?.message).toMatch(/^the golden solution failed the episode: verifier_failed in phase finish: /);
    expect(golden?.message).toMatch(
      /could not run its tests: test\.sh found no curl, \/root\/\.local\/bin\/env, uvx; it needed the network \(Temporary failure resolving/,
    );
    expect(golden?.message).toMatch(/it wrote reward = 0, which is not counted/);
    // the verifier's own output, its last lines
    expect(golden?.message).toMatch(/the verifier's output ends:\n {6}[^]*Temporary failure resolving 'deb\.debian\.org'/);
    expect(golden?.message).toMatch(/\n {6}\/tests\/test\.sh: line \d+: uvx: command not found$/);
    expect(c.problems.map((p) => p.message).join('\n')).not.toMatch(/scored reward = 0/);
    // the empty play cannot be scored either: a failure, not a 0 at the floor
    expect(c.problems.find((p) => p.message.startsWith('the empty solution'))?.message).toMatch(/failed the env: verifier_failed in phase finish/);
    expect(c.played.golden).toMatchObject({ passed: 0, played: 1, reward: null });
    console.log(`needs-network: check played ${c.played.episodes} episodes in ${c.played.plays_s} s (${wall.toFixed(1)} s in all)`);
  }, 600_000);

  it('a test.sh whose fetch fails but whose own check then runs and fails keeps its real 0, and check shows its output beside the score', async () => {
    const src = path.join(tmp, 'fetch-then-check-src');
    await cp(FIXTURE, src, { recursive: true });
    await writeFile(
      path.join(src, 'tests/test.sh'),
      [
        '#!/bin/bash',
        'apt-get -o Acquire::Retries=0 update',
        "if grep -qx 'Hello, world!' /app/hello.txt; then echo 1 > /logs/verifier/reward.txt",
        'else echo "hello.txt holds: $(head -c 80 /app/hello.txt 2>&1)"; echo 0 > /logs/verifier/reward.txt; fi',
        '',
      ].join('\n'),
    );
    // a golden solution that gets it wrong: its 0 is the solution's
    await writeFile(path.join(src, 'solution/solve.sh'), "#!/bin/bash\necho 'Hello, moon!' > /app/hello.txt\n");
    const out = path.join(tmp, 'fetch-then-check');
    importTask(src, out);
    // check's text, as a person reads it
    const r = run(['check', out]);
    expect(r.status, r.stdout + r.stderr).toBe(1);
    expect(r.stdout).toMatch(
      /problem: task fetch-then-check-src .*: the golden solution scored reward = 0, expected its declared max 1; fix the golden solution or the env's scoring; the verifier's output ends:\n/,
    );
    expect(r.stdout).toMatch(/\n +Temporary failure resolving 'deb\.debian\.org'\n/);
    expect(r.stdout).toMatch(/\n +hello\.txt holds: Hello, moon!\n/);
    expect(r.stdout).not.toMatch(/verifier_failed/);
    // the empty play's 0 is at the floor: no problem of its own
    expect(r.stdout).not.toMatch(/the empty solution/);
  }, 600_000);
});
