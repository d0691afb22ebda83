/**
 * Issue 26, no cross-site door: a browser page of another site reaches nothing, whether it opens
 * `/ws`, posts to `/episodes` (with a token or without), or rebinds its own name to 127.0.0.1 and
 * reads `/console/overview`; refusals are 403s saying what to allow, logged once per peer; clients
 * that are not browsers (no Origin) and the server's own page are unaffected. Process-backed.
 */
import { request } from 'node:http';
import { describe, expect, it } from 'vitest';
import { OptionsSchema } from '../../src/config.js';
import { hostAllowed, originAllowed } from '../../src/plugins/site-guard.js';
import { WsClient } from '../../scripts/lib/ws-client.js';
import { processSuiteServer } from '../support/process-server.js';

const TOKEN = 'cross-site-test-token-71c3e0';
const EVIL = 'http://evil.example';

/** one request with the headers as given (fetch would not let a test set Host) */
function raw(url: string, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<{ status: number; body: any }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: u.hostname, port: u.port, method, path, headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (text += d));
        res.on('end', () => {
          let json: any = text;
          try {
            json = JSON.parse(text);
          } catch {
            /* text */
          }
          resolve({ status: res.statusCode!, body: json });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const reset = JSON.stringify({ task_id: 'fx-echo-0' });

describe('the checks themselves', () => {
  it('Host: loopback names and IP addresses always, listed names (and .suffix names), * for any; nothing else', () => {
    for (const h of ['127.0.0.1:8200', 'localhost:8200', 'LOCALHOST', 'app.localhost:5173', '[::1]:8200', '10.0.0.7:8200', '[fe80::1]', 'localhost.']) {
      expect(hostAllowed(h, []), h).toBe(true);
    }
    for (const h of ['evil.example', 'evil.example:8200', 'localhost.evil.example', 'x', '127.0.0.1.evil.example', '', 'a b', 'user@127.0.0.1']) {
      expect(hostAllowed(h, []), h).toBe(false);
    }
    expect(hostAllowed('envs.example.com:8443', ['envs.example.com'])).toBe(true);
    expect(hostAllowed('ENVS.example.com.', ['envs.example.com'])).toBe(true);
    expect(hostAllowed('other.example.com', ['envs.example.com'])).toBe(false);
    expect(hostAllowed('a.example.com', ['.example.com'])).toBe(true);
    expect(hostAllowed('example.com', ['.example.com'])).toBe(true);
    expect(hostAllowed('badexample.com', ['.example.com'])).toBe(false);
    expect(hostAllowed('anything', ['*'])).toBe(true);
    expect(hostAllowed(undefined, [])).toBe(true);
  });

  it('Origin: none, loopback pages, the page of the host the request was sent to (any scheme, default ports), listed ones, * for any', () => {
    expect(originAllowed(undefined, 'evil.example', [])).toBe(true);
    expect(originAllowed('http://localhost:5173', '127.0.0.1:8200', [])).toBe(true);
    expect(originAllowed('http://[::1]:3000', '127.0.0.1:8200', [])).toBe(true);
    expect(originAllowed('https://envs.example.com', 'envs.example.com', [])).toBe(true);
    expect(originAllowed('https://envs.example.com', 'envs.example.com:443', [])).toBe(true);
    expect(originAllowed('https://envs.example.com:8443', 'envs.example.com:8443', [])).toBe(true);
    expect(originAllowed('https://envs.example.com', 'envs.example.com:8443', [])).toBe(false);
    expect(originAllowed(EVIL, '127.0.0.1:8200', [])).toBe(false);
    expect(originAllowed('null', '127.0.0.1:8200', [])).toBe(false);
    expect(originAllowed('http://localhost.evil.example', '127.0.0.1:8200', [])).toBe(false);
    expect(originAllowed('https://agents.example.com', '127.0.0.1:8200', ['https://agents.example.com'])).toBe(true);
    expect(originAllowed(EVIL, '127.0.0.1:8200', ['*'])).toBe(true);
  });

  it('one option family: --allowed-hosts and --allowed-origins, comma-separated, checked at start', () => {
    const o = OptionsSchema.parse({ allowedHosts: 'Envs.Example.com, .lab.internal', allowedOrigins: 'https://Console.example.com:443,http://x.test:8080' });
    expect(o.allowedHosts).toEqual(['envs.example.com', '.lab.internal']);
    expect(o.allowedOrigins).toEqual(['https://console.example.com', 'http://x.test:8080']);
    expect(OptionsSchema.safeParse({ allowedHosts: 'http://envs.example.com' }).success).toBe(false);
    expect(OptionsSchema.safeParse({ allowedOrigins: 'envs.example.com' }).success).toBe(false);
    expect(OptionsSchema.parse({}).allowedHosts).toEqual([]);
  });
});

describe('an open server (no token, the documented default on 127.0.0.1)', () => {
  const s = processSuiteServer({ maxConcurrentEnvs: 2 });

  it('a cross-origin WebSocket upgrade gets 403 and deploys nothing; a loopback page and a client without Origin play', async () => {
    await expect(WsClient.open(s.url, undefined, { headers: { origin: EVIL } })).rejects.toMatchObject({ statusCode: 403 });
    expect(s.sandbox.spawned).toBe(0);
    for (const headers of [{}, { origin: 'http://localhost:5173' }] as Record<string, string>[]) {
      const c = await WsClient.open(s.url, undefined, { headers });
      try {
        expect((await c.reset({ task_id: 'fx-echo-0' })).type).toBe('observation');
      } finally {
        await c.close();
      }
    }
  });

  it('a rebinding Host reads nothing: /console/overview, /ws, /health and the page get 403 naming --allowed-hosts', async () => {
    for (const path of ['/console/overview', '/health', '/web/', '/bundle']) {
      const r = await raw(s.url, 'GET', path, { host: `evil.example:${new URL(s.url).port}` });
      expect(r.status, path).toBe(403);
      expect(r.body, path).toMatchObject({ error: 'forbidden_host' });
      expect(r.body.message).toContain('--allowed-hosts');
    }
    await expect(WsClient.open(s.url, undefined, { headers: { host: 'evil.example' } })).rejects.toMatchObject({ statusCode: 403 });
    expect((await raw(s.url, 'GET', '/console/overview', { host: `localhost:${new URL(s.url).port}` })).status).toBe(200);
  });

  it('a cross-origin POST /episodes deploys nothing; the same POST without Origin starts an episode', async () => {
    const before = s.sandbox.spawned;
    const refused = await raw(s.url, 'POST', '/episodes', { origin: EVIL }, reset);
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ error: 'forbidden_origin' });
    expect(refused.body.message).toContain('--allowed-origins');
    expect(s.sandbox.spawned).toBe(before);
    const started = await raw(s.url, 'POST', '/episodes', {}, reset);
    expect(started.status).toBe(201);
    expect((await raw(s.url, 'DELETE', `/episodes/${started.body.episode_id}`)).status).toBeLessThan(300);
  });

  it('/mcp answers its refusal as JSON-RPC, as the MCP spec asks', async () => {
    const r = await raw(s.url, 'POST', '/mcp', { origin: EVIL }, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }));
    expect(r.status).toBe(403);
    expect(r.body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600 } });
  });

  it('refusals are logged once per peer and check, and each request line names its refusal', async () => {
    for (let i = 0; i < 5; i++) await raw(s.url, 'GET', '/console/overview', { origin: 'http://once.example' });
    const lines = s
      .logs()
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    const warned = lines.filter((l) => l.event === 'forbidden_origin');
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ level: 40, peer: '127.0.0.1' });
    expect(lines.filter((l) => l.event === 'forbidden_host')).toHaveLength(1);
    expect(lines.filter((l) => l.req?.url === '/console/overview' && l.status === 403 && l.error === 'forbidden_origin')).toHaveLength(5);
  });
});

