/** POST /mcp (JSON-RPC 2.0, OpenEnv's methods and codes) and {"type":"mcp"} frames on /ws, with the envs as processes. */
import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { RpcCode } from '../../src/protocol/jsonrpc.js';
import { McpService } from '../../src/sessions/mcp-service.js';
import type { RequestEpisodes } from '../../src/sessions/request-episodes.js';
import { processSuiteServer } from '../support/process-server.js';
import { waitFor } from '../../scripts/lib/wait.js';
import { WsClient } from '../../scripts/lib/ws-client.js';
import { http } from './http.js';

let nextId = 1;

describe('POST /mcp and ws mcp frames', () => {
  const s = processSuiteServer({ maxConcurrentEnvs: 1 });
  /** a JSON-RPC call: asserts HTTP 200 (every answer but auth) and returns the body */
  const rpc = async (body: unknown) => {
    const r = await http(s.url, 'POST', '/mcp', body);
    expect(r.status).toBe(200);
    expect(r.body.jsonrpc).toBe('2.0');
    return r.body;
  };
  const req = (method: string, params?: unknown) => ({ jsonrpc: '2.0', id: nextId++, method, ...(params === undefined ? {} : { params }) });

  it('plays a session: create (a reset), tools/list, tools/call, invalid args, end, close', async () => {
    const created = await rpc(req('openenv/session/create', { task_id: 'fx-two-turn', seed: 5 }));
    expect(created.error).toBeUndefined();
    const sid = created.result.session_id as string;
    expect(created.id).toBe(nextId - 1);
    expect(created.result).toMatchObject({ episode_id: sid, done: false, reward: null, observation: { task_id: 'fx-two-turn', seed: 5, turn: 1 } });
    expect(s.sandbox.live()).toContain(sid);

    const listed = await rpc(req('tools/list', { session_id: sid }));
    expect(listed.error).toBeUndefined();
    expect(listed.result.tools.map((t: { name: string }) => t.name)).toEqual(['echo', 'finish_now', 'sleep', 'crash', 'fail', 'end_turn']);
    const echoTool = listed.result.tools[0];
    expect(echoTool.input_schema).toEqual(echoTool.inputSchema);
    expect(echoTool.input_schema.required).toEqual(['text']);

    const echo = await rpc(req('tools/call', { session_id: sid, name: 'echo', arguments: { text: 'hi' } }));
    // no "error" key on success: OpenEnv's client tests `"error" in data`
    expect('error' in echo).toBe(false);
    expect(echo.result).toMatchObject({
      content: [{ type: 'text', text: 'hi' }],
      data: { text: 'hi' },
      is_error: false,
      tool_name: 'echo',
      error: null,
      done: false,
      reward: null,
    });

    // arguments that are not an object: the model's error, answered in the result; the episode goes on
    const badArgs = await rpc(req('tools/call', { session_id: sid, name: 'echo', arguments: 'text=hi' }));
    expect(badArgs.result).toMatchObject({ is_error: true, data: null, error: { error_type: 'invalid_args' }, done: false });
    expect(badArgs.result.content[0].text).toContain('must be a JSON object');
    const unknownTool = await rpc(req('tools/call', { session_id: sid, name: 'nope' }));
    expect(unknownTool.result).toMatchObject({ is_error: true, error: { error_type: 'tool_not_found' } });

    await rpc(req('tools/call', { session_id: sid, name: 'end_turn', arguments: {} }));
    const last = await rpc(req('tools/call', { session_id: sid, name: 'end_turn', arguments: {} }));
    expect(last.result).toMatchObject({ done: true, reward: 0.5, end_reason: 'turns_ended', scores: { quality: 0.5 } });

    // a call on an ended episode: -32000 with the reason
    const late = await rpc(req('tools/call', { session_id: sid, name: 'echo', arguments: { text: 'late' } }));
    expect(late.error).toMatchObject({ code: RpcCode.SERVER_ERROR, data: { error: 'episode_done', reason: 'episode_done' } });
    expect('result' in late).toBe(false);

    const closed = await rpc(req('openenv/session/close', { session_id: sid }));
    expect(closed.result).toEqual({ session_id: sid, closed: true });
    await waitFor(() => !s.sandbox.held().includes(sid), 30_000, 'the session torn down');
    const gone = await rpc(req('tools/call', { session_id: sid, name: 'echo', arguments: { text: 'x' } }));
    expect(gone.error.code).toBe(RpcCode.INVALID_PARAMS);
    expect(gone.error.message).toContain('Unknown session_id');
  });

  it('close tears a running session down; tools/list without a session answers from the bundle', async () => {
    const created = await rpc(req('openenv/session/create', {}));
    const sid = created.result.session_id as string;
    expect(created.result.observation.split).toBe('train'); // the default split, a task at random
    expect(s.sandbox.live()).toContain(sid);
    const closed = await rpc(req('openenv/session/close', { session_id: sid }));
    expect(closed.result.closed).toBe(true);
    expect(s.sandbox.held()).not.toContain(sid);

    const noSession = await rpc(req('tools/list'));
    expect(noSession.result.tools.map((t: { name: string }) => t.name)).toEqual(['echo', 'finish_now', 'sleep', 'crash', 'fail', 'end_turn']);
    expect((await rpc(req('tools/list', { toolset: 'echo' }))).result.tools).toHaveLength(6);
    expect((await rpc(req('tools/list', { toolset: 'nope' }))).error.code).toBe(RpcCode.INVALID_PARAMS);
    expect((await http(s.url, 'GET', '/episodes')).body.active).toEqual([]);
  });

  it('answers each JSON-RPC error code, always with HTTP 200', async () => {
    // what `openenv validate` posts
    const empty = await rpc({});
    expect(empty).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: RpcCode.INVALID_REQUEST } });

    const parse = await http(s.url, 'POST', '/mcp', '{"jsonrpc": "2.0", "method": ');
    expect(parse.status).toBe(200);
    expect(parse.body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32700 } });
    const notJsonType = await fetch(`${s.url}/mcp`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: JSON.stringify(req('tools/list')) });
    expect(notJsonType.status).toBe(200);
    expect(((await notJsonType.json()) as { result: { tools: unknown[] } }).result.tools).toHaveLength(6);
    const noBody = await http(s.url, 'POST', '/mcp');
    expect(noBody.status).toBe(200);
    expect(noBody.body.error.code).toBe(-32700);

    expect((await rpc({ jsonrpc: '1.0', id: 7, method: 'tools/list' })).error).toMatchObject({ code: -32600 });
    expect((await rpc([req('tools/list')])).error.code).toBe(-32600);
    expect((await rpc(JSON.stringify('tools/list'))).error.code).toBe(-32600); // valid JSON, not an object
    expect((await rpc({ jsonrpc: '2.0', id: { a: 1 }, method: 'tools/list' })).error.code).toBe(-32600);

    const unknown = await rpc({ jsonrpc: '2.0', id: 'abc', method: 'resources/list' });
    expect(unknown).toMatchObject({ id: 'abc', error: { code: -32601 } });
    expect(unknown.error.message).toContain('resources/list');

    for (const [params, words] of [
      [[1, 2], 'params'],
      [{ name: 'echo' }, 'session_id'],
      [{ session_id: 'no-such-session', name: 'echo' }, 'Unknown session_id'],
      [{ session_id: 42, name: 'echo' }, 'session_id'],
      [{ session_id: 'x' }, 'name'],
    ] as const) {
      const r = await rpc(req('tools/call', params));
      expect(r.error.code, JSON.stringify(params)).toBe(-32602);
      expect(r.error.message).toContain(words);
    }
    expect((await rpc(req('openenv/session/close', {}))).error.code).toBe(-32602);
    expect((await rpc(req('openenv/session/create', { split: 'train', index: -1 }))).error.code).toBe(-32602);
    const unknownTask = await rpc(req('openenv/session/create', { task_id: 'no-such-task' }));
    expect(unknownTask.error).toMatchObject({ code: -32602, data: { error: 'not_found' } });

    // a body over the 4 MiB limit is still a JSON-RPC answer
    const huge = await http(
      s.url,
      'POST',
      '/mcp',
      JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { pad: 'x'.repeat(5 * 1024 * 1024) } }),
    );
    expect(huge.status).toBe(200);
    expect(huge.body.error.code).toBe(-32600);
    // nothing was started by any of it
    expect((await http(s.url, 'GET', '/episodes')).body.active).toEqual([]);
  });

  it('a session created over /mcp counts against max_concurrent_envs (1 here)', async () => {
    const held = await rpc(req('openenv/session/create', { task_id: 'fx-echo-0' }));
    const sid = held.result.session_id as string;
    const list = (await http(s.url, 'GET', '/episodes')).body;
    expect(list.active).toEqual([expect.objectContaining({ episode_id: sid, transport: 'mcp', phase: 'running' })]);

    // a second MCP session waits, then gets -32000 with the counts
    const t0 = Date.now();
    const refused = await rpc(req('openenv/session/create', { task_id: 'fx-echo-1', reset_timeout_s: 1 }));
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    expect(refused.error).toMatchObject({ code: -32000, data: { error: 'capacity_reached', active_sessions: 1, max_sessions: 1 } });
    expect(refused.error.data.retry_after_s).toBeGreaterThanOrEqual(1);

    // so does a /ws reset and a POST /episodes
    const ws = await WsClient.open(s.url);
    const wsRefused = await ws.reset({ task_id: 'fx-echo-1', reset_timeout_s: 1 });
    expect(wsRefused.data).toMatchObject({ code: 'CAPACITY_REACHED', active_sessions: 1, max_sessions: 1 });
    const httpRefused = await http(s.url, 'POST', '/episodes', { task_id: 'fx-echo-1', reset_timeout_s: 1 });
    expect(httpRefused.status).toBe(503);

    // closing the MCP session frees the slot
    await rpc(req('openenv/session/close', { session_id: sid }));
    const admitted = await ws.reset({ task_id: 'fx-echo-1', reset_timeout_s: 30 });
    expect(admitted.type).toBe('observation');
    await ws.close();
    await waitFor(() => s.app.openenv.admission.activeCount === 0, 30_000, 'slots free');
  });

  it('{"type":"mcp"} frames on /ws reach the same handler, on the session\'s own episode', async () => {
    const ws = await WsClient.open(s.url);
    const frame = (data: unknown) => ws.request({ type: 'mcp', data });

    // before a reset: there is no episode to call, and create does not deploy one behind the socket's back
    const early = await frame(req('tools/call', { name: 'echo', arguments: { text: 'x' } }));
    expect(early).toMatchObject({ type: 'mcp', data: { jsonrpc: '2.0', error: { code: -32602 } } });
    expect((await frame(req('openenv/session/create', {}))).data.error.code).toBe(-32600);
    expect((await frame(req('tools/list'))).data.result.tools).toHaveLength(6);

    const r = await ws.reset({ task_id: 'fx-echo-2' });
    const epId = r.data.observation.episode_id as string;
    const created = await frame(req('openenv/session/create', {}));
    expect(created.data.result.session_id).toBe(epId);
    const listed = await frame(req('tools/list'));
    expect(listed.data.result.tools.map((t: { name: string }) => t.name)).toContain('finish_now');
    const echo = await frame(req('tools/call', { name: 'echo', arguments: { text: 'over ws' } }));
    expect(echo.data.result).toMatchObject({ data: { text: 'over ws' }, is_error: false });
    const explicit = await frame(req('tools/call', { session_id: epId, name: 'echo', arguments: { text: 'by id' } }));
    expect(explicit.data.result.data).toEqual({ text: 'by id' });
    expect((await frame(req('openenv/session/close', { session_id: epId }))).data.error.code).toBe(-32600);
    expect((await frame('not an object')).data.error.code).toBe(-32600);
    expect((await frame(req('nope/nope'))).data.error.code).toBe(-32601);

    // the step counted on the same episode the socket plays
    expect((await ws.state()).data).toMatchObject({ episode_id: epId, step_count: 2 });
    // and over HTTP, the socket's episode is not anyone else's to drive or close
    const steal = await rpc(req('tools/call', { session_id: epId, name: 'echo', arguments: { text: 'x' } }));
    expect(steal.error.code).toBe(-32600);
    expect((await rpc(req('openenv/session/close', { session_id: epId }))).error.code).toBe(-32600);

    const fin = await frame(req('tools/call', { name: 'finish_now', arguments: { score: 0.25 } }));
    expect(fin.data.result).toMatchObject({ done: true, reward: 0.25, end_reason: 'finished' });
    await ws.close();
  });
});

describe('McpService error mapping', () => {
  it('an unexpected failure is -32603 without internals, and is logged', async () => {
    const lines: string[] = [];
    const log = pino({ level: 'error' }, { write: (l: string) => lines.push(l) });
    const exploding = {
      find: () => {
        throw new Error('secret internals');
      },
    } as unknown as RequestEpisodes;
    const svc = new McpService({ requests: exploding, bundle: { toolsets: {} } as never, log });
    const r = await svc.handle({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { session_id: 's', name: 'echo' } });
    expect(r).toEqual({ jsonrpc: '2.0', id: 9, error: { code: -32603, message: 'Internal error; see the server log' } });
    expect(lines.join('')).toContain('secret internals');
  });
});
