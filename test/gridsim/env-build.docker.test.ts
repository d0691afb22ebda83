/**
 * "One core, no second copy": the env's runtime file is an esbuild bundle of the bundle's own
 * envs/gridsim/src, committed and kept current, and the image builds from a bare node image
 * (no shell, no npm) from a context holding nothing but that file, and serves an episode.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { describe } from 'vitest';
import { BANNER, buildEnvBundle, OUT_FILE, staleness } from '../../scripts/gridsim/build-env.js';
import { listContext } from '../../src/sandbox/engine/image-build.js';
import { describeDocker, TEST_BUILD_ARGS, uniqueInstance } from '../support/docker.js';

const ENV_DIR = join(import.meta.dirname, '../../bundles/gridsim-v1/envs/gridsim');

describe('envs/gridsim/app/server.mjs', () => {
  it('is byte for byte a fresh esbuild bundle of envs/gridsim/src (else: npm run gridsim:build-env)', async () => {
    expect(OUT_FILE).toBe(join(ENV_DIR, 'app/server.mjs'));
    const problem = await staleness();
    expect(problem, problem ?? '').toBeNull();
  });
  it('is reported stale, with how to regenerate, when it differs by one byte or is missing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gridsim-env-'));
    try {
      const fresh = Buffer.from(await buildEnvBundle());
      const edited = Buffer.from(fresh);
      const at = fresh.length - 2;
      edited[at] = (edited[at] as number) ^ 1;
      writeFileSync(join(dir, 'server.mjs'), edited);
      expect(await staleness(join(dir, 'server.mjs'))).toMatch(/differs from a fresh esbuild bundle.*run `npm run gridsim:build-env`/);
      writeFileSync(join(dir, 'server.mjs'), fresh);
      expect(await staleness(join(dir, 'server.mjs'))).toBeNull();
      expect(await staleness(join(dir, 'absent.mjs'))).toMatch(/is missing; run `npm run gridsim:build-env`/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it('is the only file of app/, headed as generated, and imports nothing but node: builtins', () => {
    expect(readdirSync(join(ENV_DIR, 'app'))).toEqual(['server.mjs']);
    const text = readFileSync(OUT_FILE, 'utf8');
    expect(text.startsWith(`${BANNER}\n`)).toBe(true);
    expect(BANNER).toMatch(/generated/i);
    expect(BANNER).toContain('npm run gridsim:build-env');
    const specifiers = [...text.matchAll(/\b(?:from|import)\s*\(?\s*(['"])([^'"]+)\1/g)].map((m) => m[2]);
    expect(specifiers.length).toBeGreaterThan(0);
    for (const s of specifiers) expect(s).toMatch(/^node:[a-z_/]+$/);
    expect(text).not.toMatch(/\brequire\s*\(/);
    // the whole env is in it: the entry, the HTTP server, the episode, the physics and the scoring
    for (const mod of ['server', 'env-server', 'episode', 'physics', 'score', 'schedule', 'task']) expect(text).toContain(`// src/${mod}.ts\n`);
  });
  it("is all the build context sends: the source stays out (.dockerignore, with the server's own context walk)", async () => {
    const entries = await listContext({ bundleName: 'gridsim-v1', envName: 'gridsim', contextDir: ENV_DIR, buildArgs: {} });
    expect(entries.map((e) => `${e.type} ${e.rel}`)).toEqual(['file .dockerignore', 'file Dockerfile', 'file app/server.mjs']);
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
    expect(lines.filter((l) => /^(COPY|ADD)\b/.test(l))).toEqual(['COPY app/server.mjs /app/server.mjs']);
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
    // the image holds the bundled file and nothing of the source
    const listing = execFileSync('docker', ['run', '--rm', tag, 'node', '-e', "process.stdout.write(JSON.stringify(require('node:fs').readdirSync('/app')))"], {
      encoding: 'utf8',
    });
    expect(JSON.parse(listing)).toEqual(['server.mjs']);
    container = execFileSync('docker', ['run', '-d', '--memory', '256m', '--cpus', '0.5', '--pids-limit', '128', '-p', '127.0.0.1::8000', tag], {
      encoding: 'utf8',
    }).trim();
    const hostPort = execFileSync('docker', ['port', container, '8000/tcp'], { encoding: 'utf8' }).trim().split('\n')[0]?.split(':').pop();
    const base = `http://127.0.0.1:${hostPort}`;
    let healthy = false;
    for (let i = 0; i < 50 && !healthy; i++) {
      healthy = await fetch(`${base}/health`, { signal: AbortSignal.timeout(2000) }).then(
        (r) => r.ok,
        () => false,
      );
      if (!healthy) await new Promise((r) => setTimeout(r, 200));
    }
    expect(healthy).toBe(true);
    const row = JSON.parse(readFileSync(join(ENV_DIR, '../../tasks/wiring.jsonl'), 'utf8').split('\n')[0] as string) as {
      task_id: string;
      data: { optimal_schedule: number[] };
    };
    const post = (path: string, body: unknown) =>
      fetch(base + path, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(10_000),
      }).then((r) => r.json() as Promise<Record<string, unknown>>);
    expect(await post('/reset', { task_id: row.task_id, data: row.data, seed: null })).toEqual({});
    expect(await post('/tools/call', { name: 'submit_schedule', arguments: { schedule: row.data.optimal_schedule } })).toMatchObject({
      done: true,
      scores: { schedule: 1 },
    });
    // runs as an unprivileged user, and stops promptly on SIGTERM (node is PID 1)
    expect(execFileSync('docker', ['inspect', '-f', '{{.Config.User}}', container], { encoding: 'utf8' }).trim()).toBe('1000:1000');
    // exit code 0: the env ended on SIGTERM itself; one that ignored it would be killed after
    // 10 s and show 137
    const t0 = Date.now();
    execFileSync('docker', ['stop', '-t', '10', container], { stdio: 'pipe' });
    console.info(`docker stop of the GridSim env: ${Date.now() - t0} ms`);
    expect(execFileSync('docker', ['inspect', '-f', '{{.State.ExitCode}},{{.State.OOMKilled}}', container], { encoding: 'utf8' }).trim()).toBe('0,false');
  });
});
