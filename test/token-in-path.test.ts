/** --token-in-path: stock clients (no headers) carry the token in their base URL, and it never reaches a log. */
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pathTokenRewriter, PATH_TOKEN } from '../src/plugins/auth.js';
import { logRedaction } from '../src/logging.js';
import { captureLog } from './support/log-capture.js';
import { startProcessServer, type ProcessServer } from './support/process-server.js';
import { waitFor } from '../scripts/lib/wait.js';
import { WsClient } from '../scripts/lib/ws-client.js';
import { http } from './routes/http.js';
import { validateRunningEnvironment } from './routes/openenv-validate.js';

const TOKEN = `tok${randomBytes(16).toString('hex')}`;

function rewrite(url: string, token = TOKEN): { url: string; said: unknown } {
  const req = { url } as { url: string; [PATH_TOKEN]?: string };
  const out = pathTokenRewriter(token)(req as never);
  return { url: out, said: req[PATH_TOKEN] };
}

describe('pathTokenRewriter', () => {
  it('strips a right prefix, marks a wrong one, leaves other paths alone', () => {
    expect(rewrite(`/t/${TOKEN}/ws`)).toEqual({ url: '/ws', said: 'ok' });
    expect(rewrite(`/t/${TOKEN}/tasks?split=eval&limit=5`)).toEqual({ url: '/tasks?split=eval&limit=5', said: 'ok' });
    expect(rewrite(`/t/${TOKEN}`)).toEqual({ url: '/', said: 'ok' });
    expect(rewrite(`/t/${TOKEN}?x=1`)).toEqual({ url: '/?x=1', said: 'ok' });
    expect(rewrite('/t/wrong/ws')).toEqual({ url: '/ws', said: 'bad' });
    expect(rewrite(`/t/${TOKEN}x/ws`)).toEqual({ url: '/ws', said: 'bad' });
    expect(rewrite('/t//ws')).toEqual({ url: '/ws', said: 'bad' });
    expect(rewrite('/tasks')).toEqual({ url: '/tasks', said: undefined });
    expect(rewrite(`/ws/t/${TOKEN}`)).toEqual({ url: `/ws/t/${TOKEN}`, said: undefined });
    // a token with reserved characters travels percent-encoded
    expect(rewrite('/t/a%2Fb%20c/health', 'a/b c')).toEqual({ url: '/health', said: 'ok' });
    expect(rewrite('/t/%E0%A4%A/health', 'x')).toEqual({ url: '/health', said: 'bad' });
  });
});

