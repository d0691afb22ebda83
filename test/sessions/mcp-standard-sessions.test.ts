/**
 * Standard MCP sessions on their own (no HTTP), over a fake sandbox and a fake clock: what each
 * message on a session is answered with (status, JSON-RPC body), and how a session lives and ends
 * with its episode. routes/mcp-standard.test.ts plays the same through the route with real clients.
 */
import { describe, expect, it, vi } from 'vitest';
import { EpisodeManager } from '../../src/episodes/manager.js';
import { readRpcBody, readRpcMessage, RpcCode, type RpcRequest } from '../../src/protocol/jsonrpc.js';
import { MCP_PROTOCOL_VERSIONS, MCP_SESSION_HEADER } from '../../src/protocol/mcp-standard.js';
import { StandardMcpSessions, type McpHttpAnswer } from '../../src/sessions/mcp-standard-sessions.js';
import { RequestEpisodes } from '../../src/sessions/request-episodes.js';
import { makeRig, onRigClock, type Rig } from '../support/fake-sandbox.js';

const IDLE_MS = 30_000;

/** what every initialize carries (the MCP spec's InitializeRequest), with `protocolVersion` given */
const INIT = { protocolVersion: MCP_PROTOCOL_VERSIONS[0], capabilities: {}, clientInfo: { name: 'test', version: '0' } };

function request(method: string, params: unknown = {}, id: number | string = 1): RpcRequest {
  const m = readRpcMessage({ jsonrpc: '2.0', id, method, params });
  if (m.kind !== 'request') throw new Error(`not a request: ${JSON.stringify(m)}`);
  return m;
}

async function setup(opts: Parameters<typeof makeRig>[0] = {}) {
  const rig: Rig = await makeRig(opts);
  const manager = new EpisodeManager(rig.deps, rig.log.logger);
  const requests = new RequestEpisodes(manager, IDLE_MS, rig.log.logger);
  const sessions = new StandardMcpSessions({ requests, bundle: rig.bundle, log: rig.log.logger });
  const open = async (query: Record<string, unknown> = { task_id: 'fx-echo-0' }, version: string = MCP_PROTOCOL_VERSIONS[0]) => {
    const ans = (await sessions.initialize(request('initialize', { ...INIT, protocolVersion: version }), query))!;
    return { ans, sid: ans.headers?.[MCP_SESSION_HEADER] as string };
  };
  const call = (sid: string, method: string, params: unknown = {}, version?: string) => sessions.handle(sid, version, request(method, params, 7));
  return { rig, manager, requests, sessions, open, call };
}

const result = (a: McpHttpAnswer) => (a.body as { result: any }).result;
const error = (a: McpHttpAnswer) => (a.body as { error: { code: number; message: string; data?: any } }).error;

