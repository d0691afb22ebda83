/**
 * The ProcessSandbox the fast layer runs on: the same contract as DockerSandbox (deploy,
 * readiness, failure paths, abort, teardown, diagnose, sweep), mirrored from
 * test/sandbox/docker/deploy.docker.test.ts, against the fixture's echo env as a child process.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxError, type EnvSpec } from '../../src/sandbox/sandbox.js';
import { ProcessSandbox } from './process-sandbox.js';
import { waitFor } from '../../scripts/lib/wait.js';

const ECHO_CONTEXT = fileURLToPath(new URL('../fixtures/fixture-v1/envs/echo', import.meta.url));

function echoSpec(image: string, overrides: Partial<EnvSpec> = {}): EnvSpec {
  return {
    name: 'echo',
    image,
    port: 8000,
    readyPath: '/health',
    deployTimeoutMs: 30_000,
    resources: { memoryMb: 128, cpus: 0.5, pids: 64 },
    environment: {},
    ...overrides,
  };
}

async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected the promise to reject, but it resolved');
}

async function post(baseUrl: string, p: string, body: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${baseUrl}${p}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.status, json: await res.json() };
}

/** true when something answers on the URL's port */
async function answers(url: string): Promise<boolean> {
  return fetch(url, { signal: AbortSignal.timeout(5000) }).then(
    () => true,
    () => false,
  );
}

