/**
 * MCP requests that must not start episodes do not (issue 26): a dialect `openenv/session/create`
 * sent as a notification (its session id would be in an answer nobody gets: the env would hold its
 * slot until the idle timeout, addressed by no one), over POST /mcp and over a /ws `mcp` frame;
 * a standard `initialize` without the params the MCP spec requires. Envs run as processes: each
 * case counts the env processes ever spawned.
 */
import { describe, expect, it } from 'vitest';
import { WsClient } from '../../scripts/lib/ws-client.js';
import { processSuiteServer } from '../support/process-server.js';

async function post(base: string, body: unknown, path = '/mcp'): Promise<{ status: number; headers: Headers; body: any }> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

/** lets a deploy that was (wrongly) started get as far as spawning its env */
const settle = () => new Promise((r) => setTimeout(r, 300));

describe('MCP requests that must not start episodes', () => {
  const s = processSuiteServer({ maxConcurrentEnvs: 2 });

  it('openenv/session/create as a notification over POST /mcp: 202, nothing deployed; with an id it still starts one', async () => {
    const before = s.sandbox.spawned;
    const r = await post(s.url, { jsonrpc: '2.0', method: 'openenv/session/create', params: { task_id: 'fx-echo-0' } });
    expect(r.status).toBe(202);
    expect(r.body).toBeUndefined();
    await settle();
    expect(s.sandbox.spawned).toBe(before);
    expect(s.sandbox.live()).toEqual([]);
    expect(s.logs()).toContain('openenv/session/create sent as a notification');

    // the same as a request: a session, as before
    const made = await post(s.url, { jsonrpc: '2.0', id: 1, method: 'openenv/session/create', params: { task_id: 'fx-echo-0' } });
    expect(made.body.result.session_id).toEqual(expect.any(String));
    expect(s.sandbox.spawned).toBe(before + 1);
    await post(s.url, { jsonrpc: '2.0', id: 2, method: 'openenv/session/close', params: { session_id: made.body.result.session_id } });
  });

  it('openenv/session/create as a notification in a /ws mcp frame: answered with an error, nothing deployed', async () => {
    const before = s.sandbox.spawned;
    const c = await WsClient.open(s.url);
    try {
      const answer = await c.request({ type: 'mcp', data: { jsonrpc: '2.0', method: 'openenv/session/create', params: { task_id: 'fx-echo-0' } } });
      expect(answer.data).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600, message: expect.stringContaining('needs an "id"') } });
    } finally {
      await c.close();
    }
    await settle();
    expect(s.sandbox.spawned).toBe(before);
  });

  it.each([
    ['no params', undefined],
    ['params not an object', 'x'],
    ['no protocolVersion', { capabilities: {}, clientInfo: { name: 'c', version: '1' } }],
    ['a protocolVersion that is not a string', { protocolVersion: 2025, capabilities: {}, clientInfo: { name: 'c', version: '1' } }],
    ['no capabilities', { protocolVersion: '2025-06-18', clientInfo: { name: 'c', version: '1' } }],
    ['no clientInfo', { protocolVersion: '2025-06-18', capabilities: {} }],
    ['a clientInfo without a name', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { version: '1' } }],
  ])('a standard initialize with %s: -32602 naming what is missing, no session, nothing deployed', async (_what, params) => {
    const before = s.sandbox.spawned;
    const r = await post(s.url, { jsonrpc: '2.0', id: 1, method: 'initialize', ...(params === undefined ? {} : { params }) }, '/mcp?task_id=fx-echo-0');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      id: 1,
      error: { code: -32602, message: expect.stringContaining('initialize needs protocolVersion, capabilities and clientInfo') },
    });
    expect(r.headers.get('mcp-session-id')).toBeNull();
    await settle();
    expect(s.sandbox.spawned).toBe(before);
  });

  it('a well-formed initialize still starts its session', async () => {
    const before = s.sandbox.spawned;
    const r = await post(
      s.url,
      { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'c', version: '1' } } },
      '/mcp?task_id=fx-echo-0',
    );
    expect(r.body.result.protocolVersion).toBe('2025-06-18');
    const sid = r.headers.get('mcp-session-id');
    expect(sid).toEqual(expect.any(String));
    expect(s.sandbox.spawned).toBe(before + 1);
    await fetch(`${s.url}/mcp`, { method: 'DELETE', headers: { 'mcp-session-id': sid! } });
  });
});
