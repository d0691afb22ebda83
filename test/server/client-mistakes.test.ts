/**
 * A client's mistake is answered in the documented shape, with its exact status, and is not the
 * server's fault: no log line at error (level 50 or more), client errors at info or warn without
 * a stack. Bad bodies and frames, a 10 kB path parameter, JSON-RPC notifications, a
 * percent-encoded token.
 */
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { captureLog, type CapturedLog } from '../support/log-capture.js';
import { MAX_FRAME_BYTES } from '../../src/defaults.js';
import { loggerHygiene } from '../../src/logging.js';
import { startProcessServer, type ProcessServer } from '../support/process-server.js';
import { waitFor } from '../../scripts/lib/wait.js';
import { WsClient } from '../../scripts/lib/ws-client.js';
import { http } from '../routes/http.js';

const TOKEN = 'tok-9f8e7d6c5b4a3921/with+odd&chars=%-and?more';
const auth = { authorization: `Bearer ${TOKEN}` };

describe('client mistakes: documented answers, nothing logged as an error', () => {
  let s: ProcessServer;
  let log: CapturedLog;
  const lines = () => log.lines();

  beforeAll(async () => {
    // as serve.ts makes it, at the most verbose level a server would run at
    log = captureLog({ level: 'debug', ...loggerHygiene(TOKEN) });
    const logger = log.logger;
    s = await startProcessServer({ token: TOKEN, tokenInPath: true, logger, maxConcurrentEnvs: 1, maxWaiting: 0 });
  });
  afterAll(async () => {
    await s?.stop();
  });

  it('bad JSON, 413, 415, an oversized frame, a capacity refusal and bad frames log nothing at error and no stack', async () => {
    // bad JSON body
    const bad = await http(s.url, 'POST', '/episodes', '{"task_id": ', auth);
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: expect.any(String), message: expect.any(String) });
    // 413: a body over MAX_FRAME_BYTES
    const big = await http(s.url, 'POST', '/episodes', JSON.stringify({ pad: 'x'.repeat(MAX_FRAME_BYTES + 10) }), auth);
    expect(big.status).toBe(413);
    // 415: a body that is not JSON
    const text = await fetch(`${s.url}/episodes`, { method: 'POST', headers: { ...auth, 'content-type': 'application/xml' }, body: '<reset/>' });
    expect(text.status).toBe(415);
    await text.text();
    // a malformed content type on /mcp (which takes any): a JSON-RPC invalid request, as every /mcp refusal
    const ct = await fetch(`${s.url}/mcp`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json; charset' }, body: '{}' });
    expect(ct.status).toBe(200);
    expect(((await ct.json()) as { error: { code: number } }).error.code).toBe(-32600);
    // an oversized WebSocket frame: closed 1009 by the server
    const c = await WsClient.open(s.url, TOKEN);
    c.sendRaw(JSON.stringify({ type: 'state', pad: 'x'.repeat(MAX_FRAME_BYTES + 10) }));
    expect((await c.closed).code).toBe(1009);
    // bad frames
    const d = await WsClient.open(s.url, TOKEN);
    for (const f of [
      'not json',
      '[]',
      '{"type":1}',
      '{"type":"nope"}',
      '{"type":"step","data":{}}',
      '{"type":"reset","data":{"task_id":"no-such-task"}}',
      '{"type":"step","data":{"type":"list_tools"}}',
    ]) {
      const reply = d.next();
      d.sendRaw(f);
      expect((await reply).type, f).toBe('error');
    }
    d.ws.send(Buffer.from('binary'), { binary: true });
    expect((await d.next()).type).toBe('error');
    // a capacity refusal: the one slot is taken, no one may wait
    const e = await WsClient.open(s.url, TOKEN);
    expect((await e.reset({ task_id: 'fx-echo-0' })).type).toBe('observation');
    expect(await d.reset({ task_id: 'fx-echo-1' })).toMatchObject({ type: 'error', data: { code: 'CAPACITY_REACHED' } });
    const refused = await http(s.url, 'POST', '/episodes', { task_id: 'fx-echo-1' }, auth);
    expect(refused.status).toBe(503);
    await e.close();
    await d.close();
    // unknown routes, a wrong token, an unknown episode
    expect((await http(s.url, 'GET', '/nope', undefined, auth)).status).toBe(404);
    expect((await http(s.url, 'GET', '/bundle', undefined, { authorization: 'Bearer wrong' })).status).toBe(401);
    expect((await http(s.url, 'GET', '/episodes/nope', undefined, auth)).status).toBe(404);
    await waitFor(() => s.app.openenv.manager.list().length === 0, 30_000, 'episodes torn down');

    const errors = lines().filter((l) => l.level >= 50);
    expect(errors, JSON.stringify(errors, null, 1)).toEqual([]);
    const stacks = lines().filter((l) => JSON.stringify(l).includes('"stack"'));
    expect(stacks, JSON.stringify(stacks, null, 1)).toEqual([]);
  });

  it('a 10 kB path parameter gets 414 {error, message} without the URL echoed back', async () => {
    const long = 'e'.repeat(10_000);
    for (const [method, path] of [
      ['GET', `/episodes/${long}`],
      ['POST', `/episodes/${long}/step`],
      ['DELETE', `/episodes/${long}`],
    ] as const) {
      const r = await http(s.url, method, path, method === 'POST' ? { type: 'list_tools' } : undefined, auth);
      expect(r.status, path.slice(0, 20)).toBe(414);
      expect(Object.keys(r.body).sort(), JSON.stringify(r.body).slice(0, 300)).toEqual(['error', 'message']);
      expect(r.body.error).toBe('uri_too_long');
      expect(JSON.stringify(r.body).length).toBeLessThan(1000);
    }
  });

  it('a JSON-RPC notification over HTTP gets 202 and no body, and is executed; {} is still an invalid request', async () => {
    const created = await http(s.url, 'POST', '/mcp', { jsonrpc: '2.0', id: 1, method: 'openenv/session/create', params: { task_id: 'fx-echo-0' } }, auth);
    const sid = created.body.result.session_id as string;
    // a notification: no "id" member
    const note = await fetch(`${s.url}/mcp`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', method: 'tools/call', params: { session_id: sid, name: 'echo', arguments: { text: 'note' } } }),
    });
    expect(note.status).toBe(202);
    expect(await note.text()).toBe('');
    // it ran: the episode counted the step
    const st = await http(s.url, 'GET', `/episodes/${sid}`, undefined, auth);
    expect(st.body.step_count).toBe(1);
    // a notification of an unknown method: still no body
    const unknown = await fetch(`${s.url}/mcp`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: '{"jsonrpc":"2.0","method":"notifications/initialized"}',
    });
    expect(unknown.status).toBe(202);
    expect(await unknown.text()).toBe('');
    // "id": null is a request with a null id, answered
    const nullId = await http(s.url, 'POST', '/mcp', { jsonrpc: '2.0', id: null, method: 'tools/list', params: { session_id: sid } }, auth);
    expect(nullId.status).toBe(200);
    expect(nullId.body.result.tools.length).toBeGreaterThan(0);
    // {} has no method: an invalid request, answered (OpenEnv's validator posts it)
    const empty = await http(s.url, 'POST', '/mcp', {}, auth);
    expect(empty.status).toBe(200);
    expect(empty.body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600 } });
    // over /ws an mcp frame always gets exactly one reply, a notification included
    const c = await WsClient.open(s.url, TOKEN);
    const reply = await c.request({ type: 'mcp', data: { jsonrpc: '2.0', method: 'tools/list', params: { session_id: sid } } });
    expect(reply).toMatchObject({ type: 'mcp', data: { jsonrpc: '2.0', id: null, result: { tools: expect.any(Array) } } });
    await c.close();
    await http(s.url, 'POST', '/mcp', { jsonrpc: '2.0', id: 2, method: 'openenv/session/close', params: { session_id: sid } }, auth);
  });

  it('the token percent-encoded in a path or a query is redacted in the log too', async () => {
    const enc = encodeURIComponent(TOKEN);
    expect(enc).not.toBe(TOKEN);
    await http(s.url, 'GET', `/t/${enc}/bundle`);
    await http(s.url, 'GET', `/bundle?token=${enc}`, undefined, auth);
    await http(s.url, 'GET', `/nope/${enc}`, undefined, auth);
    // a lower-case encoding is the same token
    await http(s.url, 'GET', `/bundle?t=${enc.replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase())}`, undefined, auth);
    // a WebSocket upgrade with the token in its path
    const ws = new WebSocket(`${s.url.replace('http', 'ws')}/t/${enc}/ws`);
    await new Promise((r) => ws.once('open', r));
    ws.close();
    await waitFor(() => log.text().includes('/nope/'), 10_000, 'the requests logged');
    expect(log.text()).not.toContain(TOKEN);
    expect(log.text()).not.toContain(enc);
    expect(log.text().toLowerCase()).not.toContain(enc.toLowerCase());
    expect(log.text()).not.toContain(JSON.stringify(TOKEN).slice(1, -1));
  });
});
