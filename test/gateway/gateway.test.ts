/**
 * The model gateway over real HTTP on loopback, against scripted upstreams: forwarding and
 * reassembly for every API (streamed and not), credentials, the door's source check, budgets,
 * upstream failures and stalls within their bounds, size and depth bounds, revocation.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ModelGateway, GatewayError, type Issued } from '../../src/gateway/index.js';
import { anthropicEvents, anthropicMessage, chatChunks, chatCompletion, responsesEvents, sse, startFakeUpstream, type Reply } from './support/fake-upstream.js';
import { LOOPBACK_DOOR, Observed, call, callFrom, openStream, waitUntil } from './support/harness-client.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(script: (r: any) => Reply, limits: Record<string, number> = {}, upstreamExtra: Record<string, unknown> = {}) {
  const up = await startFakeUpstream(script);
  const seen = new Observed();
  const gw = new ModelGateway({
    observer: seen.observer,
    defaultUpstream: { base_url: up.baseUrl, headers: { authorization: 'Bearer upstream-secret', 'x-session': 's-1' }, ...upstreamExtra },
    limits: { port: 0, ...limits },
  });
  cleanups.push(async () => {
    await gw.close();
    await up.close();
  });
  return { up, gw, seen };
}

const chat = (extra: Record<string, unknown> = {}) => ({ model: 'whatever-the-harness-says', messages: [{ role: 'user', content: 'hi' }], ...extra });

describe('issue', () => {
  it('gives the variables harnesses read: the door with /v1 for OpenAI, without for Anthropic, the episode key for both', async () => {
    const { gw } = await setup(() => ({ kind: 'json', body: {} }));
    const a = await gw.issue('ep-a', { door: LOOPBACK_DOOR });
    expect(a.origin).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(a.env).toEqual({ OPENAI_BASE_URL: `${a.origin}/v1`, OPENAI_API_KEY: a.credential, ANTHROPIC_BASE_URL: a.origin, ANTHROPIC_API_KEY: a.credential });
    expect(a.credential).toMatch(/^oeg-[A-Za-z0-9_-]{43}$/);
    const b = await gw.issue('ep-b', { door: LOOPBACK_DOOR });
    expect(b.credential).not.toBe(a.credential);
    expect(b.origin).not.toBe(a.origin);
    expect(JSON.stringify(a.env)).not.toContain('upstream-secret');
    expect(gw.episodes.sort()).toEqual(['ep-a', 'ep-b']);
  });

  it('refuses a second credential for one episode, an upstream it cannot use, and no upstream at all', async () => {
    const { gw } = await setup(() => ({ kind: 'json', body: {} }));
    await gw.issue('ep', { door: LOOPBACK_DOOR });
    await expect(gw.issue('ep', { door: LOOPBACK_DOOR })).rejects.toThrow(/already has a model credential/);
    await expect(gw.issue('x', { door: LOOPBACK_DOOR, upstream: { base_url: 'ftp://host/v1' } })).rejects.toThrow(GatewayError);
    await expect(gw.issue('x', { door: LOOPBACK_DOOR, upstream: { base_url: 'http://h/v1', headers: { 'x-a': 'b\r\nInjected: 1' } } })).rejects.toThrow(
      /CR, LF/,
    );
    await expect(gw.issue('x', { door: LOOPBACK_DOOR, budgets: { calls: 0 } })).rejects.toThrow(/budgets/);
    await expect(gw.issue('x', { door: { address: '127.0.0.1', subnet: '10.0.0.0/24' } })).rejects.toThrow(/not in its subnet/);
    await expect(gw.issue('x', { door: { address: '10.254.254.1', subnet: '10.254.254.0/24' } })).rejects.toThrow(/not an address of this host/);
    expect(gw.episodes).toEqual(['ep']);
    const bare = new ModelGateway({ limits: { port: 0 } });
    await expect(bare.issue('y', { door: LOOPBACK_DOOR })).rejects.toThrow(/no model upstream.*--model-url/);
    await bare.close();
  });
});

describe('forwarding', () => {
  it("a chat call goes to the episode's upstream with the upstream's headers and model, never the harness's key; the record has it all", async () => {
    const { up, gw, seen } = await setup(() => ({ kind: 'json', body: chatCompletion('hello', { usage: [11, 4] }) }), {}, { model: 'policy-7b' });
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR });
    const r = await call(a, '/v1/chat/completions', chat(), { headers: { 'openai-beta': 'x', cookie: 'c=1' } });
    expect(r.status).toBe(200);
    expect(r.body.choices[0].message.content).toBe('hello');
    expect(r.headers['x-request-id']).toBe('req-fake');
    const got = up.received[0]!;
    expect(got.path).toBe('/v1/chat/completions');
    expect(got.headers.authorization).toBe('Bearer upstream-secret');
    expect(got.headers['x-session']).toBe('s-1');
    expect(got.headers['openai-beta']).toBe('x');
    expect(got.headers.cookie).toBeUndefined();
    expect(JSON.stringify(got.headers)).not.toContain(a.credential);
    expect(got.body.model).toBe('policy-7b');
    const rec = seen.last('ep');
    expect(rec).toMatchObject({ seq: 1, api: 'openai.chat', status: 200, outcome: 'ok', stream: false, upstream_status: 200, refusal: null, error: null });
    expect(rec.usage).toEqual({ input_tokens: 11, output_tokens: 4, total_tokens: 15 });
    expect((rec.request as any).model).toBe('policy-7b');
    expect((rec.response as any).choices[0].message.content).toBe('hello');
    expect(rec.latency_ms).toBeGreaterThanOrEqual(0);
    expect(gw.use('ep')).toMatchObject({ calls: 1, tokens: 15, in_flight: 0, ended: null });
  });

  it('a streamed chat call reaches the harness chunk by chunk, before the upstream has finished; the record puts text and tool calls back together', async () => {
    const tool = { id: 'call_1', name: 'bash', arguments: '{"command":"ls -la /tmp"}' };
    const { up, gw, seen } = await setup(() => ({
      kind: 'sse',
      events: chatChunks(['Hel', 'lo ', 'there'], { toolCalls: [tool], usage: [20, 9] }),
      holdAfter: 2,
    }));
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR });
    const s = await openStream(a, '/v1/chat/completions', chat({ stream: true }));
    expect(s.status).toBe(200);
    // the upstream holds after two events: the harness already has the first piece
    await s.until('"Hel"');
    expect(up.openResponses()).toBe(1);
    expect(seen.of('ep')).toHaveLength(0);
    up.release();
    const text = await s.done;
    expect(text).toContain('data: [DONE]');
    expect(up.received[0]!.body.stream_options).toEqual({ include_usage: true });
    const rec = seen.last('ep');
    expect(rec).toMatchObject({ api: 'openai.chat', stream: true, outcome: 'ok', status: 200 });
    const msg = (rec.response as any).choices[0];
    expect(msg.message.content).toBe('Hello there');
    expect(msg.message.tool_calls).toEqual([{ id: 'call_1', type: 'function', function: { name: 'bash', arguments: tool.arguments } }]);
    expect(msg.finish_reason).toBe('tool_calls');
    expect(rec.usage).toEqual({ input_tokens: 20, output_tokens: 9, total_tokens: 29 });
    expect(rec.first_byte_ms).not.toBeNull();
  });

  it('a harness that declined the usage chunk: it is asked for upstream all the same, counted, and not given to the harness', async () => {
    const { up, gw, seen } = await setup(() => ({ kind: 'sse', events: chatChunks(['x'], { usage: [3, 4] }) }));
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR });
    const text = await (await openStream(a, '/v1/chat/completions', chat({ stream: true, stream_options: { include_usage: false } }))).done;
    expect(up.received[0]!.body.stream_options).toEqual({ include_usage: true });
    expect(text).not.toContain('"usage"');
    expect(text).toContain('data: [DONE]');
    expect(seen.last('ep')).toMatchObject({ usage: { input_tokens: 3, output_tokens: 4, total_tokens: 7 }, usage_estimated: false });
  });

  it('Anthropic messages, keyed with x-api-key: whole and streamed (text and a tool_use input put back together)', async () => {
    let n = 0;
    const tool = { id: 'toolu_1', name: 'bash', input: { command: 'cat /etc/hostname' } };
    const { up, gw, seen } = await setup(() =>
      n++ === 0 ? { kind: 'json', body: anthropicMessage('plain', [30, 6]) } : { kind: 'sse', events: anthropicEvents(['Str', 'eamed'], tool, [40, 8]) },
    );
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR });
    const body = { model: 'claude-x', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] };
    const r = await call(a, '/v1/messages', body, { key: null, headers: { 'x-api-key': a.credential, 'anthropic-version': '2023-06-01' } });
    expect(r.status).toBe(200);
    expect(r.body.content[0].text).toBe('plain');
    expect(up.received[0]!.path).toBe('/v1/messages');
    expect(up.received[0]!.headers['anthropic-version']).toBe('2023-06-01');
    expect(up.received[0]!.headers['x-api-key']).toBeUndefined();
    expect(seen.last('ep').usage).toEqual({ input_tokens: 30, output_tokens: 6, total_tokens: 36 });
    const s = await openStream(a, '/v1/messages', { ...body, stream: true }, { authorization: '', 'x-api-key': a.credential });
    const text = await s.done;
    expect(text).toContain('event: message_stop');
    const rec = seen.last('ep');
    expect(rec).toMatchObject({ api: 'anthropic.messages', stream: true, outcome: 'ok' });
    expect((rec.response as any).content).toEqual([
      { type: 'text', text: 'Streamed' },
      { type: 'tool_use', id: 'toolu_1', name: 'bash', input: tool.input },
    ]);
    expect((rec.response as any).stop_reason).toBe('tool_use');
    expect(rec.usage).toEqual({ input_tokens: 40, output_tokens: 8, total_tokens: 48 });
  });

  it('OpenAI responses, streamed: the record is the final response', async () => {
    const { up, gw, seen } = await setup(() => ({ kind: 'sse', events: responsesEvents('done!') }));
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR });
    await (
      await openStream(a, '/v1/responses', { model: 'm', input: 'hi', stream: true })
    ).done;
    expect(up.received[0]!.path).toBe('/v1/responses');
    const rec = seen.last('ep');
    expect(rec).toMatchObject({ api: 'openai.responses', outcome: 'ok' });
    expect((rec.response as any).output[0].content[0].text).toBe('done!');
    expect(rec.usage).toEqual({ input_tokens: 8, output_tokens: 3, total_tokens: 11 });
  });

  it("GET /v1/models: the episode's model when the server names one, else the upstream's list; neither counts as a model call", async () => {
    const { up, gw } = await setup(() => ({ kind: 'json', body: { object: 'list', data: [{ id: 'up-model', object: 'model' }] } }));
    const a = await gw.issue('named', { door: LOOPBACK_DOOR, upstream: { base_url: up.baseUrl, model: 'policy' }, budgets: { calls: 1 } });
    const named = await call(a, '/v1/models');
    expect(named.body.data.map((m: any) => m.id)).toEqual(['policy']);
    expect(up.received).toHaveLength(0);
    const b = await gw.issue('listed', { door: LOOPBACK_DOOR });
    const listed = await call(b, '/v1/models');
    expect(listed.body.data[0].id).toBe('up-model');
    expect(up.received[0]!.path).toBe('/v1/models');
    expect(gw.use('named')!.calls).toBe(0);
    expect(gw.use('listed')!.calls).toBe(0);
  });

  it('a 4xx of the upstream goes back to the harness as it was, and the episode goes on', async () => {
    let n = 0;
    const { gw, seen } = await setup(() =>
      n++ === 0 ? { kind: 'json', status: 400, body: { error: { message: 'context too long' } } } : { kind: 'json', body: chatCompletion('ok') },
    );
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR });
    const r = await call(a, '/v1/chat/completions', chat());
    expect(r.status).toBe(400);
    expect(r.body.error.message).toBe('context too long');
    expect(seen.last('ep')).toMatchObject({ outcome: 'upstream_rejected', status: 400 });
    expect((await call(a, '/v1/chat/completions', chat())).status).toBe(200);
    expect(seen.ends).toEqual([]);
  });
});

describe('credentials and the door', () => {
  it("refuses no key, a wrong key, and another episode's key; each refusal is recorded and nothing reaches the upstream", async () => {
    const { up, gw, seen } = await setup(() => ({ kind: 'json', body: chatCompletion('x') }));
    const a = await gw.issue('ep-a', { door: LOOPBACK_DOOR });
    const b = await gw.issue('ep-b', { door: LOOPBACK_DOOR });
    for (const key of [null, 'oeg-wrong', b.credential, a.credential.slice(0, -1), `${a.credential}x`]) {
      const r = await call(a, '/v1/chat/completions', chat(), { key });
      expect(r.status, String(key)).toBe(401);
      expect(r.body.error.code).toBe('unauthorized');
    }
    // b's key is good on b's door only
    expect((await call({ ...a, credential: b.credential } as Issued, '/v1/models')).status).toBe(401);
    expect((await call(b, '/v1/models')).status).toBe(200);
    expect(up.received.filter((r) => r.path.includes('chat'))).toHaveLength(0);
    expect(seen.of('ep-a').every((r) => r.outcome === 'refused' && r.refusal === 'unauthorized' && r.request === null)).toBe(true);
    expect(seen.of('ep-a')).toHaveLength(6);
  });

  it('Anthropic-shaped refusals on the messages path', async () => {
    const { gw } = await setup(() => ({ kind: 'json', body: {} }));
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR });
    const r = await call(a, '/v1/messages', { messages: [] }, { key: 'nope' });
    expect(r.status).toBe(401);
    expect(r.body).toEqual({ type: 'error', error: { type: 'unauthorized', message: expect.any(String) } });
  });

  it("drops a connection from outside the door's subnet before reading it", async () => {
    const { gw } = await setup(() => ({ kind: 'json', body: { data: [] } }));
    const a = await gw.issue('ep', { door: { address: '127.0.0.1', subnet: '127.0.0.0/30' } });
    expect(await callFrom('127.0.0.2', a, '/v1/models')).toEqual({ status: 200 });
    const outside = await callFrom('127.0.0.9', a, '/v1/models');
    expect(outside).toHaveProperty('error');
  });

  it('a revoked credential: its door is closed, and calls in flight are cut short and recorded before revoke resolves', async () => {
    const { up, gw, seen } = await setup(() => ({ kind: 'hang' }));
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR });
    const pending = call(a, '/v1/chat/completions', chat());
    await up.receivedN(1);
    await gw.revoke('ep');
    expect(seen.last('ep')).toMatchObject({ outcome: 'cut_short', refusal: 'episode_ended' });
    const r = await pending.catch((e: Error) => e);
    expect(r instanceof Error || (r as any).status === 410).toBe(true);
    await waitUntil(() => up.openResponses() === 0, 5000, "the upstream's request to be closed");
    await expect(call(a, '/v1/models')).rejects.toThrow();
    expect(gw.use('ep')).toBeNull();
    expect(seen.ends).toEqual([]);
    await gw.revoke('ep'); // idempotent
  });

  it("a door that takes the harness's own key (harnessKey forward): admitted by source, the key goes upstream as its bearer, never the episode's credential", async () => {
    const { up, gw, seen } = await setup(() => ({ kind: 'json', body: chatCompletion('x') }), {}, { headers: { 'x-session': 's-1' } });
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR, harnessKey: 'forward' });
    expect((await call(a, '/v1/chat/completions', chat(), { key: 'cagent-task-1-0' })).status).toBe(200);
    expect((await call(a, '/v1/chat/completions', chat(), { key: null, headers: { 'x-api-key': 'cagent-task-2-0' } })).status).toBe(200);
    expect((await call(a, '/v1/chat/completions', chat())).status).toBe(200);
    expect((await call(a, '/v1/chat/completions', chat(), { key: null })).status).toBe(200);
    expect(up.received.map((r) => r.headers.authorization ?? null)).toEqual(['Bearer cagent-task-1-0', 'Bearer cagent-task-2-0', null, null]);
    // the upstream's own headers go as well
    expect(up.received.every((r) => r.headers['x-session'] === 's-1')).toBe(true);
    expect(JSON.stringify(up.received.map((r) => r.headers))).not.toContain(a.credential);
    // a key no upstream could be given is refused at the door
    expect((await call(a, '/v1/chat/completions', chat(), { key: null, headers: { 'x-api-key': 'x'.repeat(5000) } })).status).toBe(401);
    expect(up.received).toHaveLength(4);
    expect(seen.of('ep').map((r) => r.outcome)).toEqual(['ok', 'ok', 'ok', 'ok', 'refused']);
    // and still only from its subnet
    const narrow = await gw.issue('narrow', { door: { address: '127.0.0.1', subnet: '127.0.0.0/30' }, harnessKey: 'forward' });
    expect(await callFrom('127.0.0.9', narrow, '/v1/models')).toHaveProperty('error');
    // without it, a harness's key of its own is refused and nothing goes upstream
    const b = await gw.issue('ep-b', { door: LOOPBACK_DOOR });
    expect((await call(b, '/v1/chat/completions', chat(), { key: 'cagent-task-1-0' })).status).toBe(401);
    expect(up.received).toHaveLength(4);
  });

  it("Anthropic's count_tokens (what Claude Code asks before a turn) goes upstream, recorded, and counts against no budget", async () => {
    const { up, gw, seen } = await setup((r) => ({
      kind: 'json',
      body: r.path.endsWith('count_tokens') ? { input_tokens: 12 } : anthropicMessage('m', [5, 5]),
    }));
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR, budgets: { calls: 1, tokens: 20 } });
    const body = { model: 'claude-x', messages: [{ role: 'user', content: 'hi' }] };
    for (let i = 0; i < 3; i++) {
      const r = await call(a, '/v1/messages/count_tokens', body, { key: null, headers: { 'x-api-key': a.credential } });
      expect(r).toMatchObject({ status: 200, body: { input_tokens: 12 } });
    }
    expect((await call(a, '/v1/messages', { ...body, max_tokens: 5 })).status).toBe(200);
    expect(up.received.map((r) => r.path)).toEqual([...Array(3).fill('/v1/messages/count_tokens'), '/v1/messages']);
    expect(seen.of('ep').map((r) => [r.api, r.outcome, r.usage])).toEqual([
      ...Array(3).fill(['anthropic.count_tokens', 'ok', null]),
      ['anthropic.messages', 'ok', { input_tokens: 5, output_tokens: 5, total_tokens: 10 }],
    ]);
    expect(gw.use('ep')).toMatchObject({ calls: 1, tokens: 10, ended: null });
    expect((await call(a, '/v1/messages/count_tokens', body, { key: 'nope' })).status).toBe(401);
  });

  it('paths the gateway does not serve: 404 naming what it serves', async () => {
    const { gw } = await setup(() => ({ kind: 'json', body: {} }));
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR });
    const r = await call(a, '/v1/embeddings', { input: 'x' });
    expect(r.status).toBe(404);
    expect(r.body.error.message).toContain('POST /v1/chat/completions');
    expect((await call(a, '/health')).status).toBe(404);
  });
});

describe('budgets', () => {
  it('calls: the call past the budget is refused with model_calls_exhausted, reported once, and so is every later one', async () => {
    const { up, gw, seen } = await setup(() => ({ kind: 'json', body: chatCompletion('x') }));
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR, budgets: { calls: 2 } });
    expect((await call(a, '/v1/chat/completions', chat())).status).toBe(200);
    expect((await call(a, '/v1/chat/completions', chat())).status).toBe(200);
    expect(seen.ends).toEqual([]);
    const third = await call(a, '/v1/chat/completions', chat());
    expect(third.status).toBe(429);
    expect(third.headers['x-should-retry']).toBe('false');
    expect(third.body.error.code).toBe('model_calls_exhausted');
    expect((await call(a, '/v1/chat/completions', chat())).body.error.code).toBe('model_calls_exhausted');
    expect(seen.endsOf('ep')).toEqual([{ reason: 'model_calls_exhausted', message: expect.stringContaining('budget of 2') }]);
    expect(up.received).toHaveLength(2);
  });

  it('tokens: the call that goes past the budget completes, the episode ends with model_tokens_exhausted, the next is refused', async () => {
    const { up, gw, seen } = await setup(() => ({ kind: 'json', body: chatCompletion('x', { usage: [10, 7] }) }));
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR, budgets: { tokens: 25 } });
    expect((await call(a, '/v1/chat/completions', chat())).status).toBe(200);
    expect(seen.ends).toEqual([]);
    expect((await call(a, '/v1/chat/completions', chat())).status).toBe(200);
    expect(seen.endsOf('ep')).toEqual([{ reason: 'model_tokens_exhausted', message: expect.stringContaining('34 tokens') }]);
    expect((await call(a, '/v1/chat/completions', chat())).status).toBe(429);
    expect(up.received).toHaveLength(2);
    // the end comes after the record of the call that caused it
    const order = [...seen.records.map((r) => `call ${r.seq}`)];
    expect(order).toEqual(['call 1', 'call 2', 'call 3']);
  });

  it('wall time: ends model access when it passes, with no call needed, and cuts a call in flight short', async () => {
    const { up, gw, seen } = await setup(() => ({ kind: 'hang' }));
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR, budgets: { wall_time_s: 0.4 } });
    const idle = await gw.issue('idle', { door: LOOPBACK_DOOR, budgets: { wall_time_s: 0.2 } });
    const t0 = Date.now();
    const r = await call(a, '/v1/chat/completions', chat());
    expect(Date.now() - t0).toBeLessThan(3000);
    expect(r.status).toBe(429);
    expect(r.body.error.code).toBe('model_time_exhausted');
    expect(seen.last('ep')).toMatchObject({ outcome: 'cut_short', refusal: 'model_time_exhausted' });
    expect(seen.endsOf('ep').map((e) => e.reason)).toEqual(['model_time_exhausted']);
    expect(seen.endsOf('idle').map((e) => e.reason)).toEqual(['model_time_exhausted']);
    expect((await call(idle, '/v1/chat/completions', chat())).status).toBe(429);
    await waitUntil(() => up.openResponses() === 0, 5000, "the upstream's request to be closed");
  });

  it('calls in flight at once are bounded per episode (busy), and another episode is not held by it', async () => {
    const { up, gw } = await setup((r) => (r.body.messages[0].content === 'hang' ? { kind: 'hang' } : { kind: 'json', body: chatCompletion('x') }), {
      maxInFlight: 2,
    });
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR });
    const b = await gw.issue('other', { door: LOOPBACK_DOOR });
    const hanging = [
      call(a, '/v1/chat/completions', chat({ messages: [{ role: 'user', content: 'hang' }] })),
      call(a, '/v1/chat/completions', chat({ messages: [{ role: 'user', content: 'hang' }] })),
    ];
    await up.receivedN(2);
    const third = await call(a, '/v1/chat/completions', chat());
    expect(third.status).toBe(429);
    expect(third.body.error.code).toBe('busy');
    expect((await call(b, '/v1/chat/completions', chat())).status).toBe(200);
    await gw.revoke('ep');
    await Promise.allSettled(hanging);
  });
});

describe('an upstream that fails or stalls: a named end within its bound, never a hang', () => {
  it('a 500: the harness gets 502 (no retry), the episode ends model_upstream_error, the next call is refused, another episode goes on', async () => {
    const { up, gw, seen } = await setup((r) =>
      r.headers['x-session'] === 'bad' ? { kind: 'json', status: 500, body: { error: 'boom' } } : { kind: 'json', body: chatCompletion('fine') },
    );
    const a = await gw.issue('bad', { door: LOOPBACK_DOOR, upstream: { base_url: up.baseUrl, headers: { 'x-session': 'bad' } } });
    const b = await gw.issue('good', { door: LOOPBACK_DOOR });
    const r = await call(a, '/v1/chat/completions', chat());
    expect(r.status).toBe(502);
    expect(r.headers['x-should-retry']).toBe('false');
    expect(r.body.error.message).toContain('answered 500');
    expect(seen.last('bad')).toMatchObject({ outcome: 'upstream_error', upstream_status: 500, status: 502 });
    expect(seen.endsOf('bad').map((e) => e.reason)).toEqual(['model_upstream_error']);
    expect((await call(a, '/v1/chat/completions', chat())).status).toBe(502);
    expect(up.received.filter((x) => x.headers['x-session'] === 'bad')).toHaveLength(1);
    expect((await call(b, '/v1/chat/completions', chat())).status).toBe(200);
    expect(seen.endsOf('good')).toEqual([]);
  });

  it('an upstream that never answers: 504 once the call bound passes, model_upstream_timeout', async () => {
    const { up, gw, seen } = await setup(() => ({ kind: 'hang' }), { callTimeoutMs: 300 });
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR });
    const t0 = Date.now();
    const r = await call(a, '/v1/chat/completions', chat());
    const took = Date.now() - t0;
    expect(r.status).toBe(504);
    expect(took).toBeGreaterThanOrEqual(290);
    expect(took).toBeLessThan(5000);
    expect(seen.endsOf('ep').map((e) => e.reason)).toEqual(['model_upstream_timeout']);
    await waitUntil(() => up.openResponses() === 0, 5000, "the upstream's request to be closed");
  });

  it('a stream that stalls: the harness gets what came, then an error event and the end; model_upstream_timeout', async () => {
    const { gw, seen } = await setup(() => ({ kind: 'sse', events: chatChunks(['partial']).slice(0, 2), then: 'hang' }), { streamIdleMs: 250 });
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR });
    const s = await openStream(a, '/v1/chat/completions', chat({ stream: true }));
    const text = await s.done;
    expect(text).toContain('"partial"');
    expect(text).toContain('model_upstream_timeout');
    const rec = seen.last('ep');
    expect(rec).toMatchObject({ outcome: 'upstream_timeout', stream: true });
    expect((rec.response as any).choices[0].message.content).toBe('partial');
    expect(seen.endsOf('ep').map((e) => e.reason)).toEqual(['model_upstream_timeout']);
  });

  it('a stream the upstream drops midway, and an error event inside a stream: model_upstream_error', async () => {
    let n = 0;
    const { gw, seen } = await setup(() =>
      n++ === 0
        ? { kind: 'sse', events: chatChunks(['a']).slice(0, 2), then: 'drop' }
        : {
            kind: 'sse',
            events: [
              ...anthropicEvents(['x']).slice(0, 3),
              'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n',
            ],
          },
    );
    const a = await gw.issue('drop', { door: LOOPBACK_DOOR });
    expect(await (await openStream(a, '/v1/chat/completions', chat({ stream: true }))).done).toContain('model_upstream_error');
    expect(seen.last('drop').outcome).toBe('upstream_error');
    const b = await gw.issue('err', { door: LOOPBACK_DOOR });
    await (
      await openStream(b, '/v1/messages', { messages: [], stream: true })
    ).done;
    expect(seen.last('err')).toMatchObject({ outcome: 'upstream_error', error: expect.stringContaining('Overloaded') });
    expect(seen.ends.map((e) => e.end.reason)).toEqual(['model_upstream_error', 'model_upstream_error']);
  });

  it('an upstream nobody listens on, and one that drops the connection: 502, model_upstream_error', async () => {
    const { up, gw, seen } = await setup(() => ({ kind: 'drop' }));
    const a = await gw.issue('closed', { door: LOOPBACK_DOOR, upstream: { base_url: 'http://127.0.0.1:1/v1' } });
    const r = await call(a, '/v1/chat/completions', chat());
    expect(r.status).toBe(502);
    expect(r.body.error.message).toContain('could not be reached');
    const b = await gw.issue('dropped', { door: LOOPBACK_DOOR, upstream: { base_url: up.baseUrl } });
    expect((await call(b, '/v1/chat/completions', chat())).status).toBe(502);
    expect(seen.ends.map((e) => e.end.reason)).toEqual(['model_upstream_error', 'model_upstream_error']);
  });

  it('a huge reply, whole or streamed (events past the stream bound, or one endless line): cut at its bound, 502 or an error event, model_upstream_error', async () => {
    const piece = sse({ choices: [{ index: 0, delta: { content: 'x'.repeat(80) } }] });
    const replies: Reply[] = [
      { kind: 'bytes', contentType: 'application/json', size: 4 * 1024 * 1024 },
      { kind: 'sse', events: Array(10_000).fill(piece) },
      { kind: 'bytes', contentType: 'text/event-stream', size: 4 * 1024 * 1024 },
    ];
    let n = 0;
    const { gw, seen } = await setup(() => replies[n++]!, { maxResponseBytes: 256 * 1024, maxStreamBytes: 512 * 1024 });
    const a = await gw.issue('whole', { door: LOOPBACK_DOOR });
    const r = await call(a, '/v1/chat/completions', chat());
    expect(r.status).toBe(502);
    expect(r.body.error.message).toContain('larger than 262144 bytes');
    // a stream is passed on up to its own bound (longer than a whole reply's), then cut
    const b = await gw.issue('streamed', { door: LOOPBACK_DOOR });
    const text = await (await openStream(b, '/v1/chat/completions', chat({ stream: true }))).done;
    expect(text.length).toBeGreaterThan(400 * 1024);
    expect(text.length).toBeLessThan(600 * 1024);
    expect(text).toContain('longer than 524288 bytes');
    expect(((seen.last('streamed').response as any).choices[0].message.content as string).length).toBeGreaterThan(300 * 1024);
    const c = await gw.issue('one-line', { door: LOOPBACK_DOOR });
    const line = await (await openStream(c, '/v1/chat/completions', chat({ stream: true }))).done;
    expect(line.length).toBeLessThan(400 * 1024);
    expect(line).toContain('a line of the stream is longer than 262144 characters');
    expect(seen.ends.map((e) => e.end.reason)).toEqual(['model_upstream_error', 'model_upstream_error', 'model_upstream_error']);
  });

  it('a 2xx whose body is not JSON: 502, model_upstream_error', async () => {
    const { gw, seen } = await setup(() => ({ kind: 'bytes', contentType: 'text/html', size: 100 }));
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR });
    expect((await call(a, '/v1/chat/completions', chat())).status).toBe(502);
    expect(seen.last('ep')).toMatchObject({ outcome: 'upstream_error', response: { text: 'a'.repeat(100) } });
  });
});

describe('bounded input (model-written)', () => {
  it('a body too large, nested too deep, not JSON, or not an object: refused with a clear error; the episode goes on', async () => {
    const { up, gw, seen } = await setup(() => ({ kind: 'json', body: chatCompletion('ok') }), { maxRequestBytes: 64 * 1024, maxJsonDepth: 16 });
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR });
    const big = await call(a, '/v1/chat/completions', chat({ messages: [{ role: 'user', content: 'x'.repeat(100 * 1024) }] }));
    expect(big.status).toBe(413);
    const deep = await call(a, '/v1/chat/completions', `{"messages":${'['.repeat(40)}${']'.repeat(40)}}`);
    expect(deep.status).toBe(400);
    expect(deep.body.error.message).toContain('deeper than 16');
    // brackets inside strings are text, not nesting
    const inString = await call(a, '/v1/chat/completions', chat({ messages: [{ role: 'user', content: '['.repeat(100) }] }));
    expect(inString.status).toBe(200);
    expect((await call(a, '/v1/chat/completions', '{"model":')).status).toBe(400);
    expect((await call(a, '/v1/chat/completions', '[1,2]')).body.error.message).toContain('JSON object');
    expect((await call(a, '/v1/chat/completions', chat())).status).toBe(200);
    expect(up.received).toHaveLength(2);
    expect(seen.ends).toEqual([]);
    expect(gw.use('ep')!.calls).toBe(2);
  });

  it('a harness that hangs up mid-stream: the upstream call is closed once the bound to read on passes, recorded client_gone, the episode goes on', async () => {
    const { up, gw, seen } = await setup(() => ({ kind: 'sse', events: chatChunks(['one', 'two']), holdAfter: 2 }), { hangUpDrainMs: 200 });
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR });
    const s = await openStream(a, '/v1/chat/completions', chat({ stream: true }));
    await s.until('"one"');
    s.cancel();
    await waitUntil(() => seen.of('ep').length === 1, 5000, 'the record');
    expect(seen.last('ep').outcome).toBe('client_gone');
    await waitUntil(() => up.openResponses() === 0, 5000, "the upstream's request to be closed");
    expect(seen.ends).toEqual([]);
  });
});
