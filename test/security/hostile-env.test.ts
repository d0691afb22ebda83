/**
 * Issue 26, what a hostile env did to the server: no answer of an env makes the server go
 * elsewhere (a 307 at /reset, /tools/call, /finish or the warm pool's hand-out check is a broken
 * env, and the URL it names is never fetched), and an answer nested thousands of levels deep is
 * the tool's failure, answered on every transport, instead of a frame never sent. Process-backed:
 * the env is test/security/hostile-env.mjs.
 */
import { copyFileSync, cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENV_REPLY_MAX_DEPTH } from '../../src/episodes/env-client.js';
import { WsClient } from '../../scripts/lib/ws-client.js';
import { waitFor } from '../../scripts/lib/wait.js';
import { http as call } from '../routes/http.js';
import { FIXTURE_BUNDLE, startProcessServer, type ProcessServer } from '../support/process-server.js';

/** the fixture bundle with hostile-env.mjs beside its env (run with `entry: 'hostile.mjs'`), and `environment` for every deploy */
function hostileBundle(environment: Record<string, string> = {}): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'openenv-hostile-env-'));
  cpSync(FIXTURE_BUNDLE, dir, { recursive: true });
  copyFileSync(new URL('./hostile-env.mjs', import.meta.url), path.join(dir, 'envs/echo/hostile.mjs'));
  const manifest = JSON.parse(readFileSync(path.join(dir, 'bundle.json'), 'utf8'));
  manifest.envs.echo.environment = environment;
  writeFileSync(path.join(dir, 'bundle.json'), JSON.stringify(manifest));
  return dir;
}