describe('ProcessSandbox', () => {
  const sandbox = new ProcessSandbox();
  let image = '';
  const nothingLeft = () => {
    expect(sandbox.held()).toEqual([]);
    expect(sandbox.live()).toEqual([]);
    expect(sandbox.networksInUse()).toBe(0);
  };

  beforeAll(async () => {
    image = await sandbox.buildImage({ bundleName: 'fixture-v1', envName: 'echo', contextDir: ECHO_CONTEXT, buildArgs: {} });
  });
  afterAll(async () => {
    await sandbox.close();
  });

  describe('images', () => {
    it('tags a context by content, stable across calls and sandboxes; build args change the tag', async () => {
      expect(image).toMatch(/^openenv-bundle\/fixture-v1-echo:[0-9a-f]{12}$/);
      const lines: string[] = [];
      const again = await new ProcessSandbox().buildImage({
        bundleName: 'fixture-v1',
        envName: 'echo',
        contextDir: ECHO_CONTEXT,
        buildArgs: {},
        onProgress: (l) => lines.push(l),
      });
      expect(again).toBe(image);
      expect(lines.join('\n')).toContain('server.mjs');
      const withArg = await sandbox.buildImage({ bundleName: 'fixture-v1', envName: 'echo', contextDir: ECHO_CONTEXT, buildArgs: { NODE_IMAGE: 'x' } });
      expect(withArg).not.toBe(image);
      await expect(sandbox.checkImage(image)).resolves.toBeUndefined();
    });

    it('refuses a context without the entry script, and an image it did not build, as image_unavailable', async () => {
      const empty = await mkdtemp(path.join(tmpdir(), 'process-sandbox-'));
      try {
        await expect(sandbox.buildImage({ bundleName: 'b', envName: 'e', contextDir: empty, buildArgs: {} })).rejects.toMatchObject({
          reason: 'image_unavailable',
        });
      } finally {
        await rm(empty, { recursive: true, force: true });
      }
      await expect(sandbox.checkImage('ghcr.io/someone/env:1')).rejects.toMatchObject({ name: 'SandboxError', reason: 'image_unavailable' });
      const err = (await rejection(sandbox.deploy({ episodeId: 'ep-noimage', env: echoSpec('openenv-bundle/not-built:000000000000') }))) as SandboxError;
      expect(err.reason).toBe('image_unavailable');
      expect(err.message).toContain('openenv-bundle/not-built:000000000000');
      nothingLeft();
    });
  });

  describe('a healthy env', () => {
    it('deploys on a loopback port, serves the env contract, and is gone after teardown', async () => {
      const h = await sandbox.deploy({ episodeId: 'ep-ok', env: echoSpec(image) });
      expect(h.episodeId).toBe('ep-ok');
      expect(h.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(sandbox.live()).toEqual(['ep-ok']);
      expect(sandbox.networksInUse()).toBe(1);
      expect((await fetch(`${h.baseUrl}/health`)).status).toBe(200);
      expect((await post(h.baseUrl, '/reset', { task_id: 't', data: {} })).status).toBe(200);
      expect((await post(h.baseUrl, '/tools/call', { name: 'echo', arguments: { text: 'hi' } })).json).toMatchObject({ text: 'hi' });
      expect(await sandbox.listEpisodeIds()).toEqual(['ep-ok']);
      const d = await sandbox.diagnose(h);
      expect(d).toMatchObject({ running: true, exitCode: null, oomKilled: false });
      expect(d.logTail).toContain('listening on');
      await sandbox.teardown('ep-ok');
      nothingLeft();
      expect(await answers(`${h.baseUrl}/health`)).toBe(false);
      await expect(sandbox.diagnose(h)).resolves.toEqual({ running: false, exitCode: null, oomKilled: false, logTail: '' });
    });

    it('gives the env its own environment only, with PORT set', async () => {
      const dir = await mkdtemp(path.join(tmpdir(), 'process-sandbox-env-'));
      try {
        await writeFile(
          path.join(dir, 'server.mjs'),
          "import http from 'node:http';\n" +
            'http.createServer((q, s) => s.end(JSON.stringify({ port: process.env.PORT, mine: process.env.MINE ?? null, leaked: process.env.VITEST ?? null }))).listen(Number(process.env.PORT));\n',
        );
        const img = await sandbox.buildImage({ bundleName: 'b', envName: 'env', contextDir: dir, buildArgs: {} });
        const h = await sandbox.deploy({ episodeId: 'ep-env', env: echoSpec(img, { readyPath: '/', environment: { MINE: 'yes' } }) });
        const body = (await (await fetch(h.baseUrl)).json()) as Record<string, unknown>;
        expect(body).toEqual({ port: new URL(h.baseUrl).port, mine: 'yes', leaked: null });
        await sandbox.teardown('ep-env');
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
      nothingLeft();
    });
  });

  it('waits for an env that takes a while to get ready', async () => {
    const t0 = Date.now();
    const h = await sandbox.deploy({ episodeId: 'ep-slow', env: echoSpec(image, { environment: { ECHO_READY_AFTER_MS: '1500' } }) });
    // the env itself answers 503 for its first 1.5 s: the deploy cannot have ended sooner
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1500);
    expect((await fetch(`${h.baseUrl}/health`)).status).toBe(200);
    await sandbox.teardown('ep-slow');
    nothingLeft();
  });

  it('kills an env that never listens once its deploy timeout passes, with deploy_timeout and its log tail', async () => {
    const err = (await rejection(
      sandbox.deploy({ episodeId: 'ep-deaf', env: echoSpec(image, { deployTimeoutMs: 1500, environment: { ECHO_NO_LISTEN: '1' } }) }),
    )) as SandboxError;
    expect(err).toBeInstanceOf(SandboxError);
    expect(err.reason).toBe('deploy_timeout');
    expect(err.message).toContain('env `echo` was not ready within its deploy timeout (1.5 s)');
    expect(err.details.logTail).toContain('ECHO_NO_LISTEN set: not listening');
    nothingLeft();
  });

  it('times out on a ready path that answers 404, saying so', async () => {
    const err = (await rejection(
      sandbox.deploy({ episodeId: 'ep-404', env: echoSpec(image, { deployTimeoutMs: 1500, readyPath: '/ready-nowhere' }) }),
    )) as SandboxError;
    expect(err.reason).toBe('deploy_timeout');
    expect(err.message).toMatch(/\(1\.5 s\).*last got HTTP 404/);
    expect(err.details.logTail).toMatch(/GET \/ready-nowhere -> 404/);
    nothingLeft();
  });

  it('reports an env that exits during deploy as env_crashed, with its exit code and log, before the deadline', async () => {
    const err = (await rejection(
      sandbox.deploy({ episodeId: 'ep-crash', env: echoSpec(image, { deployTimeoutMs: 60_000, environment: { ECHO_EXIT_AT_START: '7' } }) }),
    )) as SandboxError;
    expect(err.reason).toBe('env_crashed');
    expect(err.details.exitCode).toBe(7);
    expect(err.message).toContain('exited with code 7');
    expect(err.details.logTail).toContain('ECHO_EXIT_AT_START set: exiting with code 7');
    nothingLeft();
  });

  it('reports an env over its memory limit as env_oom (exit 137), as a container limit would', async () => {
    const err = (await rejection(sandbox.deploy({ episodeId: 'ep-oom', env: echoSpec(image, { environment: { ECHO_ALLOCATE_MB: '400' } }) }))) as SandboxError;
    expect(err.reason).toBe('env_oom');
    expect(err.details.exitCode).toBe(137);
    expect(err.message).toContain('128 MB');
    expect(err.details.logTail).toMatch(/over the 128 MB limit: killed/);
    nothingLeft();
  });

  it('reports V8 heap exhaustion under the heap limit as env_oom too', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'process-sandbox-heap-'));
    try {
      // objects on the V8 heap: --max-old-space-size stops this one before the watchdog does
      await writeFile(path.join(dir, 'server.mjs'), 'const keep = [];\nfor (;;) keep.push({ n: keep.length, s: `x${keep.length}` });\n');
      const img = await sandbox.buildImage({ bundleName: 'b', envName: 'heap', contextDir: dir, buildArgs: {} });
      const err = (await rejection(
        sandbox.deploy({ episodeId: 'ep-heap', env: echoSpec(img, { resources: { memoryMb: 64, cpus: 1, pids: 64 } }) }),
      )) as SandboxError;
      expect(err.reason).toBe('env_oom');
      expect(err.message).toContain('64 MB');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    nothingLeft();
  });

  it('diagnoses an env that crashed after deploy: not running, exit code, last log lines', async () => {
    const h = await sandbox.deploy({ episodeId: 'ep-diag', env: echoSpec(image) });
    await post(h.baseUrl, '/reset', { task_id: 'fx-echo-0', data: {} });
    await expect(post(h.baseUrl, '/tools/call', { name: 'crash', arguments: { code: 5 } })).rejects.toThrow();
    await waitFor(async () => !(await sandbox.diagnose(h)).running, 10_000, 'the crash seen');
    const d = await sandbox.diagnose(h);
    expect(d).toMatchObject({ running: false, exitCode: 5, oomKilled: false });
    expect(d.logTail).toMatch(/crash requested: exiting with code 5$/);
    // an exited env still counts as held (like a stopped container) until its teardown
    expect(sandbox.live()).toEqual([]);
    expect(sandbox.held()).toEqual(['ep-diag']);
    await sandbox.teardown('ep-diag');
    nothingLeft();
  });

  it('diagnoses an env killed for memory after deploy as oomKilled', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'process-sandbox-grow-'));
    try {
      await writeFile(
        path.join(dir, 'server.mjs'),
        "import http from 'node:http';\nconst hold = [];\n" +
          "http.createServer((q, s) => { if (q.url === '/grow') { for (let i = 0; i < 300; i++) hold.push(Buffer.alloc(1 << 20, 1)); } s.end('ok'); }).listen(Number(process.env.PORT));\n",
      );
      const img = await sandbox.buildImage({ bundleName: 'b', envName: 'grow', contextDir: dir, buildArgs: {} });
      const h = await sandbox.deploy({ episodeId: 'ep-grow', env: echoSpec(img, { readyPath: '/' }) });
      await fetch(`${h.baseUrl}/grow`).catch(() => null);
      await waitFor(async () => !(await sandbox.diagnose(h)).running, 10_000, 'the env killed');
      expect(await sandbox.diagnose(h)).toMatchObject({ running: false, exitCode: 137, oomKilled: true });
      await sandbox.teardown('ep-grow');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    nothingLeft();
  });

  it("one env's crash leaves another running beside it untouched", async () => {
    const [a, b] = await Promise.all(['ep-a', 'ep-b'].map((id) => sandbox.deploy({ episodeId: id, env: echoSpec(image) })));
    await post(a!.baseUrl, '/reset', { data: {} });
    await post(b!.baseUrl, '/reset', { data: {} });
    await post(a!.baseUrl, '/tools/call', { name: 'crash', arguments: {} }).catch(() => null);
    await waitFor(async () => !(await sandbox.diagnose(a!)).running, 10_000, 'a exited');
    expect((await post(b!.baseUrl, '/tools/call', { name: 'echo', arguments: { text: 'still here' } })).json.text).toBe('still here');
    expect(sandbox.live()).toEqual(['ep-b']);
    await Promise.all([sandbox.teardown('ep-a'), sandbox.teardown('ep-b')]);
    nothingLeft();
  });

  describe('abort', () => {
    it('rejects at once, starting nothing, when the signal is already aborted', async () => {
      const before = sandbox.spawned;
      const err = await rejection(sandbox.deploy({ episodeId: 'ep-abort0', env: echoSpec(image), signal: AbortSignal.abort() }));
      expect(err.name).toBe('AbortError');
      expect(sandbox.spawned).toBe(before);
      nothingLeft();
    });

    it('stops a deploy waiting for readiness and kills what it started', async () => {
      const ac = new AbortController();
      const p = rejection(
        sandbox.deploy({ episodeId: 'ep-abort1', env: echoSpec(image, { environment: { ECHO_READY_AFTER_MS: '60000' } }), signal: ac.signal }),
      );
      await waitFor(() => sandbox.live().includes('ep-abort1'), 10_000, 'the env process started');
      ac.abort();
      const err = await p;
      expect(err.name).toBe('AbortError');
      nothingLeft();
    });

    it('leaves nothing whatever step the abort lands in', async () => {
      const outcomes = await Promise.all(
        [0, 2, 5, 10, 20, 40, 80, 150, 250, 400].map(async (delay, i) => {
          const ac = new AbortController();
          const p = sandbox.deploy({ episodeId: `ep-abort-at-${i}`, env: echoSpec(image), signal: ac.signal });
          setTimeout(() => ac.abort(), delay);
          try {
            await p;
            await sandbox.teardown(`ep-abort-at-${i}`);
            return 'ready first';
          } catch (err) {
            expect((err as Error).name).toBe('AbortError');
            return 'aborted';
          }
        }),
      );
      expect(outcomes).toContain('aborted');
      nothingLeft();
    });

    it('is what a teardown during the deploy does', async () => {
      const p = rejection(sandbox.deploy({ episodeId: 'ep-torn', env: echoSpec(image, { environment: { ECHO_READY_AFTER_MS: '60000' } }) }));
      await waitFor(() => sandbox.live().includes('ep-torn'), 10_000, 'the env process started');
      await sandbox.teardown('ep-torn');
      expect((await p).name).toBe('AbortError');
      nothingLeft();
    });
  });

  describe('teardown', () => {
    it('is idempotent and shares one kill between concurrent calls', async () => {
      await sandbox.deploy({ episodeId: 'ep-td', env: echoSpec(image) });
      const a = sandbox.teardown('ep-td');
      const b = sandbox.teardown('ep-td');
      expect(b).toBe(a);
      await Promise.all([a, b, sandbox.teardown('ep-td')]);
      await sandbox.teardown('ep-td');
      await sandbox.teardown('never-deployed');
      nothingLeft();
    });

    it('lets the episode id be deployed again afterwards, and not before', async () => {
      await sandbox.deploy({ episodeId: 'ep-again', env: echoSpec(image) });
      await expect(sandbox.deploy({ episodeId: 'ep-again', env: echoSpec(image) })).rejects.toThrow(/already has an env/);
      await sandbox.teardown('ep-again');
      const h = await sandbox.deploy({ episodeId: 'ep-again', env: echoSpec(image) });
      expect((await fetch(`${h.baseUrl}/health`)).status).toBe(200);
      await sandbox.teardown('ep-again');
      nothingLeft();
    });
  });

  it('sweep kills everything it holds and says what; listEpisodeIds follows', async () => {
    const hs = await Promise.all(['ep-s1', 'ep-s2'].map((id) => sandbox.deploy({ episodeId: id, env: echoSpec(image) })));
    expect((await sandbox.listEpisodeIds()).sort()).toEqual(['ep-s1', 'ep-s2']);
    expect(sandbox.peak).toBeGreaterThanOrEqual(2);
    const swept = await sandbox.sweep();
    expect(swept.containers.sort()).toEqual(hs.map((h) => h.containerId).sort());
    expect(swept.networks.sort()).toEqual(hs.map((h) => h.networkId).sort());
    expect(await sandbox.listEpisodeIds()).toEqual([]);
    for (const h of hs) expect(await answers(`${h.baseUrl}/health`)).toBe(false);
    expect(await sandbox.sweep()).toEqual({ containers: [], networks: [] });
    nothingLeft();
  });

  it('close() stops the deploys in flight and kills every process; later calls are refused', async () => {
    const closing = new ProcessSandbox();
    const img = await closing.buildImage({ bundleName: 'fixture-v1', envName: 'echo', contextDir: ECHO_CONTEXT, buildArgs: {} });
    const h = await closing.deploy({ episodeId: 'ep-kept', env: echoSpec(img) });
    const p = rejection(closing.deploy({ episodeId: 'ep-close', env: echoSpec(img, { environment: { ECHO_READY_AFTER_MS: '60000' } }) }));
    await waitFor(() => closing.live().includes('ep-close'), 10_000, 'the env process started');
    await closing.close();
    expect((await p).name).toBe('AbortError');
    expect(closing.held()).toEqual([]);
    expect(await answers(`${h.baseUrl}/health`)).toBe(false);
    await expect(closing.ping()).rejects.toThrow(/closed/);
    await expect(closing.deploy({ episodeId: 'ep-late', env: echoSpec(img) })).rejects.toMatchObject({ reason: 'engine_error' });
  });
});