describe('a server with a token, behind a proxy whose public name is allowed', () => {
  const s = processSuiteServer({ maxConcurrentEnvs: 1, token: TOKEN, allowedHosts: 'envs.example.com', allowedOrigins: 'https://agents.example.com' });
  const auth = { authorization: `Bearer ${TOKEN}` };

  it('a cross-origin POST with the token is refused too (a token does not make a foreign page welcome)', async () => {
    const r = await raw(s.url, 'POST', '/episodes', { ...auth, origin: EVIL }, reset);
    expect(r.status).toBe(403);
    expect(s.sandbox.spawned).toBe(0);
    // without the token: the same 403, before auth is asked
    expect((await raw(s.url, 'POST', '/episodes', { origin: EVIL }, reset)).status).toBe(403);
  });

  it("the server's own page through the proxy (Origin of the public name), and listed origins, pass; an unlisted name does not", async () => {
    const viaProxy = { host: 'envs.example.com:8443', origin: 'https://envs.example.com:8443' };
    expect((await raw(s.url, 'GET', '/console/overview', { ...auth, ...viaProxy })).status).toBe(200);
    const c = await WsClient.open(s.url, TOKEN, { headers: viaProxy });
    await c.close();
    expect((await raw(s.url, 'GET', '/console/overview', { ...auth, origin: 'https://agents.example.com' })).status).toBe(200);
    expect((await raw(s.url, 'GET', '/console/overview', { ...auth, host: 'other.example.com' })).status).toBe(403);
    // the page of the allowed name on another port is another origin
    expect((await raw(s.url, 'GET', '/console/overview', { ...auth, host: 'envs.example.com:8443', origin: 'https://envs.example.com:9999' })).status).toBe(
      403,
    );
  });

  it("a listed origin's page may read the answers (CORS), its preflight answered before auth; the server's own and loopback pages get no CORS headers", async () => {
    const preflight = await fetch(`${s.url}/episodes`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://agents.example.com',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('https://agents.example.com');
    expect(preflight.headers.get('access-control-allow-methods')).toContain('POST');
    expect(preflight.headers.get('access-control-allow-headers')).toContain('authorization');
    const read = await fetch(`${s.url}/bundle`, { headers: { ...auth, origin: 'https://agents.example.com' } });
    expect(read.status).toBe(200);
    expect(read.headers.get('access-control-allow-origin')).toBe('https://agents.example.com');
    expect(read.headers.get('access-control-expose-headers')).toContain('mcp-session-id');
    for (const origin of ['http://localhost:5173', `http://127.0.0.1:${new URL(s.url).port}`]) {
      const r = await fetch(`${s.url}/bundle`, { headers: { ...auth, origin } });
      expect(r.status, origin).toBe(200);
      expect(r.headers.get('access-control-allow-origin'), origin).toBeNull();
    }
    // a foreign page's preflight is refused like its request
    expect((await fetch(`${s.url}/episodes`, { method: 'OPTIONS', headers: { origin: EVIL, 'access-control-request-method': 'POST' } })).status).toBe(403);
  });

  it('a client with no Origin is unaffected: 401 without the token, 200 with it', async () => {
    expect((await raw(s.url, 'GET', '/bundle')).status).toBe(401);
    expect((await raw(s.url, 'GET', '/bundle', auth)).status).toBe(200);
  });
});
