/**
 * Standard MCP (Streamable HTTP) sessions at /mcp, played by real clients: the official TypeScript
 * SDK (`@modelcontextprotocol/sdk`'s Client + StreamableHTTPClientTransport) plays fixture and
 * GridSim tasks to their reward, and the Vercel AI SDK's own MCP client (`@ai-sdk/mcp`, an
 * implementation independent of the official SDK) connects and lists tools. Envs run as processes.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMCPClient } from '@ai-sdk/mcp';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, describe, expect, it } from 'vitest';
import { MCP_PROTOCOL_VERSIONS } from '../../src/protocol/mcp-standard.js';
import { processSuiteServer } from '../support/process-server.js';
import { waitFor } from '../../scripts/lib/wait.js';

const TOKEN = 'mcp-standard-test-token';
const auth = { authorization: `Bearer ${TOKEN}` };
const GRIDSIM = join(import.meta.dirname, '../../bundles/gridsim-v1');

/** The official SDK's client on `/mcp?<query>`, with the bearer token. */
async function sdkClient(base: string, query: string): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp?${query}`), { requestInit: { headers: auth } });
  const client = new Client({ name: 'openenv-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

interface Raw {
  status: number;
  headers: Headers;
  body: unknown;
}

async function post(base: string, body: unknown, headers: Record<string, string> = {}, path = '/mcp'): Promise<Raw> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...auth, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

const init = (version = '2025-06-18') => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
});

describe('standard MCP on the fixture bundle', () => {
  const record = mkdtempSync(join(tmpdir(), 'openenv-mcp-record-'));
  afterAll(() => rmSync(record, { recursive: true, force: true }));
  const s = processSuiteServer({ maxConcurrentEnvs: 2, token: TOKEN, allowedOrigins: 'https://agents.example.com', record });

  it('the official SDK plays a task to its reward: initialize, instructions, tools/list, tools/call, the reward in structuredContent', async () => {
    const { client, transport } = await sdkClient(s.url, 'task_id=fx-echo-0');
    expect(transport.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(client.getServerVersion()).toMatchObject({ name: 'fixture-v1', version: '1.0.0' });
    expect(client.getServerCapabilities()).toMatchObject({ tools: {}, prompts: {} });
    // the task, for an agent that reads only the instructions
    expect(client.getInstructions()).toBe('You are testing an echo env. Call the tools you are asked to call.\n\nEcho the word hello, then end your turn.');

    const episodes = (await (await fetch(`${s.url}/episodes`, { headers: auth })).json()) as { active: { task_id: string; transport: string }[] };
    expect(episodes.active).toEqual([expect.objectContaining({ task_id: 'fx-echo-0', transport: 'mcp' })]);

    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(['echo', 'finish_now', 'sleep', 'crash', 'fail', 'end_turn']);
    expect(tools[0]!.inputSchema).toMatchObject({ type: 'object', required: ['text'] });

    const { prompts } = await client.listPrompts();
    expect(prompts.map((p) => p.name)).toEqual(['task']);
    const prompt = await client.getPrompt({ name: 'task' });
    expect(prompt.messages.map((m) => (m.content as { text: string }).text)).toEqual([
      'You are testing an echo env. Call the tools you are asked to call.',
      'Echo the word hello, then end your turn.',
    ]);
    await client.ping();

    // the model's mistakes are isError results; the session goes on
    const unknown = await client.callTool({ name: 'nope', arguments: {} });
    expect(unknown.isError).toBe(true);
    expect((unknown.content as { text: string }[])[0]!.text).toContain('nope');
    const echo = await client.callTool({ name: 'echo', arguments: { text: 'hello' } });
    expect(echo).toMatchObject({ isError: false, content: [{ type: 'text', text: 'hello' }] });

    const ended = await client.callTool({ name: 'end_turn', arguments: {} });
    expect(ended.isError).toBe(false);
    expect(ended.structuredContent).toMatchObject({ done: true, reward: 0.5, scores: { quality: 0.5 }, end_reason: 'turns_ended' });
    expect((ended.content as { text: string }[]).at(-1)!.text).toBe('The episode ended (turns_ended) with reward 0.5.');
    await waitFor(() => s.sandbox.live().length === 0, 10_000, 'the env torn down after the episode ended');
    // an episode like any other, transport mcp: the console's history and --record
    const id = (ended.structuredContent as { episode_id: string }).episode_id;
    const shown = (await (await fetch(`${s.url}/console/episodes/${id}`, { headers: auth })).json()) as Record<string, unknown>;
    expect(shown).toMatchObject({ episode_id: id, transport: 'mcp', task_id: 'fx-echo-0', reward: 0.5 });
    const recorded = () =>
      readdirSync(record)
        .flatMap((f) => readFileSync(join(record, f), 'utf8').split('\n'))
        .filter((l) => l.includes(id));
    await waitFor(() => recorded().length === 1, 10_000, 'the episode recorded');
    expect(JSON.parse(recorded()[0]!)).toMatchObject({ episode_id: id, transport: 'mcp', reward: 0.5 });

    // the session ended with its episode: the next request is 404, so a client re-initializes
    await expect(client.listTools()).rejects.toThrow(/404|Session not found/);
    // DELETE of an ended session still succeeds
    await transport.terminateSession();
    await client.close();
  });

  it('a task chosen by split and index; DELETE ends the episode and tears the env down; then 404', async () => {
    const { client, transport } = await sdkClient(s.url, 'split=eval&index=1');
    expect(client.getInstructions()).toContain('Call fail with the message oops');
    const failed = await client.callTool({ name: 'fail', arguments: { message: 'oops' } });
    expect(failed).toMatchObject({ isError: true });
    const sid = transport.sessionId!;
    expect(s.sandbox.live()).toHaveLength(1);
    await transport.terminateSession();
    await waitFor(() => s.sandbox.live().length === 0, 10_000, 'env torn down by DELETE');
    const after = await post(s.url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { 'mcp-session-id': sid });
    expect(after.status).toBe(404);
    await client.close();
    const unknown = await fetch(`${s.url}/mcp`, { method: 'DELETE', headers: { ...auth, 'mcp-session-id': 'no-such-session' } });
    expect(unknown.status).toBe(404);
  });

  it('the Vercel AI SDK MCP client (an independent implementation) connects and lists the tools', async () => {
    const client = await createMCPClient({ transport: { type: 'http', url: `${s.url}/mcp?task_id=fx-echo-1`, headers: auth } });
    try {
      expect(client.instructions).toContain('Echo the word world');
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toEqual(['echo', 'finish_now', 'sleep', 'crash', 'fail', 'end_turn']);
      expect(tools.find((t) => t.name === 'finish_now')?.inputSchema).toMatchObject({ required: ['score'] });
    } finally {
      await client.close();
    }
    // its close sends no DELETE: the episode lives until its idle timeout; end it here
    const { active } = (await (await fetch(`${s.url}/episodes`, { headers: auth })).json()) as { active: { episode_id: string }[] };
    for (const e of active) await fetch(`${s.url}/episodes/${e.episode_id}`, { method: 'DELETE', headers: auth });
    await waitFor(() => s.sandbox.live().length === 0, 10_000, 'envs torn down');
  });

  it("the spec's rules: negotiated versions, 202 for notifications, 400 for a bad version, 405 for GET, 403 for a foreign Origin, 401 without the token", async () => {
    for (const v of MCP_PROTOCOL_VERSIONS) {
      const r = await post(s.url, init(v), {}, '/mcp?task_id=fx-echo-0');
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toContain('application/json');
      expect(r.body).toMatchObject({ jsonrpc: '2.0', id: 1, result: { protocolVersion: v } });
      const sid = r.headers.get('mcp-session-id')!;
      expect((await post(s.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, { 'mcp-session-id': sid, 'mcp-protocol-version': v })).status).toBe(
        202,
      );
      const bad = await post(s.url, { jsonrpc: '2.0', id: 2, method: 'ping' }, { 'mcp-session-id': sid, 'mcp-protocol-version': '1999-01-01' });
      expect(bad.status).toBe(400);
      expect(JSON.stringify(bad.body)).toContain('1999-01-01');
      expect((await post(s.url, { jsonrpc: '2.0', id: 7, result: {} }, { 'mcp-session-id': sid })).status).toBe(202);
      expect((await post(s.url, {}, { 'mcp-session-id': sid })).status).toBe(400);
      const unknownMethod = await post(s.url, { jsonrpc: '2.0', id: 3, method: 'resources/list' }, { 'mcp-session-id': sid });
      expect(unknownMethod.body).toMatchObject({ id: 3, error: { code: -32601 } });
      expect((await fetch(`${s.url}/mcp`, { method: 'DELETE', headers: { ...auth, 'mcp-session-id': sid } })).status).toBe(204);
    }
    // a version the server does not speak: it answers with its newest
    const old = await post(s.url, init('2024-11-05'), {}, '/mcp?task_id=fx-echo-0');
    expect(old.body).toMatchObject({ result: { protocolVersion: MCP_PROTOCOL_VERSIONS[0] } });
    await fetch(`${s.url}/mcp`, { method: 'DELETE', headers: { ...auth, 'mcp-session-id': old.headers.get('mcp-session-id')! } });

    expect((await post(s.url, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { 'mcp-session-id': 'no-such-session' })).status).toBe(404);
    expect((await fetch(`${s.url}/mcp`, { headers: { ...auth, accept: 'text/event-stream' } })).status).toBe(405);

    const foreign = await post(s.url, init(), { origin: 'http://evil.example' }, '/mcp?task_id=fx-echo-0');
    expect(foreign.status).toBe(403);
    expect(JSON.stringify(foreign.body)).toContain('--allowed-origins');
    // the dialect is guarded too
    expect((await post(s.url, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { origin: 'http://evil.example' })).status).toBe(403);
    // loopback pages and listed origins pass
    const listed = await post(s.url, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { origin: 'https://agents.example.com' });
    expect(listed.status).toBe(200);
    expect((await post(s.url, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { origin: 'http://localhost:5173' })).status).toBe(200);

    const noToken = await fetch(`${s.url}/mcp?task_id=fx-echo-0`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(init()),
    });
    expect(noToken.status).toBe(401);
    // bad task choices are answered at initialize, and nothing is deployed
    const badTask = await post(s.url, init(), {}, '/mcp?task_id=no-such-task');
    expect(badTask.status).toBe(200);
    expect(badTask.body).toMatchObject({ error: { code: -32602 } });
    expect(badTask.headers.get('mcp-session-id')).toBeNull();
    await waitFor(() => s.sandbox.live().length === 0, 10_000, 'no env left');
  });

  it("OpenEnv's dialect is unchanged beside it: no initialize, no session header", async () => {
    const created = await post(s.url, { jsonrpc: '2.0', id: 7, method: 'openenv/session/create', params: { task_id: 'fx-echo-2' } });
    expect(created.status).toBe(200);
    expect(created.headers.get('mcp-session-id')).toBeNull();
    const sid = (created.body as { result: { session_id: string } }).result.session_id;
    const called = await post(s.url, {
      jsonrpc: '2.0',
      id: 8,
      method: 'tools/call',
      params: { session_id: sid, name: 'finish_now', arguments: { score: 0.25 } },
    });
    expect(called.body).toMatchObject({ result: { done: true, reward: 0.25, is_error: false } });
    expect((await post(s.url, {})).body).toMatchObject({ jsonrpc: '2.0', error: { code: -32600 } });
    await waitFor(() => s.sandbox.live().length === 0, 10_000, 'no env left');
  });
});

describe('standard MCP sessions wait in the queue and idle out like every episode', () => {
  const s = processSuiteServer({ maxConcurrentEnvs: 1, idleTimeout: 1, toolTimeout: 1 });
  const episodes = async () => (await (await fetch(`${s.url}/episodes`)).json()) as { active: { episode_id: string }[]; waiting: number };

  it('an initialize waits for a slot (FIFO); a session idle past --idle-timeout ends (404) and frees it', async () => {
    const first = await post(s.url, init(), {}, '/mcp?task_id=fx-echo-0');
    const sid = first.headers.get('mcp-session-id')!;
    expect(first.status).toBe(200);
    // a reset that asks to wait less than the slot stays held is refused, with nothing deployed
    expect((await post(s.url, { jsonrpc: '2.0', id: 9, method: 'ping' }, { 'mcp-session-id': sid })).status).toBe(200);
    const refused = await post(s.url, init(), {}, '/mcp?task_id=fx-echo-1&reset_timeout_s=0.2');
    expect(refused.body).toMatchObject({ error: { code: -32000, data: { error: 'capacity_reached' } } });
    const second = post(s.url, init(), {}, '/mcp?task_id=fx-echo-1');
    // pings keep the first session alive (a request resets its idle clock) until the second is queued
    const ping = () => post(s.url, { jsonrpc: '2.0', id: 9, method: 'ping' }, { 'mcp-session-id': sid });
    await waitFor(async () => (await ping()).status === 200 && (await episodes()).waiting === 1, 10_000, 'the second initialize queued');
    // the first session says nothing for 1 s: its episode is torn down and the second gets the slot
    const got = await second;
    expect(got.status).toBe(200);
    expect((got.body as { result: { instructions: string } }).result.instructions).toContain('Echo the word world');
    expect((await post(s.url, { jsonrpc: '2.0', id: 2, method: 'ping' }, { 'mcp-session-id': sid })).status).toBe(404);
    expect((await fetch(`${s.url}/mcp`, { method: 'DELETE', headers: { 'mcp-session-id': got.headers.get('mcp-session-id')! } })).status).toBe(204);
    await waitFor(() => s.sandbox.live().length === 0, 10_000, 'no env left');
  });
});

describe('standard MCP on GridSim (envs as processes)', () => {
  const s = processSuiteServer({ maxConcurrentEnvs: 1 }, { bundle: GRIDSIM, sandbox: { entry: { gridsim: 'app/server.mjs' } } });
  const wiring = readFileSync(join(GRIDSIM, 'tasks/wiring.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { task_id: string; data: { optimal_schedule: number[] }; meta: { wiring: string } });

  it('the official SDK plays the wiring task: the stored optimal schedule scores 1', async () => {
    const task = wiring.find((t) => t.meta.wiring === 'optimal')!;
    const { client, transport } = await sdkClient(s.url, `task_id=${task.task_id}`);
    expect(client.getInstructions()).toContain('You operate one grid-scale battery');
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(['get_situation', 'check_schedule', 'submit_schedule', 'end_turn']);
    const checked = await client.callTool({ name: 'check_schedule', arguments: { schedule: task.data.optimal_schedule } });
    expect(checked.isError).toBe(false);
    const submitted = await client.callTool({ name: 'submit_schedule', arguments: { schedule: task.data.optimal_schedule } });
    expect(submitted.structuredContent).toMatchObject({ done: true, reward: 1, scores: { schedule: 1 }, end_reason: 'finished' });
    await transport.terminateSession();
    await client.close();
    await waitFor(() => s.sandbox.live().length === 0, 10_000, 'env torn down');
  });
});
