/**
 * An env image that cannot be built (a bad Dockerfile in a copy of the fixture bundle; a base image
 * no registry serves): the server says which env and why; the env's resets fail with the build's
 * error (image_unavailable); the fixture's only env failed, so /health is 503 naming it (a bundle
 * with others keeps serving them: test/server/images-background.docker.test.ts), and a pull
 * failure names the build argument to pass.
 * Lack of disk space cannot be simulated safely on a shared engine: not tested.
 */
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../../src/app.js';
import { FIXTURE_BUNDLE } from '../../support/app.js';
import { describeDocker, labelledResources, TEST_BUILD_ARGS, uniqueInstance } from '../../support/docker.js';
import { captureLog } from '../../support/log-capture.js';
import { waitFor } from '../../../scripts/lib/wait.js';
import { WsClient } from '../../../scripts/lib/ws-client.js';
import { http } from '../../routes/http.js';

const dirs: string[] = [];
function bundleWithDockerfile(dockerfile: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'openenv-badbuild-'));
  dirs.push(dir);
  cpSync(FIXTURE_BUNDLE, dir, { recursive: true });
  writeFileSync(path.join(dir, 'envs/echo/Dockerfile'), dockerfile);
  return dir;
}

async function serveUnready(bundle: string, buildArgs: Record<string, string>) {
  const log = captureLog({ level: 'info' });
  const instance = uniqueInstance('badbuild');
  const app = await buildApp(bundle, { instance, pingInterval: 0, buildArgs, logger: log.logger });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address() as { port: number };
  return { app, url: `http://127.0.0.1:${addr.port}`, instance, logs: log.text };
}

describeDocker('an env image that cannot be built', () => {
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('a bad Dockerfile: /health 503 naming the env and the reason, resets fail with it, nothing left', async () => {
    const bundle = bundleWithDockerfile(
      ['ARG NODE_IMAGE=node:20-slim', 'FROM ${NODE_IMAGE}', 'WORKDIR /app', 'COPY no-such-file.mjs /app/', 'CMD ["node", "server.mjs"]', ''].join('\n'),
    );
    const s = await serveUnready(bundle, TEST_BUILD_ARGS);
    try {
      // the server is up at once; the image fails in the background
      await s.app.openenv.ready;
      await s.app.openenv.catalog.allSettled();
      const health = await http(s.url, 'GET', '/health');
      expect(health.status).toBe(503);
      expect(health.body.reason).toMatch(/no env image could be made \(1 of 1\): env "echo": .*env `echo`.*no-such-file/s);
      expect(health.body.images).toMatchObject({ total: 1, counts: { failed: 1, ready: 0 }, summary: '0 of 1 env images ready (1 failed)' });
      // a reset fails with the build's error
      const c = await WsClient.open(s.url);
      const r = await c.reset({ task_id: 'fx-echo-0' });
      expect(r.type).toBe('error');
      expect(r.data.message).toMatch(/env `echo`.*no-such-file/s);
      await c.close();
      const e = await http(s.url, 'POST', '/episodes', { task_id: 'fx-echo-0' });
      expect(e.status).toBe(502);
      expect(e.body.failure).toMatchObject({ reason: 'image_unavailable', phase: 'deploy', message: expect.stringMatching(/env `echo`.*no-such-file/s) });
      expect(s.logs()).toMatch(/"level":50.*env image \\"echo\\" failed \(1\/1\)/);
    } finally {
      await s.app.close();
    }
    await waitFor(() => s.app.openenv.manager.list().length === 0, 10_000);
    expect(labelledResources(`io.openenv.bundle-server.instance=${s.instance}`)).toEqual({ containers: [], networks: [] });
  });

  it('a base image no registry serves: the message names the build argument to pass', async () => {
    const bundle = bundleWithDockerfile(['ARG NODE_IMAGE=node:20-slim', 'FROM ${NODE_IMAGE}', 'CMD ["node", "server.mjs"]', ''].join('\n'));
    // a registry on a loopback port nothing listens on: the pull fails at once, no traffic leaves
    const s = await serveUnready(bundle, { NODE_IMAGE: '127.0.0.1:9/openenv-no-such/node:20' });
    try {
      await s.app.openenv.ready;
      await s.app.openenv.catalog.allSettled();
      const err = (await Promise.resolve(s.app.openenv.catalog.spec('echo')).catch((e: Error) => e)) as Error;
      expect(err).toBeInstanceOf(Error);
      expect(err.message).toMatch(/env `echo`/);
      expect(err.message).toMatch(/build argument NODE_IMAGE=<image>/);
      expect(err.message).toMatch(/OPENENV_BUILD_ARG=NODE_IMAGE=/);
      const health = await http(s.url, 'GET', '/health');
      expect(health.status).toBe(503);
      expect(health.body.reason).toMatch(/NODE_IMAGE/);
    } finally {
      await s.app.close();
    }
  });
});

describe('pullHint', () => {
  it('is empty for failures that are not pulls', async () => {
    const { pullHint } = await import('../../../src/sandbox/engine/image-build.js');
    expect(pullHint('COPY failed: file not found', 'FROM ${NODE_IMAGE}', {})).toBe('');
    expect(pullHint('pull access denied for nope', 'ARG BASE=x\nFROM ${BASE} AS b\nFROM $OTHER', {})).toMatch(/BASE=<image>, OTHER=<image>/);
    expect(pullHint('dial tcp: lookup registry-1.docker.io: no such host', 'FROM node:20', {})).toMatch(/FROM/);
  });
});
