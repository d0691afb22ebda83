/**
 * "One core, no second copy": the env's JavaScript is a transpile of src/gridsim, and the image
 * builds from a bare node image (no shell, no npm) and serves an episode.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { describe } from 'vitest';
import { buildEnvFiles, staleFiles } from '../../scripts/gridsim/build-env.js';
import { describeDocker, TEST_BUILD_ARGS, uniqueInstance } from '../support/docker.js';

const ENV_DIR = join(import.meta.dirname, '../../bundles/gridsim-v1/envs/gridsim');

describe('envs/gridsim/app', () => {
  it('is exactly a fresh transpile of src/gridsim (run scripts/gridsim/build-env.ts after changing the core)', () => {
    expect(staleFiles()).toEqual([]);
  });
  it('is headed as generated, imports only node builtins and its siblings, and holds the whole env', () => {
    const files = buildEnvFiles();
    expect([...files.keys()]).toEqual(expect.arrayContaining(['server.mjs', 'env-server.mjs', 'episode.mjs', 'physics.mjs', 'score.mjs', 'schedule.mjs', 'task.mjs']));
    for (const [name, text] of files) {
      expect(text.split('\n')[0]).toBe(`// generated from src/gridsim/${name.replace(/\.mjs$/, '.ts')} by scripts/gridsim/build-env.ts — do not edit`);
      for (const m of text.matchAll(/\bfrom\s*['"]([^'"]+)['"]/g)) expect(m[1]).toMatch(/^(node:[a-z_/]+|\.\/[a-z-]+\.mjs)$/);
    }
  });
  it('has a Dockerfile with a NODE_IMAGE build argument, no RUN step and an exec-form CMD', () => {
    const lines = readFileSync(join(ENV_DIR, 'Dockerfile'), 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '' && !l.startsWith('#'));
    expect(lines[0]).toBe('ARG NODE_IMAGE=node:20-slim');
    expect(lines[1]).toBe('FROM ${NODE_IMAGE}');
    expect(lines.some((l) => /^RUN\b/.test(l))).toBe(false);
    const cmd = lines.filter((l) => /^(CMD|ENTRYPOINT)\b/.test(l));
    expect(cmd).toEqual(['CMD ["node", "/app/server.mjs"]']);
  });
});

describeDocker('the GridSim env image', () => {
  const tag = `openenv-test/gridsim-env:${uniqueInstance('img')}`;
  let container = '';
  afterAll(() => {
    if (container) execFileSync('docker', ['rm', '-f', container], { stdio: 'pipe' });
    execFileSync('docker', ['rmi', '-f', tag], { stdio: 'pipe' });
  });

  it('builds offline from the local node base and serves an episode', async () => {
    const buildArgs = Object.entries(TEST_BUILD_ARGS).flatMap(([k, v]) => ['--build-arg', `${k}=${v}`]);
    execFileSync('docker', ['build', '-q', ...buildArgs, '-t', tag, ENV_DIR], { stdio: 'pipe', timeout: 60_000 });
    container = execFileSync('docker', ['run', '-d', '--memory', '256m', '--cpus', '0.5', '--pids-limit', '128', '-p', '127.0.0.1::8000', tag], {
      encoding: 'utf8',
    }).trim();
    const hostPort = execFileSync('docker', ['port', container, '8000/tcp'], { encoding: 'utf8' }).trim().split('\n')[0]?.split(':').pop();
    const base = `http://127.0.0.1:${hostPort}`;
    let healthy = false;
    for (let i = 0; i < 50 && !healthy; i++) {
      healthy = await fetch(`${base}/health`, { signal: AbortSignal.timeout(2000) }).then((r) => r.ok, () => false);
      if (!healthy) await new Promise((r) => setTimeout(r, 200));
    }
    expect(healthy).toBe(true);
    const row = JSON.parse(readFileSync(join(ENV_DIR, '../../tasks/wiring.jsonl'), 'utf8').split('\n')[0] as string) as {
      task_id: string;
      data: { optimal_schedule: number[] };
    };
    const post = (path: string, body: unknown) =>
      fetch(base + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(10_000) }).then(
        (r) => r.json() as Promise<Record<string, unknown>>,
      );
    expect(await post('/reset', { task_id: row.task_id, data: row.data, seed: null })).toEqual({});
    expect(await post('/tools/call', { name: 'submit_schedule', arguments: { schedule: row.data.optimal_schedule } })).toMatchObject({
      done: true,
      scores: { schedule: 1 },
    });
    // runs as an unprivileged user, and stops promptly on SIGTERM (node is PID 1)
    expect(execFileSync('docker', ['inspect', '-f', '{{.Config.User}}', container], { encoding: 'utf8' }).trim()).toBe('1000:1000');
    const t0 = Date.now();
    execFileSync('docker', ['stop', '-t', '10', container], { stdio: 'pipe' });
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(execFileSync('docker', ['inspect', '-f', '{{.State.ExitCode}}', container], { encoding: 'utf8' }).trim()).toBe('0');
  });
});