describe('--token-in-path', () => {
  let s: ProcessServer;
  // trace: every line fastify and the server can write, redacted as serve.ts configures it
  const log = captureLog({ level: 'trace', redact: logRedaction });
  beforeAll(async () => {
    s = await startProcessServer({ token: TOKEN, tokenInPath: true, maxConcurrentEnvs: 2, logger: log.logger });
  });
  afterAll(async () => {
    // fails if an env process outlived the app
    await s?.stop();
    // nothing of the whole run, start to teardown, carries the token
    expect(log.text().length).toBeGreaterThan(1000);
    expect(log.text()).not.toContain(TOKEN);
  });

  it('a /ws session works through the prefix, with no header at all', async () => {
    const c = await WsClient.open(`${s.url}/t/${TOKEN}`);
    const r = await c.reset({ task_id: 'fx-echo-0' });
    expect(r.type).toBe('observation');
    const echo = await c.call('echo', { text: 'through the path' });
    expect(echo.data.observation.result.data).toEqual({ text: 'through the path' });
    const end = await c.call('end_turn', {});
    expect(end.data).toMatchObject({ done: true, reward: 0.5 });
    await c.close();
    // the bearer header still works beside it
    const b = await WsClient.open(s.url, TOKEN);
    expect((await b.state()).data.phase).toBe('idle');
    await b.close();
  });

  it('a wrong prefix gets 401, on HTTP, /health and the WebSocket upgrade alike; no prefix and no header too', async () => {
    for (const path of ['/t/wrong/bundle', '/t/wrong/health', `/t/${TOKEN}x/bundle`, '/t//bundle', '/bundle']) {
      const r = await http(s.url, 'GET', path);
      expect(r.status, path).toBe(401);
      expect(r.headers.get('www-authenticate')).toBe('Bearer');
      expect(r.body.error).toBe('unauthorized');
      expect(JSON.stringify(r.body)).not.toContain(TOKEN);
    }
    // /mcp answers HTTP 200 to everything but auth
    for (const base of [s.url, `${s.url}/t/wrong`]) {
      const mcp = await http(base, 'POST', '/mcp', { jsonrpc: '2.0', id: 1, method: 'tools/list' });
      expect(mcp.status).toBe(401);
      expect(mcp.body.error).toBe('unauthorized');
    }
    await expect(WsClient.open(`${s.url}/t/wrong`)).rejects.toMatchObject({ statusCode: 401 });
    await expect(WsClient.open(s.url)).rejects.toMatchObject({ statusCode: 401 });
    expect(s.app.openenv.sessions.socketCount).toBe(0);
  });

  it('every HTTP route answers through the prefix: /episodes, /mcp, /tasks with a query, 404s without the token', async () => {
    const base = `${s.url}/t/${TOKEN}`;
    expect((await http(base, 'GET', '/health')).status).toBe(200);
    const page = await http(base, 'GET', '/tasks?split=eval&limit=1');
    expect(page.body).toMatchObject({ split: 'eval', total: 2, offset: 0 });
    expect(page.body.tasks).toHaveLength(1);
    const created = await http(base, 'POST', '/episodes', { task_id: 'fx-echo-1' });
    expect(created.status).toBe(201);
    const step = await http(base, 'POST', `/episodes/${created.body.episode_id}/step`, { type: 'list_tools' });
    expect(step.status).toBe(200);
    expect((await http(base, 'DELETE', `/episodes/${created.body.episode_id}`)).status).toBe(204);
    const mcp = await http(base, 'POST', '/mcp', { jsonrpc: '2.0', id: 1, method: 'tools/list' });
    expect(mcp.body.result.tools).toHaveLength(6);
    const missing = await http(base, 'GET', '/no/such/route');
    expect(missing.status).toBe(404);
    expect(missing.body.message).toBe('no route GET /no/such/route');
  });

  it('`openenv validate --url <base with the token>` passes (the validator sends no headers)', async () => {
    const report = await validateRunningEnvironment(`${s.url}/t/${TOKEN}`);
    expect(report.criteria.filter((c) => !c.passed)).toEqual([]);
    expect(report.mode).toBe('production');
  });

  it('a malformed request through the prefix is logged (trace) without the token', async () => {
    const before = log.text().length;
    await new Promise<void>((resolve, reject) => {
      const port = Number(new URL(s.url).port);
      const sock = connect(port, '127.0.0.1', () => sock.write(`GET /t/${TOKEN}/bundle HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n`));
      sock.on('data', () => sock.end());
      sock.on('close', () => resolve());
      sock.on('error', reject);
    });
    // logged as the server drops the connection, which may be just after the client saw it close
    await waitFor(() => log.text().slice(before).includes('client error'), 10_000, 'the client error logged');
    const added = log.text().slice(before);
    expect(added).toContain('client error');
    expect(added).not.toContain(TOKEN);
    // fastify log.text() the request's raw bytes with it: a Buffer would spell the token as numbers
    expect(added).toContain('"rawPacket":"[redacted]"');
  });

  it('requests through the prefix are logged with the stripped path', () => {
    expect(log.text()).toContain('"url":"/tasks?split=eval&limit=1"');
    expect(log.text()).toContain('"url":"/ws"');
  });
});

describe('--token-in-path is off by default', () => {
  let s: ProcessServer;
  beforeAll(async () => {
    s = await startProcessServer({ token: TOKEN });
  });
  afterAll(async () => {
    await s?.stop();
  });

  it('the right token in the path is refused; the header is needed', async () => {
    expect((await http(s.url, 'GET', `/t/${TOKEN}/bundle`)).status).toBe(401);
    await expect(WsClient.open(`${s.url}/t/${TOKEN}`)).rejects.toMatchObject({ statusCode: 401 });
    expect((await http(s.url, 'GET', '/bundle', undefined, { authorization: `Bearer ${TOKEN}` })).status).toBe(200);
  });
});
