/**
 * One client cannot take the server down, each abuse played as a client would, on one
 * process-backed server: a flooding client is cut off (WebSocket: close 1008; HTTP: 429) and
 * nobody else notices; absurdly nested tool arguments are the model's mistake; frame types are
 * looked up among own keys only.
 */
import WebSocket from 'ws';
import { describe, expect, it } from 'vitest';
import { MAX_ARGUMENT_DEPTH } from '../../src/defaults.js';
import { REQUESTS_IN_FLIGHT_PER_EPISODE } from '../../src/sessions/request-episodes.js';
import { WS_PENDING_LIMIT } from '../../src/sessions/ws-session.js';
import { processSuiteServer } from '../support/process-server.js';
import { waitFor } from '../../scripts/lib/wait.js';
import { WsClient } from '../../scripts/lib/ws-client.js';
import { http } from '../routes/http.js';
import { heldBytes } from '../support/memory.js';

const MiB = 1024 * 1024;

/** sends one frame and resolves when it is written to the socket (false when the socket is gone) */
function sendWritten(ws: WebSocket, text: string): Promise<boolean> {
  return new Promise((resolve) => {
    if (ws.readyState !== WebSocket.OPEN) return resolve(false);
    ws.send(text, (err) => resolve(!err));
  });
}

/** `{"a":{"a":...1...}}` nested `depth` levels, as text (JSON.stringify of it would overflow) */
function nested(depth: number): string {
  return '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
}

