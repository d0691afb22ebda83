/**
 * `openenv-bundle check` as a user runs it: the built binary, a child process, on real Docker.
 * A good bundle plays and says `ok:`; a broken one exits 1 naming the problem; `--json` parses;
 * no run leaves its lock marker; and what a killed run left (its envs, networks and lock marker)
 * is removed by the next run's start-up. GridSim says clean_reset: its 200 eval tasks play on a
 * few containers, and one broken golden solution among them still fails the check.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { LOCK_LABELS } from '../../src/sandbox/engine/instance-lock.js';
import { LABELS } from '../../src/sandbox/sandbox.js';
import { describeDocker, LOCAL_NODE_IMAGE, LOCAL_PYTHON_IMAGE, waitFor } from '../support/docker.js';

const CLI = fileURLToPath(new URL('../../dist/cli/openenv-bundle.js', import.meta.url));
const ARITH = fileURLToPath(new URL('../../bundles/arith-v1', import.meta.url));
const BUILD_ARG = `PYTHON_IMAGE=${LOCAL_PYTHON_IMAGE}`;
const GRIDSIM = fileURLToPath(new URL('../../bundles/gridsim-v1', import.meta.url));

function lines(args: string[]): string[] {
  return execFileSync('docker', args, { encoding: 'utf8' })
    .split('\n')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** what the engine holds of one instance: containers, networks, lock markers */
function held(instance: string) {
  return {
    containers: lines(['ps', '-aq', '--filter', `label=${LABELS.instance}=${instance}`]),
    networks: lines(['network', 'ls', '-q', '--filter', `label=${LABELS.instance}=${instance}`]),
    markers: lines(['volume', 'ls', '-q', '--filter', `label=${LOCK_LABELS.lock}=${instance}`]),
  };
}

const NOTHING = { containers: [], networks: [], markers: [] };

function check(args: string[]) {
  return spawnSync(process.execPath, [CLI, 'check', ...args], { encoding: 'utf8', timeout: 600_000 });
}