describe('StandardMcpSessions', () => {
  onRigClock();

  it('initialize plays the query’s task as an mcp episode and answers the session id, the negotiated revision and the task as instructions', async () => {
    const { open, manager, requests, sessions } = await setup();
    const { ans, sid } = await open({ split: 'eval', index: '1' }, '2025-06-18');
    expect(ans.status).toBe(200);
    expect(sid).toMatch(/^[0-9a-f-]{36}$/);
    expect(ans.body).toEqual({
      jsonrpc: '2.0',
      id: 1,
      result: {
        protocolVersion: '2025-06-18',
        capabilities: { tools: { listChanged: false }, prompts: { listChanged: false } },
        serverInfo: { name: 'fixture-v1', version: '1.0.0' },
        instructions: 'You are testing an echo env. Call the tools you are asked to call.\n\nCall fail with the message oops, then end your turn.',
      },
    });
    const [ep] = manager.list();
    expect(ep).toMatchObject({ transport: 'mcp', phase: 'running' });
    expect(ep!.task.task_id).toBe('fx-eval-1');
    // a revision it does not speak: the newest it does
    expect(result((await open({}, '1999-01-01')).ans).protocolVersion).toBe(MCP_PROTOCOL_VERSIONS[0]);
    sessions.stop();
    requests.stop();
  });

  it('a query that names a key twice, or a task that is not there, is refused in the initialize answer', async () => {
    const { sessions } = await setup();
    const twice = (await sessions.initialize(request('initialize', INIT), { index: ['1', '2'] }))!;
    expect(twice.status).toBe(200);
    expect(error(twice)).toEqual({ code: RpcCode.INVALID_PARAMS, message: 'Invalid params: the query gives "index" more than once' });
    const missing = (await sessions.initialize(request('initialize', INIT), { task_id: 'nope' }))!;
    expect(error(missing)).toMatchObject({ code: RpcCode.INVALID_PARAMS, data: { error: 'not_found' } });
  });

  it('no slot within the reset timeout: the initialize answer is the capacity error with retry_after_s', async () => {
    const { sessions, rig } = await setup({ capacity: 1 });
    const holder = await rig.admission.acquire({ timeoutMs: 1000 });
    const pending = sessions.initialize(request('initialize', INIT), { task_id: 'fx-echo-0', reset_timeout_s: '2' });
    await vi.advanceTimersByTimeAsync(2000);
    const ans = (await pending)!;
    expect(ans.headers).toBeUndefined();
    expect(error(ans)).toMatchObject({ code: RpcCode.SERVER_ERROR, data: { error: 'capacity_reached', max_sessions: 1, retry_after_s: expect.any(Number) } });
    holder.release();
  });

  it('tools: standard tool shapes; a call answers content and structuredContent, a tool’s own error is isError; the ending call carries the reward', async () => {
    const { open, call, rig } = await setup();
    const { sid } = await open();
    const tools = result(await call(sid, 'tools/list')).tools;
    expect(tools.map((t: any) => Object.keys(t).sort())).toEqual(rig.bundle.toolsets.echo!.map(() => ['description', 'inputSchema', 'name']));
    expect(await call(sid, 'tools/call', { name: 'echo', arguments: { text: 'hi' } })).toEqual({
      status: 200,
      body: { jsonrpc: '2.0', id: 7, result: { content: [{ type: 'text', text: 'hi' }], isError: false, structuredContent: { echoed: 'hi' } } },
    });
    expect(result(await call(sid, 'tools/call', { name: 'fail', arguments: { message: 'nope' } }))).toEqual({
      content: [{ type: 'text', text: 'nope' }],
      isError: true,
    });
    expect(result(await call(sid, 'tools/call', { name: 'echo', arguments: 'text' })).isError).toBe(true);
    await vi.advanceTimersByTimeAsync(1500);
    const end = result(await call(sid, 'tools/call', { name: 'finish_now', arguments: { score: 1 } }));
    expect(end.isError).toBe(false);
    expect(end.content.at(-1)).toEqual({ type: 'text', text: 'The episode ended (finished) with reward 1.' });
    expect(end.structuredContent).toEqual({
      done: true,
      episode_id: expect.any(String),
      reward: 1,
      scores: { quality: 1, steps: 1 },
      end_reason: 'finished',
      timings: { queued_s: 0, deploy_s: 0, running_s: 1.5 },
      // this sandbox tells no usage: the wall time alone
      metadata: { cost: { cpu_s: null, peak_memory_bytes: null, bytes_written: null, wall_s: 1.5 } },
    });
  });

  it('prompts: the task prompt, its system prompt first as the user’s; an unknown prompt is invalid params', async () => {
    const { open, call } = await setup();
    const { sid } = await open({ task_id: 'fx-two-turn' });
    expect(result(await call(sid, 'prompts/list')).prompts).toEqual([
      { name: 'task', description: 'task fx-two-turn: its system prompt and first prompt', arguments: [] },
    ]);
    expect(result(await call(sid, 'prompts/get', { name: 'task' })).messages).toEqual([
      { role: 'user', content: { type: 'text', text: 'You are testing an echo env across two turns.' } },
      { role: 'user', content: { type: 'text', text: 'first prompt' } },
    ]);
    expect(error(await call(sid, 'prompts/get', { name: 'other' })).code).toBe(RpcCode.INVALID_PARAMS);
    expect(await call(sid, 'ping')).toEqual({ status: 200, body: { jsonrpc: '2.0', id: 7, result: {} } });
  });

  it('what a session refuses: a revision it does not speak (400), no such session (404), a batch or a body that is no message (400), an unknown method (-32601), a second initialize (400)', async () => {
    const { open, call, sessions } = await setup();
    const { sid } = await open();
    expect((await call(sid, 'ping', {}, '2024-01-01')).status).toBe(400);
    const unknown = await call('no-such-session', 'ping');
    expect(unknown.status).toBe(404);
    expect(error(unknown).message).toBe('Session not found: no-such-session (no such session); POST initialize to start a new one');
    expect(await sessions.handle(sid, undefined, readRpcBody('[{"jsonrpc":"2.0","id":1,"method":"ping"}]'))).toMatchObject({
      status: 400,
      body: { error: { code: RpcCode.INVALID_REQUEST } },
    });
    expect(await sessions.handle(sid, undefined, readRpcBody('{"jsonrpc":'))).toMatchObject({ status: 400, body: { error: { code: RpcCode.PARSE_ERROR } } });
    expect(await sessions.handle(sid, undefined, readRpcBody('{"jsonrpc":"2.0","id":3}'))).toMatchObject({
      status: 400,
      body: { id: 3, error: { code: RpcCode.INVALID_REQUEST } },
    });
    const nope = await call(sid, 'resources/list');
    expect(nope.status).toBe(200);
    expect(error(nope).code).toBe(RpcCode.METHOD_NOT_FOUND);
    expect((await call(sid, 'initialize')).status).toBe(400);
    expect(error(await call(sid, 'tools/call', { arguments: {} })).code).toBe(RpcCode.INVALID_PARAMS);
  });

  it('a notification or a client’s response is taken (202) and keeps the session from idling out', async () => {
    const { open, sessions, manager } = await setup();
    const { sid } = await open();
    const [ep] = manager.list();
    await vi.advanceTimersByTimeAsync(IDLE_MS - 1000);
    expect(await sessions.handle(sid, undefined, readRpcMessage({ jsonrpc: '2.0', method: 'notifications/initialized' }))).toEqual({ status: 202 });
    await vi.advanceTimersByTimeAsync(IDLE_MS - 1000);
    expect(await sessions.handle(sid, undefined, readRpcMessage({ jsonrpc: '2.0', id: 'x', result: {} }))).toEqual({ status: 202 });
    expect(ep!.done).toBe(false);
    // then quiet for the idle bound: the episode is torn down and the session ends with it
    await vi.advanceTimersByTimeAsync(IDLE_MS);
    expect(ep!.done).toBe(true);
    await ep!.tornDown;
    const after = await sessions.handle(sid, undefined, readRpcMessage({ jsonrpc: '2.0', id: 1, method: 'ping' }));
    expect(after.status).toBe(404);
    expect(error(after).message).toContain('(its episode has ended)');
  });

  it('DELETE ends a live session’s episode and tears its env down; a DELETE of an ended one still succeeds, of an unknown one is 404', async () => {
    const { open, sessions, manager, rig } = await setup();
    const { sid } = await open();
    const [ep] = manager.list();
    expect(await sessions.terminate(sid)).toEqual({ status: 204 });
    expect(ep!.endReason).toBe('closed');
    expect(rig.sandbox.tornDown).toEqual([ep!.envId]);
    expect(await sessions.terminate(sid)).toEqual({ status: 204 });
    expect((await sessions.terminate('nope')).status).toBe(404);
    expect((await sessions.handle(sid, undefined, request('ping'))).status).toBe(404);
  });
});