describe('one client cannot take the server down', () => {
  const s = processSuiteServer({ maxConcurrentEnvs: 4 });
  const idle = () => s.app.openenv.manager.list().length === 0 && s.app.openenv.admission.activeCount === 0 && s.sandbox.held().length === 0;

  it('/ws: frames just under 4 MiB sent without waiting close the session 1008 within the bound; memory stays bounded; another session works', async () => {
    const other = await WsClient.open(s.url);
    expect((await other.reset({ task_id: 'fx-echo-1' })).type).toBe('observation');

    const flood = await WsClient.open(s.url);
    expect((await flood.reset({ task_id: 'fx-echo-0' })).type).toBe('observation');
    // a step that will not answer for an hour: everything after it waits in the session's queue
    flood.sendRaw(JSON.stringify({ type: 'step', data: { type: 'call_tool', tool_name: 'sleep', arguments: { seconds: 3600 } } }));
    const pad = 'x'.repeat(4 * MiB - 64);
    const frame = JSON.stringify({ type: 'state', pad });
    expect(Buffer.byteLength(frame)).toBeLessThan(4 * MiB);
    global.gc?.();
    const heldBefore = heldBytes();
    let sent = 0;
    // far more than the bound lets through: the old server queued every one of them
    const cap = WS_PENDING_LIMIT.frames + 16;
    while (sent < cap && flood.closeInfo === null && (await sendWritten(flood.ws, frame))) sent++;
    const closed = await Promise.race([flood.closed, new Promise<null>((r) => setTimeout(() => r(null), 20_000))]);
    const heldAfter = heldBytes();
    expect(closed, `the session was not closed after ${sent} frames of ${frame.length} bytes`).not.toBeNull();
    expect(closed!.code).toBe(1008);
    expect(closed!.reason).toMatch(/too many frames in flight/);
    // closed by the byte bound: at most 16 MiB of these waited (the client may have written a few more before the close arrived)
    expect(sent).toBeLessThanOrEqual(WS_PENDING_LIMIT.frames);
    // generous: the server buffered at most WS_PENDING_LIMIT.bytes, the client wrote a few frames
    expect(heldAfter - heldBefore).toBeLessThan(512 * MiB);
    // the flooder's episode (and its sleeping step) is torn down; the other session goes on
    await waitFor(() => s.app.openenv.manager.list().length === 1, 30_000, "the flooder's episode torn down");
    expect((await other.call('echo', { text: 'still here' })).data.observation.result.data).toEqual({ text: 'still here' });
    const fresh = await WsClient.open(s.url);
    expect((await fresh.state()).type).toBe('state');
    await fresh.close();
    await other.close();
    await waitFor(idle, 30_000, 'everything torn down');
  });

  it('/ws: more small frames than WS_PENDING_LIMIT.frames behind a running step close the session 1008', async () => {
    const flood = await WsClient.open(s.url);
    expect((await flood.reset({ task_id: 'fx-echo-0' })).type).toBe('observation');
    flood.sendRaw(JSON.stringify({ type: 'step', data: { type: 'call_tool', tool_name: 'sleep', arguments: { seconds: 3600 } } }));
    // the step is one frame waiting; this many more pass the bound by one
    for (let i = 0; i < WS_PENDING_LIMIT.frames; i++) flood.sendRaw('{"type":"state"}');
    const closed = await Promise.race([flood.closed, new Promise<null>((r) => setTimeout(() => r(null), 20_000))]);
    expect(closed?.code).toBe(1008);
    await waitFor(idle, 30_000, "the flooder's episode torn down");
  });

  it('/episodes: steps past REQUESTS_IN_FLIGHT_PER_EPISODE on one episode get 429; other episodes are unharmed', async () => {
    const a = await http(s.url, 'POST', '/episodes', { task_id: 'fx-echo-0' });
    const b = await http(s.url, 'POST', '/episodes', { task_id: 'fx-echo-1' });
    expect([a.status, b.status]).toEqual([201, 201]);
    const extra = 4;
    const results: { status: number; body: any }[] = [];
    const all = Array.from({ length: REQUESTS_IN_FLIGHT_PER_EPISODE + extra }, () =>
      http(s.url, 'POST', `/episodes/${a.body.episode_id}/step`, { type: 'call_tool', tool_name: 'sleep', arguments: { seconds: 20 } }).then((r) =>
        results.push(r),
      ),
    );
    // the refused ones answer at once; the others sleep until the episode is closed
    await waitFor(() => results.length >= extra, 25_000, `${extra} answers while the others sleep`).catch(() => undefined);
    const refused = results.filter((r) => r.status === 429);
    expect(refused.length, `answers: ${JSON.stringify(results.map((r) => r.status))}`).toBe(extra);
    expect(refused[0]!.body).toMatchObject({ error: 'too_many_requests', limit: REQUESTS_IN_FLIGHT_PER_EPISODE });
    const echo = await http(s.url, 'POST', `/episodes/${b.body.episode_id}/step`, { type: 'call_tool', tool_name: 'echo', arguments: { text: 'b' } });
    expect(echo.status).toBe(200);
    expect(echo.body.observation.result.data).toEqual({ text: 'b' });
    expect((await http(s.url, 'DELETE', `/episodes/${a.body.episode_id}`)).status).toBe(204);
    await Promise.all(all);
    expect((await http(s.url, 'DELETE', `/episodes/${b.body.episode_id}`)).status).toBe(204);
    await waitFor(idle, 30_000, 'everything torn down');
  });

  it('/mcp: tools/call past the bound on one session gets a 429-coded error; other sessions are unharmed', async () => {
    let id = 1;
    const rpc = (method: string, params: unknown) => http(s.url, 'POST', '/mcp', { jsonrpc: '2.0', id: id++, method, params });
    const a = (await rpc('openenv/session/create', { task_id: 'fx-echo-0' })).body.result.session_id as string;
    const b = (await rpc('openenv/session/create', { task_id: 'fx-echo-1' })).body.result.session_id as string;
    const extra = 4;
    const results: { status: number; body: any }[] = [];
    const all = Array.from({ length: REQUESTS_IN_FLIGHT_PER_EPISODE + extra }, () =>
      rpc('tools/call', { session_id: a, name: 'sleep', arguments: { seconds: 20 } }).then((r) => results.push(r)),
    );
    await waitFor(() => results.length >= extra, 25_000, `${extra} answers while the others sleep`).catch(() => undefined);
    const refused = results.filter((r) => r.body?.error?.data?.error === 'too_many_requests');
    expect(refused.length, `answers: ${JSON.stringify(results.map((r) => r.body))}`).toBe(extra);
    expect(refused[0]!.status).toBe(200);
    const echo = await rpc('tools/call', { session_id: b, name: 'echo', arguments: { text: 'b' } });
    expect(echo.body.result).toMatchObject({ is_error: false, data: { text: 'b' } });
    await rpc('openenv/session/close', { session_id: a });
    await Promise.all(all);
    await rpc('openenv/session/close', { session_id: b });
    await waitFor(idle, 30_000, 'everything torn down');
  });

  it('arguments nested 100,000 deep are invalid_args and the episode goes on (/ws and /mcp)', async () => {
    const c = await WsClient.open(s.url);
    expect((await c.reset({ task_id: 'fx-echo-0' })).type).toBe('observation');
    const reply = c.next();
    c.sendRaw(`{"type":"step","data":{"type":"call_tool","tool_name":"echo","arguments":${nested(100_000)}}}`);
    const out = await reply;
    expect(out.type).toBe('observation');
    expect(out.data.done).toBe(false);
    expect(out.data.observation.error).toMatchObject({ error_type: 'invalid_args' });
    expect(out.data.observation.error.message).toContain(String(MAX_ARGUMENT_DEPTH));
    expect((await c.call('echo', { text: 'after' })).data.observation.result.data).toEqual({ text: 'after' });
    // the same over the session's mcp frames
    const mreply = c.next();
    c.sendRaw(`{"type":"mcp","data":{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":${nested(100_000)}}}}`);
    expect((await mreply).data.result).toMatchObject({ is_error: true, error: { error_type: 'invalid_args' }, done: false });
    await c.close();

    const created = await http(s.url, 'POST', '/mcp', { jsonrpc: '2.0', id: 1, method: 'openenv/session/create', params: { task_id: 'fx-echo-0' } });
    const sid = created.body.result.session_id as string;
    const deep = await http(
      s.url,
      'POST',
      '/mcp',
      `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"session_id":"${sid}","name":"echo","arguments":${nested(100_000)}}}`,
    );
    expect(deep.status).toBe(200);
    expect(deep.body.result).toMatchObject({ is_error: true, error: { error_type: 'invalid_args' }, done: false });
    const after = await http(s.url, 'POST', '/mcp', {
      jsonrpc: '2.0',
      id: 3,
      method: 'tools/call',
      params: { session_id: sid, name: 'echo', arguments: { text: 'after' } },
    });
    expect(after.body.result).toMatchObject({ is_error: false, data: { text: 'after' } });
    await http(s.url, 'POST', '/mcp', { jsonrpc: '2.0', id: 4, method: 'openenv/session/close', params: { session_id: sid } });
    await waitFor(idle, 30_000, 'everything torn down');
  });

  it('"constructor", "toString", "__proto__" and other inherited names are unknown frame types', async () => {
    const c = await WsClient.open(s.url);
    for (const type of ['constructor', 'toString', '__proto__', 'hasOwnProperty', 'valueOf']) {
      const reply = await c.request({ type, data: {} });
      expect(reply, type).toMatchObject({ type: 'error', data: { code: 'UNKNOWN_TYPE' } });
    }
    // a raw "__proto__" key (JSON.stringify of an object literal would drop it)
    const raw = c.next();
    c.sendRaw('{"type":"__proto__","__proto__":{"data":"required"}}');
    expect(await raw).toMatchObject({ type: 'error', data: { code: 'UNKNOWN_TYPE' } });
    // the session is still fine
    expect((await c.state()).type).toBe('state');
    await c.close();
  });
});
