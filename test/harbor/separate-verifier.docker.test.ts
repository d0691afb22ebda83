/**
 * Harbor 1.4's separate verifier environment and the agent's trajectory, on real Docker, as users
 * run them: the built CLI imports test/fixtures/harbor-tasks/separate-verifier (`[verifier]
 * environment_mode = "separate"`, `artifacts = ["/app/out.txt"]`) into a bundle whose verifier is
 * clean with those outputs, then `check --json` plays it. Its test.sh scores 1 only when
 * /app/out.txt is right, the agent's /app/scratch.txt (no artifact) is absent, and
 * /logs/agent/trajectory.json is ATIF with steps: golden at the max, empty at the floor. Declared
 * as an artifact, the scratch file reaches the verifier (the golden then scores 0: the test.sh
 * sees what it is given); with a shared verifier the trajectory is written in the agent's own
 * container. A two-step task whose second step's verifier is separate: that turn's verifier is
 * clean, given the task's and the step's artifacts only, and reads both turns' calls.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeDocker } from '../support/docker.js';
import { BASE_IMAGE_RULE, ensureDebianBase } from './helpers.js';

const CLI = path.resolve(import.meta.dirname, '../../dist/cli/openenv-bundle.js');
const FIXTURE = path.resolve(import.meta.dirname, '../fixtures/harbor-tasks/separate-verifier');
/** the bundles' folder names start with it, so their env images (openenv-bundle/<folder>-<task>) are this run's own */
const PREFIX = `sv${process.pid}-`;

function ownImages(): string[] {
  return execFileSync('docker', ['images', '--format', '{{.Repository}}:{{.Tag}}'], { encoding: 'utf8' })
    .split('\n')
    .filter((i) => i.startsWith(`openenv-bundle/${PREFIX}`));
}

interface CheckJson {
  ok: boolean;
  problems: { where: string; message: string }[];
  played: { golden: { passed: number; played: number }; empty: { passed: number; played: number } };
}

function run(args: string[]) {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 600_000 });
}

function importTask(src: string, out: string): void {
  const r = run(['import', 'harbor', src, '--out', out, '--base-image', BASE_IMAGE_RULE, '--json']);
  expect(r.status, r.stdout + r.stderr).toBe(0);
}

function check(bundle: string): { status: number | null; json: CheckJson; text: string } {
  const r = run(['check', bundle, '--tasks', 'all', '--json']);
  return { status: r.status, json: JSON.parse(r.stdout) as CheckJson, text: r.stdout + r.stderr };
}

async function rowOf(bundle: string): Promise<Record<string, any>> {
  const text = await readFile(path.join(bundle, 'tasks/train.jsonl'), 'utf8');
  return JSON.parse(text.trim().split('\n')[0]!) as Record<string, any>;
}

/** a copy of the fixture with task.toml (and solve.sh) changed */
async function variant(tmp: string, name: string, edit: (toml: string) => string, solve?: (s: string) => string): Promise<string> {
  const src = path.join(tmp, 'src', name, 'separate-verifier');
  await cp(FIXTURE, src, { recursive: true });
  await writeFile(path.join(src, 'task.toml'), edit(await readFile(path.join(src, 'task.toml'), 'utf8')));
  if (solve) await writeFile(path.join(src, 'solution/solve.sh'), solve(await readFile(path.join(src, 'solution/solve.sh'), 'utf8')));
  return src;
}