describeDocker('openenv-bundle check, run as a process', () => {
  let parent: string;
  let broken: string;
  let gridsim: string;
  /** the eval task whose golden solution the copy breaks */
  let brokenTask: string;

  beforeAll(async () => {
    parent = await mkdtemp(path.join(tmpdir(), 'openenv-check-cmd-'));
    broken = path.join(parent, 'arith-v1');
    await cp(ARITH, broken, { recursive: true });
    // the env scores the task's data: a wrong expected answer makes the golden solution miss its max
    const file = path.join(broken, 'tasks/train.jsonl');
    const text = await readFile(file, 'utf8');
    const next = text.replace('"answers":[5294]', '"answers":[5295]');
    expect(next).not.toBe(text);
    await writeFile(file, next);

    // GridSim, with the 100th eval task's golden schedule idle: it scores the floor, not the max
    gridsim = path.join(parent, 'gridsim-v1');
    await cp(GRIDSIM, gridsim, { recursive: true, filter: (src) => !src.includes(`${path.sep}node_modules`) });
    const evalFile = path.join(gridsim, 'tasks/eval.jsonl');
    const rows = (await readFile(evalFile, 'utf8')).trim().split('\n');
    const row = JSON.parse(rows[99]!) as { task_id: string; golden: { tool: string; arguments: { schedule: number[] } }[] };
    brokenTask = row.task_id;
    row.golden = [{ tool: 'submit_schedule', arguments: { schedule: row.golden[0]!.arguments.schedule.map(() => 0) } }];
    rows[99] = JSON.stringify(row);
    await writeFile(evalFile, rows.join('\n') + '\n');
  });

  afterAll(async () => {
    await rm(parent, { recursive: true, force: true });
  });

  it('on a good bundle, prints what it played and "ok:", exits 0, and leaves no lock marker', () => {
    const run = check([ARITH, '--tasks', '1', '--build-arg', BUILD_ARG]);
    expect(run.stderr).not.toContain('exited without a result');
    expect(run.status, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toMatch(/played 2 task\(s\) in \d+ episode\(s\): golden at max 2\/2, empty at or under the floor 2\/2/);
    expect(run.stdout).toMatch(/^ {2}golden solutions: mean reward 1\.000 \(\w+ 1\.000/m);
    expect(run.stdout).toMatch(/^ {2}empty solutions: mean reward 0\.000 /m);
    // what each env ran with (docs/security.md)
    expect(run.stdout).toMatch(
      /^ {2}env \S+: locked down under runc, default capabilities, writable root, the image's user, storage 2048 MB, max files 100000$/m,
    );
    expect(run.stdout).toMatch(/^ok: no problem/m);
    expect(lines(['volume', 'ls', '-q', '--filter', `label=${LOCK_LABELS.lock}`]).filter((v) => v.includes('lock-check-'))).toEqual([]);
  });

  it('with --json, prints one JSON object naming its instance, which left nothing', () => {
    const run = check([ARITH, '--tasks', '1', '--json', '--build-arg', BUILD_ARG]);
    expect(run.status, run.stdout + run.stderr).toBe(0);
    const result = JSON.parse(run.stdout) as { ok: boolean; played: { instance: string; tasks: number; golden: { passed: number } } };
    expect(result.ok).toBe(true);
    expect(result.played.tasks).toBe(2);
    expect(result.played.golden.passed).toBe(2);
    expect(Object.values((result.played as unknown as { granted: Record<string, { runtime: string; no_new_privileges: boolean }> }).granted)).toEqual([
      expect.objectContaining({ runtime: 'runc', no_new_privileges: true }),
    ]);
    expect(held(result.played.instance)).toEqual(NOTHING);
  });

  it('on a broken bundle, exits 1 and names the task and the problem', () => {
    const run = check([broken, '--tasks', 'all', '--split', 'train', '--build-arg', BUILD_ARG]);
    expect(run.status, run.stdout + run.stderr).toBe(1);
    expect(run.stdout).toContain('arith-train-0');
    expect(run.stdout).toMatch(/the golden solution scored \w+ = 0, expected its declared max 1/);
    // only the golden solution of arith-train-0 misses; others that fail alike would share its line
    expect(run.stdout).toMatch(/^ {2}problem: task arith-train-0 \(tasks\/train\.jsonl line 1\): /m);
    expect(run.stdout).toMatch(/^\d+ problem\(s\)/m);
  });

  it('plays 200 GridSim tasks on a few reused containers (clean_reset), still fails the one broken golden solution, and leaves nothing', () => {
    const run = check([gridsim, '--split', 'eval', '--tasks', 'all', '--concurrency', '4', '--json', '--build-arg', `NODE_IMAGE=${LOCAL_NODE_IMAGE}`]);
    expect(run.status, run.stdout + run.stderr).toBe(1);
    const r = JSON.parse(run.stdout) as {
      problems: { where: string; message: string }[];
      played: { instance: string; episodes: number; golden: { passed: number; played: number }; envs: { env: string; deploys: number; reused: number }[] };
    };
    expect(r.problems).toEqual([
      {
        level: 'problem',
        where: expect.stringContaining(`task ${brokenTask} (tasks/eval.jsonl line 100)`),
        message: expect.stringMatching(/^the golden solution scored schedule = 0\.2\d*, expected its declared max 1;/),
      },
    ]);
    expect(r.played.golden).toMatchObject({ passed: 199, played: 200 });
    const [env] = r.played.envs;
    // 200 golden + 200 empty + 1 schema-violating play + the fresh replays: a handful of containers, the rest reused
    expect(env).toMatchObject({ env: 'gridsim' });
    expect(env!.deploys).toBeLessThan(20);
    expect(env!.deploys + env!.reused).toBe(r.played.episodes);
    expect(held(r.played.instance)).toEqual(NOTHING);
  });

  it('removes at start-up what a killed run left: its envs, networks and lock marker', async () => {
    const child = spawn(process.execPath, [CLI, 'check', ARITH, '--tasks', 'all', '--build-arg', BUILD_ARG], { stdio: 'ignore' });
    let instance = '';
    try {
      // the killed run's instance: the lock marker its pid wrote, once an env of it exists
      await waitFor(
        () => {
          const markers = lines(['volume', 'ls', '-q', '--filter', `label=${LOCK_LABELS.pid}=${child.pid}`]);
          if (markers.length === 0) return false;
          instance = lines(['volume', 'inspect', '--format', `{{index .Labels "${LOCK_LABELS.lock}"}}`, markers[0]!])[0] ?? '';
          return instance !== '' && held(instance).containers.length > 0;
        },
        120_000,
        'the check to deploy an env',
      );
    } finally {
      child.kill('SIGKILL');
    }
    await new Promise((r) => child.once('exit', r));
    const left = held(instance);
    expect(left.markers.length).toBeGreaterThan(0);
    expect(left.containers.length + left.networks.length).toBeGreaterThan(0);

    const next = check([ARITH, '--tasks', '1', '--split', 'eval', '--build-arg', BUILD_ARG]);
    expect(next.status, next.stdout + next.stderr).toBe(0);
    expect(held(instance)).toEqual(NOTHING);
  });
});
