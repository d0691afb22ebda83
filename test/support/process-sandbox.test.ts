/**
 * What only the ProcessSandbox the fast layer runs on has: image tags from the entry script, the
 * env's own environment, V8 heap limits as OOM, sweep. Readiness, failure reasons, abort and
 * teardown are the Sandbox contract's (test/sandbox/process.contract.test.ts).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxError } from '../../src/sandbox/sandbox.js';
import { echoSpec, post, rejection } from '../sandbox/contract.js';
import { ProcessSandbox } from './process-sandbox.js';
import { waitFor } from '../../scripts/lib/wait.js';

const ECHO_CONTEXT = fileURLToPath(new URL('../fixtures/fixture-v1/envs/echo', import.meta.url));

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
    image = await sandbox.images.build({ bundleName: 'fixture-v1', envName: 'echo', contextDir: ECHO_CONTEXT, buildArgs: {} });
  });
  afterAll(async () => {
    await sandbox.close();
  });

  describe('images', () => {
    it('tags a context by content, stable across calls and sandboxes; build args change the tag', async () => {
      expect(image).toMatch(/^openenv-bundle\/fixture-v1-echo:[0-9a-f]{12}$/);
      const lines: string[] = [];
      const again = await new ProcessSandbox().images.build({
        bundleName: 'fixture-v1',
        envName: 'echo',
        contextDir: ECHO_CONTEXT,
        buildArgs: {},
        onProgress: (l) => lines.push(l),
      });
      expect(again).toBe(image);
      expect(lines.join('\n')).toContain('server.mjs');
      const withArg = await sandbox.images.build({ bundleName: 'fixture-v1', envName: 'echo', contextDir: ECHO_CONTEXT, buildArgs: { NODE_IMAGE: 'x' } });
      expect(withArg).not.toBe(image);
      await expect(sandbox.images.check(image)).resolves.toBeUndefined();
    });

    it('refuses a context without the entry script, and an image it did not build, as image_unavailable', async () => {
      const empty = await mkdtemp(path.join(tmpdir(), 'process-sandbox-'));
      try {
        await expect(sandbox.images.build({ bundleName: 'b', envName: 'e', contextDir: empty, buildArgs: {} })).rejects.toMatchObject({
          reason: 'image_unavailable',
        });
      } finally {
        await rm(empty, { recursive: true, force: true });
      }
      await expect(sandbox.images.check('ghcr.io/someone/env:1')).rejects.toMatchObject({ name: 'SandboxError', reason: 'image_unavailable' });
      const err = (await rejection(sandbox.deploy({ envId: 'ep-noimage', env: echoSpec('openenv-bundle/not-built:000000000000') }))) as SandboxError;
      expect(err.reason).toBe('image_unavailable');
      expect(err.message).toContain('openenv-bundle/not-built:000000000000');
      nothingLeft();
    });
  });

  describe('a healthy env', () => {
    it('deploys on a loopback port, serves the env contract, and is gone after teardown', async () => {
      const h = await sandbox.deploy({ envId: 'ep-ok', env: echoSpec(image) });
      expect(h.envId).toBe('ep-ok');
      expect(h.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(sandbox.live()).toEqual(['ep-ok']);
      expect(sandbox.networksInUse()).toBe(1);
      expect((await fetch(`${h.baseUrl}/health`)).status).toBe(200);
      expect((await post(h.baseUrl, '/reset', { task_id: 't', data: {} })).status).toBe(200);
      expect((await post(h.baseUrl, '/tools/call', { name: 'echo', arguments: { text: 'hi' } })).json).toMatchObject({ text: 'hi' });
      expect(await sandbox.listEnvIds()).toEqual(['ep-ok']);
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
        const img = await sandbox.images.build({ bundleName: 'b', envName: 'env', contextDir: dir, buildArgs: {} });
        const h = await sandbox.deploy({ envId: 'ep-env', env: echoSpec(img, { readyPath: '/', environment: { MINE: 'yes' } }) });
        const body = (await (await fetch(h.baseUrl)).json()) as Record<string, unknown>;
        expect(body).toEqual({ port: new URL(h.baseUrl).port, mine: 'yes', leaked: null });
        await sandbox.teardown('ep-env');
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
      nothingLeft();
    });
  });

  it('reports V8 heap exhaustion under the heap limit as env_oom too', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'process-sandbox-heap-'));
    try {
      // objects on the V8 heap: --max-old-space-size stops this one before the watchdog does
      await writeFile(path.join(dir, 'server.mjs'), 'const keep = [];\nfor (;;) keep.push({ n: keep.length, s: `x${keep.length}` });\n');
      const img = await sandbox.images.build({ bundleName: 'b', envName: 'heap', contextDir: dir, buildArgs: {} });
      const err = (await rejection(
        sandbox.deploy({ envId: 'ep-heap', env: echoSpec(img, { resources: { memoryMb: 64, cpus: 1, pids: 64 } }) }),
      )) as SandboxError;
      expect(err.reason).toBe('env_oom');
      expect(err.message).toContain('64 MB');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
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
      const img = await sandbox.images.build({ bundleName: 'b', envName: 'grow', contextDir: dir, buildArgs: {} });
      const h = await sandbox.deploy({ envId: 'ep-grow', env: echoSpec(img, { readyPath: '/' }) });
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
    const [a, b] = await Promise.all(['ep-a', 'ep-b'].map((id) => sandbox.deploy({ envId: id, env: echoSpec(image) })));
    await post(a!.baseUrl, '/reset', { data: {} });
    await post(b!.baseUrl, '/reset', { data: {} });
    await post(a!.baseUrl, '/tools/call', { name: 'crash', arguments: {} }).catch(() => null);
    await waitFor(async () => !(await sandbox.diagnose(a!)).running, 10_000, 'a exited');
    expect((await post(b!.baseUrl, '/tools/call', { name: 'echo', arguments: { text: 'still here' } })).json.text).toBe('still here');
    expect(sandbox.live()).toEqual(['ep-b']);
    await Promise.all([sandbox.teardown('ep-a'), sandbox.teardown('ep-b')]);
    nothingLeft();
  });

  it('sweep kills everything it holds and says what; listEnvIds follows', async () => {
    const hs = await Promise.all(['ep-s1', 'ep-s2'].map((id) => sandbox.deploy({ envId: id, env: echoSpec(image) })));
    expect((await sandbox.listEnvIds()).sort()).toEqual(['ep-s1', 'ep-s2']);
    // no test of this file holds more than two envs at once
    expect(sandbox.peak).toBe(2);
    const swept = await sandbox.sweep();
    expect(swept.containers.sort()).toEqual(hs.map((h) => h.containerId).sort());
    expect(swept.networks.sort()).toEqual(hs.map((h) => h.networkId).sort());
    expect(await sandbox.listEnvIds()).toEqual([]);
    for (const h of hs) expect(await answers(`${h.baseUrl}/health`)).toBe(false);
    expect(await sandbox.sweep()).toEqual({ containers: [], networks: [] });
    nothingLeft();
  });
});

describe('listensOn (which process holds a port: an answer on a probed port may be another process)', () => {
  it("tells this process's listener from a child's", async () => {
    const { createServer } = await import('node:http');
    const { spawn } = await import('node:child_process');
    const { listensOn } = await import('./process-sandbox.js');
    const srv = createServer((_q, r) => r.end('ok'));
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as { port: number }).port;
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)'], { stdio: 'ignore' });
    try {
      expect(listensOn(process.pid, port)).toBe(true);
      expect(listensOn(child.pid, port)).toBe(false);
    } finally {
      child.kill('SIGKILL');
      await new Promise<void>((r) => srv.close(() => r()));
    }
    expect(listensOn(process.pid, port)).toBe(false);
  });
});