describeDocker('Harbor separate verifier environment and trajectory.json, as import and check run them', () => {
  let tmp: string;
  beforeAll(async () => {
    ensureDebianBase();
    tmp = await mkdtemp(path.join(tmpdir(), 'harbor-separate-verifier-'));
  });
  afterAll(async () => {
    if (tmp) await rm(tmp, { recursive: true, force: true });
    // the engine as it was: the env images check built for these bundles are removed
    const built = ownImages();
    if (built.length > 0) execFileSync('docker', ['rmi', ...built], { stdio: 'pipe' });
  });

  it('environment_mode = "separate": a clean verifier given /logs/artifacts and the artifacts; golden at the max (its scratch file unseen, the trajectory read), empty at the floor', async () => {
    const out = path.join(tmp, `${PREFIX}separate`);
    importTask(FIXTURE, out);
    const row = await rowOf(out);
    expect(row.verifier).toMatchObject({ mode: 'clean', outputs: ['/logs/artifacts', '/app/out.txt'] });
    const t0 = Date.now();
    const r = check(out);
    console.log(`[measure] check of the separate-verifier task (golden, empty, replay): ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    expect(r.status, r.text).toBe(0);
    expect(r.json.ok).toBe(true);
    expect(r.json.problems).toEqual([]);
    expect(r.json.played.golden).toMatchObject({ passed: 1, played: 1 });
    expect(r.json.played.empty).toMatchObject({ passed: 1, played: 1 });
  }, 600_000);

  it('the scratch file declared as an artifact reaches the verifier: the same test.sh then scores the golden 0', async () => {
    const src = await variant(tmp, 'scratch', (t) =>
      t.replace('artifacts = ["/app/out.txt"]', 'artifacts = ["/app/out.txt", { source = "/app/scratch.txt", destination = "scratch.txt" }]'),
    );
    const out = path.join(tmp, `${PREFIX}scratch`);
    importTask(src, out);
    expect((await rowOf(out)).verifier.outputs).toEqual(['/logs/artifacts', '/app/out.txt', '/app/scratch.txt']);
    const r = check(out);
    expect(r.status, r.text).toBe(1);
    expect(r.json.problems.map((p) => p.message)).toEqual([expect.stringMatching(/^the golden solution scored reward = 0/)]);
  }, 600_000);

  it("a shared verifier (in place) gets the trajectory in the agent's container too", async () => {
    const src = await variant(
      tmp,
      'shared',
      (t) => t.replace('environment_mode = "separate"', 'environment_mode = "shared"'),
      // in place the verifier sees everything: the golden keeps no scratch file
      (s) => s.replace(/^echo "summed.*$/m, ''),
    );
    const out = path.join(tmp, `${PREFIX}shared`);
    importTask(src, out);
    const row = await rowOf(out);
    expect(row.verifier.mode ?? 'in-place').toBe('in-place');
    expect(row.verifier.outputs).toBeUndefined();
    const r = check(out);
    expect(r.status, r.text).toBe(0);
    expect(r.json.played.golden).toMatchObject({ passed: 1, played: 1 });
  }, 600_000);

  it("a step's separate verifier: turn 2 graded in a fresh container given the task's and the step's artifacts, with turn 2's calls in the trajectory", async () => {
    const src = path.join(tmp, 'src', 'steps', 'two-steps');
    const files: Record<string, string> = {
      'task.toml':
        'schema_version = "1.4"\nartifacts = ["/app/shared.txt"]\n[environment]\nallow_internet = false\nworkdir = "/app"\n[verifier]\ntimeout_sec = 60.0\n' +
        '[[steps]]\nname = "one"\n[[steps]]\nname = "two"\nartifacts = [{ source = "/app/two.txt", destination = "two.txt" }]\n[steps.verifier]\nenvironment_mode = "separate"\n',
      'environment/Dockerfile': 'FROM debian:bookworm\nWORKDIR /app\n',
      'steps/one/instruction.md': 'Write "one" to /app/one.txt and "shared" to /app/shared.txt.\n',
      'steps/one/solution/solve.sh': 'echo one > /app/one.txt\necho shared > /app/shared.txt\n',
      // in place: it sees everything
      'steps/one/tests/test.sh':
        '[ "$(cat /app/one.txt)" = one ] && [ -f /logs/agent/trajectory.json ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n',
      'steps/two/instruction.md': 'Write "two" to /app/two.txt.\n',
      'steps/two/solution/solve.sh': 'echo two > /app/two.txt\n',
      // clean: two.txt and shared.txt are here, one.txt (no artifact) is not; turn 2's calls are in the trajectory
      'steps/two/tests/test.sh': [
        'r=1',
        '[ "$(cat /app/two.txt 2>/dev/null)" = two ] || { echo "two.txt wrong"; r=0; }',
        '[ "$(cat /app/shared.txt 2>/dev/null)" = shared ] || { echo "shared.txt missing"; r=0; }',
        '[ -e /app/one.txt ] && { echo "one.txt seen"; r=0; }',
        'grep -q \'"turn": 2\' /logs/agent/trajectory.json || { echo "no turn 2 in the trajectory"; r=0; }',
        'echo $r > /logs/verifier/reward.txt',
        '',
      ].join('\n'),
    };
    for (const [rel, content] of Object.entries(files)) {
      await mkdir(path.dirname(path.join(src, rel)), { recursive: true });
      await writeFile(path.join(src, rel), content);
    }
    const out = path.join(tmp, `${PREFIX}steps`);
    importTask(src, out);
    const row = await rowOf(out);
    expect(row.per_turn[0].verifier.mode).toBeUndefined();
    expect(row.per_turn[1].verifier).toMatchObject({ mode: 'clean', outputs: ['/logs/artifacts', '/app/shared.txt', '/app/two.txt'] });
    const r = check(out);
    expect(r.status, r.text).toBe(0);
    expect(r.json.problems).toEqual([]);
    expect(r.json.played.golden).toMatchObject({ passed: 1, played: 1 });
    expect(r.json.played.empty).toMatchObject({ passed: 1, played: 1 });
  }, 600_000);
});