/** what an env's redirect would point at: a service on the host's loopback that must never be asked */
class Canary {
  hits = 0;
  private readonly server = http.createServer((_req, res) => {
    this.hits++;
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"result":"the host\'s secret","scores":{"quality":1},"status":"healthy"}');
  });
  url = '';
  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/admin/secret`;
  }
  close(): Promise<void> {
    return new Promise((r) => this.server.close(() => r()));
  }
}

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('an env that answers with a redirect', () => {
  const canary = new Canary();
  let s: ProcessServer;
  beforeAll(async () => {
    await canary.start();
    const bundle = hostileBundle();
    dirs.push(bundle);
    s = await startProcessServer({ maxConcurrentEnvs: 2 }, { bundle, sandbox: { entry: 'hostile.mjs' } });
  });
  afterAll(async () => {
    await s?.stop();
    await canary.close();
  });

  it('at /reset: the reset fails naming the redirect; its target is never fetched', async () => {
    s.sandbox.overrideNextDeploy({ HOSTILE_REDIRECT: '/reset', HOSTILE_REDIRECT_TO: canary.url });
    const c = await WsClient.open(s.url);
    try {
      const r = await c.reset({ task_id: 'fx-echo-0' });
      expect(r).toMatchObject({ type: 'error', data: { failure: { phase: 'reset' } } });
      expect(r.data.message).toMatch(/redirect \(HTTP 307 .*never follows/);
    } finally {
      await c.close();
    }
    expect(canary.hits).toBe(0);
  });

  it('at /tools/call: the episode ends as the env failed; the model never sees what the target would say', async () => {
    s.sandbox.overrideNextDeploy({ HOSTILE_REDIRECT: '/tools/call', HOSTILE_REDIRECT_TO: canary.url });
    const c = await WsClient.open(s.url);
    try {
      expect((await c.reset({ task_id: 'fx-echo-0' })).type).toBe('observation');
      const r = await c.call('echo', { text: 'x' });
      expect(r.data).toMatchObject({ done: true, observation: { end_reason: 'env_failed', failure: { phase: 'tool' } } });
      expect(JSON.stringify(r)).not.toContain("the host's secret");
      expect(r.data.observation.error.message).toContain('never follows');
    } finally {
      await c.close();
    }
    expect(canary.hits).toBe(0);
  });

  it('at /finish, over POST /episodes: the episode fails, no reward taken from the target', async () => {
    s.sandbox.overrideNextDeploy({ HOSTILE_REDIRECT: '/finish', HOSTILE_REDIRECT_TO: canary.url });
    const started = await call(s.url, 'POST', '/episodes', { task_id: 'fx-echo-0' });
    expect(started.status).toBe(201);
    const id = started.body.episode_id as string;
    const end = await call(s.url, 'POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'end_turn', arguments: {} });
    expect(end.body).toMatchObject({ done: true, reward: null, observation: { end_reason: 'env_failed', failure: { phase: 'finish' } } });
    expect(canary.hits).toBe(0);
  });
});

describe("the warm pool's hand-out check", () => {
  it('a pooled env whose ready path turns into a redirect is discarded, not handed out; the reset gets a fresh env', async () => {
    const canary = new Canary();
    await canary.start();
    // ready at deploy (its first GET /health answers 200), a redirect at the hand-out check
    const bundle = hostileBundle({ HOSTILE_HEALTH_REDIRECT_AFTER: '1', HOSTILE_REDIRECT_TO: canary.url });
    dirs.push(bundle);
    const s = await startProcessServer({ maxConcurrentEnvs: 2, warmPool: 1 }, { bundle, sandbox: { entry: 'hostile.mjs' } });
    try {
      await waitFor(async () => ((await (await fetch(`${s.url}/health`)).json()) as { pool: { ready: number } }).pool.ready === 1, 30_000, 'a pooled env');
      const c = await WsClient.open(s.url);
      try {
        const r = await c.reset({ task_id: 'fx-echo-0' });
        expect(r.type).toBe('observation');
        expect(r.data.observation.pooled ?? false).toBe(false);
      } finally {
        await c.close();
      }
      const metrics = await (await fetch(`${s.url}/metrics`)).text();
      expect(metrics).toMatch(/openenv_pool_discarded_total\{reason="dead"\} 1/);
      expect(canary.hits).toBe(0);
    } finally {
      await s.stop();
      await canary.close();
    }
  });
});

describe('an env answer nested thousands of levels deep', () => {
  let s: ProcessServer;
  beforeAll(async () => {
    const bundle = hostileBundle({ HOSTILE_DEEP: '/tools/call' });
    dirs.push(bundle);
    s = await startProcessServer({ maxConcurrentEnvs: 2 }, { bundle, sandbox: { entry: 'hostile.mjs' } });
  });
  afterAll(() => s?.stop());

  const deepError = expect.objectContaining({ message: expect.stringContaining(`nested deeper than ${ENV_REPLY_MAX_DEPTH} levels`) });

  it('over /ws: a frame comes back (the tool failed) and the episode goes on', async () => {
    const c = await WsClient.open(s.url);
    try {
      await c.reset({ task_id: 'fx-echo-0' });
      const r = await c.call('echo', { text: 'x' });
      expect(r.data).toMatchObject({ done: false, observation: { result: null, error: deepError } });
      const end = await c.call('end_turn', {});
      expect(end.data).toMatchObject({ done: true, reward: 1 });
    } finally {
      await c.close();
    }
  });

  it('over /episodes: 200 with the tool error, not 500', async () => {
    const started = await call(s.url, 'POST', '/episodes', { task_id: 'fx-echo-0' });
    const id = started.body.episode_id as string;
    const r = await call(s.url, 'POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'echo', arguments: { text: 'x' } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ done: false, observation: { error: deepError } });
    await call(s.url, 'DELETE', `/episodes/${id}`);
  });

  it('over /mcp: an isError result, not -32603', async () => {
    const rpc = (id: number, method: string, params: unknown, sid?: string) =>
      call(s.url, 'POST', '/mcp', { jsonrpc: '2.0', id, method, params }, sid ? { 'mcp-session-id': sid } : {});
    const created = await rpc(1, 'openenv/session/create', { task_id: 'fx-echo-0' });
    const sid = created.body.result.session_id as string;
    const r = await call(s.url, 'POST', '/mcp', {
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { session_id: sid, name: 'echo', arguments: { text: 'x' } },
    });
    expect(r.body.error).toBeUndefined();
    expect(JSON.stringify(r.body.result)).toContain(`nested deeper than ${ENV_REPLY_MAX_DEPTH} levels`);
    await call(s.url, 'POST', '/mcp', { jsonrpc: '2.0', id: 3, method: 'openenv/session/close', params: { session_id: sid } });
  });
});
