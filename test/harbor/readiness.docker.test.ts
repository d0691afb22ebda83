/**
 * Readiness as Harbor defines it, on real Docker. Harbor tasks whose image's ENTRYPOINT starts an
 * HTTP service after a delay (test/fixtures/harbor-tasks/service-healthcheck*): imported with the
 * built CLI, then `check --json` as a child process. With the image's HEALTHCHECK (the deploy waits
 * for the engine's `healthy`) or `[environment.healthcheck]` (the reset's ready check, its start
 * period honoured) every golden play scores the max, the replays too, run after run; the variant
 * with neither is noted by the import (and its golden play, which finds no service yet, scores 0).
 * A ready check that never passes ends the reset `setup_failed` with its output; a shell env whose
 * replays differ gets no seed advice. On the sandbox itself: an image whose HEALTHCHECK never
 * passes fails the deploy (unhealthy at once, or `starting` until the deadline) with the check's
 * last output, leaving nothing behind; an http env waits for its HEALTHCHECK as well.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DockerSandbox } from '../../src/sandbox/docker/index.js';
import { LABELS, SandboxError, type EnvSpec } from '../../src/sandbox/sandbox.js';
import { describeDocker, labelledResources, uniqueInstance } from '../support/docker.js';
import { rejection } from '../sandbox/contract.js';
import { buildEcho, echoSpec } from '../sandbox/docker/fixture.js';
import { BASE_IMAGE_RULE, ensureDebianBase, LOCAL_DEBIAN_IMAGE } from './helpers.js';

const CLI = path.resolve(import.meta.dirname, '../../dist/cli/openenv-bundle.js');
const FIXTURES = path.resolve(import.meta.dirname, '../fixtures/harbor-tasks');
const WITH_HEALTHCHECK = ['service-healthcheck', 'service-healthcheck-toml'].map((t) => path.join(FIXTURES, t));
const WITHOUT = path.join(FIXTURES, 'service-healthcheck-none');

function run(args: string[]) {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 600_000 });
}

interface CheckJson {
  ok: boolean;
  problems: { where: string; message: string }[];
  played: { golden: { passed: number; played: number }; empty: { passed: number; played: number }; envs: { env: string; mean_s: number }[] };
}

function importTasks(srcs: string[], out: string): { notes: { field: string; message: string; tasks: string[] }[] } {
  const r = run(['import', 'harbor', ...srcs, '--out', out, '--base-image', BASE_IMAGE_RULE, '--json']);
  expect(r.status, r.stdout + r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { notes: { field: string; message: string; tasks: string[] }[] };
}

function check(bundle: string): { status: number | null; json: CheckJson; text: string } {
  const r = run(['check', bundle, '--tasks', 'all', '--json']);
  return { status: r.status, json: JSON.parse(r.stdout) as CheckJson, text: r.stdout + r.stderr };
}

describeDocker('Harbor readiness: healthchecks, as import and check run them', () => {
  let tmp: string;
  beforeAll(async () => {
    ensureDebianBase();
    tmp = await mkdtemp(path.join(tmpdir(), 'harbor-readiness-'));
  });
  afterAll(async () => {
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('a service the entrypoint starts after a delay: with a HEALTHCHECK or [environment.healthcheck], every golden play and replay at the max, run after run', () => {
    const out = path.join(tmp, 'healthy');
    const imported = importTasks(WITH_HEALTHCHECK, out);
    // a declared healthcheck (either kind) is what the note asks for: none here
    expect(imported.notes.filter((n) => /ENTRYPOINT/.test(n.message))).toEqual([]);
    for (let round = 1; round <= 2; round++) {
      const t0 = Date.now();
      const r = check(out);
      console.log(`[measure] check round ${round} of 2 healthchecked tasks (6 plays): ${((Date.now() - t0) / 1000).toFixed(1)} s`, r.json.played.envs);
      expect(r.status, r.text).toBe(0);
      expect(r.json.ok).toBe(true);
      expect(r.json.problems).toEqual([]);
      // golden, empty, and the golden's replay with the same seed (a difference would be a problem)
      expect(r.json.played.golden).toMatchObject({ passed: 2, played: 2 });
      expect(r.json.played.empty).toMatchObject({ passed: 2, played: 2 });
      // the service comes up 4 s after the start: every deploy (HEALTHCHECK) or reset (ready check) waited for it
      for (const e of r.json.played.envs) expect(e.mean_s).toBeGreaterThan(3.5);
    }
  }, 600_000);

  it('no healthcheck at all: the import notes the ENTRYPOINT; nothing waits, and the golden play finds no service', () => {
    const out = path.join(tmp, 'none');
    const imported = importTasks([WITHOUT], out);
    expect(imported.notes).toEqual(
      expect.arrayContaining([
        {
          field: 'environment/Dockerfile',
          message: expect.stringMatching(/^its ENTRYPOINT \(\["\/usr\/local\/bin\/entrypoint\.sh"\]\) may start services.*add \[environment\.healthcheck\]/),
          tasks: ['service-healthcheck-none'],
        },
      ]),
    );
    const r = check(out);
    expect(r.status, r.text).toBe(1);
    expect(r.json.problems.map((p) => p.message)).toEqual([expect.stringMatching(/^the golden solution scored reward = 0/)]);
  }, 600_000);

  it('a ready check that never passes ends the reset setup_failed, with its output', async () => {
    const src = path.join(tmp, 'src-failing', 'service-never-ready');
    await cp(WITH_HEALTHCHECK[1]!, src, { recursive: true });
    await writeFile(
      path.join(src, 'task.toml'),
      (await readFile(path.join(WITH_HEALTHCHECK[1]!, 'task.toml'), 'utf8')).replace(
        /\[environment\.healthcheck\][\s\S]*$/,
        '[environment.healthcheck]\ncommand = "echo nothing answers on 8081 >&2; exit 1"\ninterval_sec = 0.2\ntimeout_sec = 2\nstart_period_sec = 1\nretries = 2\n',
      ),
    );
    const out = path.join(tmp, 'never');
    importTasks([src], out);
    const t0 = Date.now();
    const r = check(out);
    expect(r.status, r.text).toBe(1);
    // the golden and the empty play both fail their reset
    const messages = r.json.problems.map((p) => p.message);
    expect(messages, r.text).toHaveLength(2);
    for (const m of messages) {
      expect(m).toMatch(
        /setup_failed in phase reset: .*ready check \(echo nothing answers on 8081 >&2; exit 1\) did not pass in 2 attempt\(s\) after its start period of 1 s/,
      );
      expect(m).toContain('nothing answers on 8081');
    }
    // each reset gave up after its start period and 2 counted failures, not later
    expect(Date.now() - t0).toBeLessThan(120_000);
  }, 600_000);

  it('a shell env whose replays differ: no seed advice, what could differ instead and both verifier outputs', async () => {
    const src = path.join(tmp, 'src-differs', 'differs');
    await cp(WITHOUT, src, { recursive: true });
    // the golden's output and the verifier's differ run to run; no service is needed
    await writeFile(path.join(src, 'solution/solve.sh'), '#!/bin/bash\ncat /proc/sys/kernel/random/uuid\necho done > /app/answer.txt\n');
    await writeFile(
      path.join(src, 'tests/test.sh'),
      '#!/bin/bash\necho "verifier run $(cat /proc/sys/kernel/random/uuid)"\nif [ -f /app/answer.txt ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n',
    );
    const out = path.join(tmp, 'differs');
    importTasks([src], out);
    const r = check(out);
    expect(r.status, r.text).toBe(1);
    const replay = r.json.problems.map((p) => p.message).find((m) => m.startsWith('played twice'));
    expect(replay, r.text).toBeDefined();
    expect(replay).toMatch(/gave different results \(first at step 1: /);
    expect(replay).toMatch(/no seed reaches this task .*healthcheck.*or the verifier is not deterministic/);
    expect(replay).not.toMatch(/derive the env's randomness|ignores_seed/);
    expect(replay).toMatch(/play 1's verifier output ends:\n\s+verifier run [0-9a-f-]{36}\n\s+play 2's verifier output ends:\n\s+verifier run [0-9a-f-]{36}/);
  }, 600_000);
});

describeDocker('DockerSandbox: an image HEALTHCHECK is readiness', () => {
  const instance = uniqueInstance('health');
  const sandbox = new DockerSandbox({ instance, bundleName: 'health-v1' });
  const tags: string[] = [];
  let ctx: string;
  const nothingLeft = () => expect(labelledResources(`${LABELS.instance}=${instance}`)).toEqual({ containers: [], networks: [] });

  /** an image of `from` with these Dockerfile lines, tagged for this suite (removed after it) */
  async function image(name: string, from: string, lines: string): Promise<string> {
    const dir = path.join(ctx, name);
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, 'Dockerfile'), `FROM ${from}\n${lines}\n`);
    const tag = `openenv-test/health-${name}:${instance}`;
    execFileSync('docker', ['build', '--network', 'none', '-q', '-t', tag, dir], { stdio: 'pipe', timeout: 120_000 });
    tags.push(tag);
    return tag;
  }

  const shellSpec = (img: string, deployTimeoutMs: number): EnvSpec => ({
    name: 'svc',
    image: img,
    kind: 'shell',
    port: 0,
    readyPath: '/',
    deployTimeoutMs,
    resources: { memoryMb: 256, cpus: 0.5, pids: 128 },
    environment: {},
  });

  beforeAll(async () => {
    ensureDebianBase();
    ctx = await mkdtemp(path.join(tmpdir(), 'health-images-'));
  });
  afterAll(async () => {
    await sandbox.sweep();
    await sandbox.close();
    if (tags.length > 0) execFileSync('docker', ['rmi', '-f', ...tags], { stdio: 'pipe' });
    if (ctx) await rm(ctx, { recursive: true, force: true });
  });

  describe('a shell env', () => {
    it('waits until the engine says healthy', async () => {
      const img = await image(
        'slow',
        LOCAL_DEBIAN_IMAGE,
        'HEALTHCHECK --interval=300ms --timeout=2s --retries=3 --start-period=20s CMD test -f /tmp/up || { touch /tmp/up; exit 1; }',
      );
      const t0 = Date.now();
      const handle = await sandbox.deploy({ envId: 'ep-slow', env: shellSpec(img, 20_000) });
      const waited = Date.now() - t0;
      const state = JSON.parse(execFileSync('docker', ['inspect', '--format', '{{json .State.Health}}', handle.containerId], { encoding: 'utf8' })) as {
        Status: string;
        Log: { ExitCode: number }[];
      };
      // ready only once healthy: the first run failed (it made /tmp/up), the second passed
      expect(state.Status).toBe('healthy');
      expect(state.Log.map((l) => l.ExitCode).slice(0, 2)).toEqual([1, 0]);
      expect(waited).toBeGreaterThan(500);
      await sandbox.teardown('ep-slow');
      nothingLeft();
    }, 120_000);

    it('one the engine marks unhealthy fails the deploy at once, naming the check and its last output', async () => {
      const img = await image(
        'unhealthy',
        LOCAL_DEBIAN_IMAGE,
        'HEALTHCHECK --interval=300ms --timeout=2s --retries=2 CMD echo "nothing listens on 8080" >&2; exit 1',
      );
      const t0 = Date.now();
      const err = await rejection(sandbox.deploy({ envId: 'ep-unhealthy', env: shellSpec(img, 30_000) }));
      const took = Date.now() - t0;
      expect(err).toBeInstanceOf(SandboxError);
      expect((err as SandboxError).reason).toBe('deploy_timeout');
      expect(err.message).toMatch(
        /^env `svc` was not ready: its image's HEALTHCHECK \(echo "nothing listens on 8080" >&2; exit 1\) did not pass \(the engine marked it unhealthy\); its last run: exit code 1: nothing listens on 8080$/,
      );
      // unhealthy after 2 failures 300 ms apart: well within the 30 s budget
      expect(took).toBeLessThan(15_000);
      nothingLeft();
    }, 120_000);

    it('one still starting at the deadline fails the deploy within its deploy timeout, with the last output', async () => {
      const img = await image(
        'starting',
        LOCAL_DEBIAN_IMAGE,
        'HEALTHCHECK --interval=300ms --timeout=2s --retries=1 --start-period=600s CMD echo "still warming up" >&2; exit 1',
      );
      const t0 = Date.now();
      const err = await rejection(sandbox.deploy({ envId: 'ep-starting', env: shellSpec(img, 4_000) }));
      const took = Date.now() - t0;
      expect((err as SandboxError).reason).toBe('deploy_timeout');
      expect(err.message).toMatch(
        /did not pass \(it was still starting when its deploy timeout \(4 s\) passed\); its last run: exit code 1: still warming up$/,
      );
      expect(took).toBeGreaterThanOrEqual(3_500);
      expect(took).toBeLessThan(10_000);
      nothingLeft();
    }, 120_000);
  });

  describe('an http env', () => {
    let echo: string;
    beforeAll(async () => {
      echo = await buildEcho(sandbox);
    });

    it('ready on its path and healthy: deployed; ready on its path but never healthy: refused', async () => {
      // the echo image has no shell: the checks are exec-form node one-liners
      const good = await image('echo-good', echo, 'HEALTHCHECK --interval=300ms --timeout=2s --retries=2 CMD ["node", "-e", "process.exit(0)"]');
      const handle = await sandbox.deploy({ envId: 'ep-echo-good', env: echoSpec(good) });
      expect(execFileSync('docker', ['inspect', '--format', '{{.State.Health.Status}}', handle.containerId], { encoding: 'utf8' }).trim()).toBe('healthy');
      await sandbox.teardown('ep-echo-good');

      const bad = await image(
        'echo-bad',
        echo,
        'HEALTHCHECK --interval=300ms --timeout=2s --retries=2 CMD ["node", "-e", "console.log(\'db not migrated\'); process.exit(1)"]',
      );
      const err = await rejection(sandbox.deploy({ envId: 'ep-echo-bad', env: echoSpec(bad) }));
      expect((err as SandboxError).reason).toBe('deploy_timeout');
      expect(err.message).toMatch(/HEALTHCHECK \(node -e .*\) did not pass \(the engine marked it unhealthy\); its last run: exit code 1: db not migrated$/);
      nothingLeft();
    }, 180_000);
  });
});
