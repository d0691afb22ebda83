/**
 * The gateway served by the server, on the fast layer (envs as child processes, their door on the
 * loopback address): an env's model calls with the credential it was given at deploy, whole and
 * streamed, to the server's upstream (its key added upstream, never in the env) or to the one its
 * reset named (with that reset's headers); each call in the episode's transcript and --record;
 * another episode's credential and none refused; each budget and a hung upstream ending the
 * episode with its reason; the credential revoked once the episode ends; the reset's model fields
 * refused by a server without a gateway.
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WsClient } from '../../scripts/lib/ws-client.js';
import { waitFor } from '../../scripts/lib/wait.js';
import { capBudgets, ModelAccess } from '../../src/episodes/model-access.js';
import { ModelGateway } from '../../src/gateway/index.js';
import { startProcessServer, type ProcessServer } from '../support/process-server.js';
import { chatChunks, chatCompletion, startFakeUpstream, type FakeUpstream, type Received } from './support/fake-upstream.js';

const MODEL_BUNDLE = fileURLToPath(new URL('../fixtures/model-v1', import.meta.url));
const UPSTREAM_KEY = 'sk-upstream-secret-123';

/** the upstream's script: "hang" hangs, a streamed call gets chunks, any other a whole reply; `usage` per call */
function script(r: Received) {
  const prompt = JSON.stringify(r.body?.messages ?? '');
  if (prompt.includes('hang')) return { kind: 'hang' as const };
  const usage: [number, number] = prompt.includes('big') ? [40, 10] : [10, 7];
  if (r.body?.stream) return { kind: 'sse' as const, events: chatChunks(['stre', 'amed ', 'reply'], { usage }) };
  return { kind: 'json' as const, body: chatCompletion(`whole reply to ${r.body?.messages?.[0]?.content}`, { usage }) };
}

async function transcript(s: ProcessServer, id: string): Promise<any> {
  return (await fetch(`${s.url}/console/episodes/${id}`)).json();
}

/** a fresh episode on its own connection: its id and its gateway variables */
async function episode(s: ProcessServer, data: Record<string, unknown> = {}) {
  const c = await WsClient.open(s.url);
  const reset = await c.reset({ task_id: 'ask-0', ...data });
  expect(reset.type, JSON.stringify(reset)).toBe('observation');
  const id = reset.data.observation.episode_id as string;
  return { c, id, vars: resultOf(await c.call('whoami')) };
}

/** what a tool of the model fixture answered (its structured result) */
const resultOf = (frame: any) => frame.data.observation.result?.data;

describe('the gateway served', () => {
  let upstream: FakeUpstream;
  let perReset: FakeUpstream;
  let s: ProcessServer;
  const record = mkdtempSync(join(tmpdir(), 'gw-served-'));

  beforeAll(async () => {
    upstream = await startFakeUpstream(script);
    perReset = await startFakeUpstream(script);
    process.env.GW_SERVED_UPSTREAM_KEY = UPSTREAM_KEY;
    s = await startProcessServer(
      {
        modelUrl: upstream.baseUrl,
        model: 'policy',
        modelKeyEnv: 'GW_SERVED_UPSTREAM_KEY',
        modelFromReset: true,
        gatewayPort: 0,
        modelCallTimeout: 2,
        record,
      },
      { bundle: MODEL_BUNDLE },
    );
  });
  afterAll(async () => {
    await s?.stop();
    await upstream?.close();
    await perReset?.close();
    delete process.env.GW_SERVED_UPSTREAM_KEY;
  });

  it("gives each env its door and credential, and forwards its calls, whole and streamed, with the server's key upstream", async () => {
    const { c, id, vars } = await episode(s);
    expect(vars.OPENAI_BASE_URL).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    expect(vars.ANTHROPIC_BASE_URL).toBe(vars.OPENAI_BASE_URL.replace(/\/v1$/, ''));
    expect(vars.OPENAI_API_KEY).toMatch(/^oeg-/);
    expect(vars.ANTHROPIC_API_KEY).toBe(vars.OPENAI_API_KEY);
    expect(JSON.stringify(vars)).not.toContain(UPSTREAM_KEY);

    const before = upstream.received.length;
    const whole = resultOf(await c.call('ask', { prompt: 'one' }));
    expect(whole).toMatchObject({ status: 200, text: 'whole reply to one' });
    const streamed = resultOf(await c.call('ask', { prompt: 'two', stream: true }));
    expect(streamed).toMatchObject({ status: 200, text: 'streamed reply' });
    const got = upstream.received.slice(before);
    expect(got.map((r) => r.path)).toEqual(['/v1/chat/completions', '/v1/chat/completions']);
    for (const r of got) {
      expect(r.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
      expect(r.body.model).toBe('policy');
      expect(JSON.stringify(r.headers)).not.toContain(vars.OPENAI_API_KEY);
    }

    const t = await transcript(s, id);
    const calls = t.events.filter((e: any) => e.kind === 'model_call');
    expect(calls).toHaveLength(2);
    expect(calls[0]).toMatchObject({
      seq: 1,
      api: 'openai.chat',
      stream: false,
      status: 200,
      upstream_status: 200,
      outcome: 'ok',
      usage: { total_tokens: 17 },
    });
    expect(calls[0].request).toMatchObject({ model: 'policy', messages: [{ role: 'user', content: 'one' }] });
    expect(calls[0].response.choices[0].message.content).toBe('whole reply to one');
    expect(calls[1]).toMatchObject({ seq: 2, stream: true, status: 200, outcome: 'ok', usage: { input_tokens: 10, output_tokens: 7 } });
    expect(JSON.stringify(calls[1].response)).toContain('streamed reply');
    expect(calls[1].latency_ms).toBeGreaterThanOrEqual(0);
    expect(JSON.stringify(t)).not.toContain(UPSTREAM_KEY);

    await c.call('finish_now', { score: 1 });
    await c.close();
    // the ended episode's transcript, model calls and all, is in --record
    await waitFor(() => readdirSync(record).some((f) => readFileSync(join(record, f), 'utf8').includes(id)), 10_000, 'the record');
    const line = readdirSync(record)
      .flatMap((f) => readFileSync(join(record, f), 'utf8').split('\n'))
      .find((l) => l.includes(id))!;
    expect(JSON.parse(line).events.filter((e: any) => e.kind === 'model_call')).toHaveLength(2);
    // revoked with its episode: the door is closed
    await waitFor(() => !s.app.openenv.modelAccess!.gateway.episodes.includes(id), 10_000, 'the credential revoked');
    await expect(fetch(`${vars.OPENAI_BASE_URL}/models`, { headers: { authorization: `Bearer ${vars.OPENAI_API_KEY}` } })).rejects.toThrow();
  });

  it("sends a reset's own upstream its headers, which never reach the env or the transcript", async () => {
    const { c, id, vars } = await episode(s, { model: { base_url: perReset.baseUrl, headers: { 'x-session': 'rollout-7' } } });
    expect(JSON.stringify(vars)).not.toContain('rollout-7');
    expect(resultOf(await c.call('ask', { prompt: 'mine' }))).toMatchObject({ status: 200, text: 'whole reply to mine' });
    const r = perReset.received.at(-1)!;
    expect(r.headers['x-session']).toBe('rollout-7');
    expect(r.headers.authorization).toBeUndefined();
    // --model names the model of a reset's upstream that names none
    expect(r.body.model).toBe('policy');
    expect(JSON.stringify(await transcript(s, id))).not.toContain('rollout-7');
    // a header that frames the request is the gateway's: refused at reset, with where
    const bad = await c.reset({ task_id: 'ask-0', model: { base_url: perReset.baseUrl, headers: { 'Content-Length': '0' } } });
    expect(bad.data).toMatchObject({ code: 'VALIDATION_ERROR' });
    expect(bad.data.message).toMatch(/model\.headers.*frames the request/);
    await c.close();
  });

  it("refuses another episode's credential and none", async () => {
    const a = await episode(s);
    const b = await episode(s);
    const stolen = resultOf(await a.c.call('ask', { prompt: 'x', key: b.vars.OPENAI_API_KEY }));
    expect(stolen.status).toBe(401);
    expect(resultOf(await a.c.call('ask', { prompt: 'x', key: '' })).status).toBe(401);
    // at B's door, A's key is refused too
    expect(resultOf(await a.c.call('ask', { prompt: 'x', base: b.vars.OPENAI_BASE_URL })).status).toBe(401);
    const refused = (await transcript(s, a.id)).events.filter((e: any) => e.kind === 'model_call');
    expect(refused.map((e: any) => [e.status, e.outcome, e.refusal])).toEqual([
      [401, 'refused', 'unauthorized'],
      [401, 'refused', 'unauthorized'],
    ]);
    // both episodes go on
    expect(resultOf(await a.c.call('ask', { prompt: 'fine' })).status).toBe(200);
    await a.c.close();
    await b.c.close();
  });

  const failureOf = async (c: WsClient, until: () => Promise<any>) => {
    let r = await until();
    const deadline = Date.now() + 15_000;
    while (!r.data.done && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 200));
      r = await until();
    }
    expect(r.data.done).toBe(true);
    return r.data.observation.failure;
  };

  it('ends an episode past its calls budget with model_calls_exhausted', async () => {
    const { c, id } = await episode(s, { model_budgets: { calls: 1 } });
    expect(resultOf(await c.call('ask', { prompt: 'first' })).status).toBe(200);
    const second = await c.call('ask', { prompt: 'second' });
    expect(second.data.done).toBe(true);
    expect(second.data.observation.failure).toMatchObject({ reason: 'model_calls_exhausted', phase: 'model' });
    const t = await transcript(s, id);
    expect(t.failure_reason).toBe('model_calls_exhausted');
    expect(t.events.filter((e: any) => e.kind === 'model_call').map((e: any) => e.status)).toEqual([200, 429]);
    await c.close();
  });

  it('ends an episode past its tokens budget with model_tokens_exhausted', async () => {
    const { c } = await episode(s, { model_budgets: { tokens: 30 } });
    // 50 tokens: the call completes, and its total passes the budget
    const r = await c.call('ask', { prompt: 'big' });
    const failure = r.data.done ? r.data.observation.failure : await failureOf(c, () => c.listTools());
    expect(failure).toMatchObject({ reason: 'model_tokens_exhausted', phase: 'model' });
    await c.close();
  });

  it('ends an episode past its wall time with model_time_exhausted, without a call', async () => {
    // no step before the budget may run out (it may do so while the env starts): the first step after it says so
    const c = await WsClient.open(s.url);
    expect((await c.reset({ task_id: 'ask-0', model_budgets: { wall_time_s: 1 } })).type).toBe('observation');
    expect(await failureOf(c, () => c.listTools())).toMatchObject({ reason: 'model_time_exhausted', phase: 'model' });
    await c.close();
  });

  it('ends an episode whose upstream hangs with model_upstream_timeout, in time', async () => {
    const { c } = await episode(s);
    const t0 = Date.now();
    const r = await c.call('ask', { prompt: 'hang' });
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(r.data.done).toBe(true);
    expect(r.data.observation.failure).toMatchObject({ reason: 'model_upstream_timeout', phase: 'model' });
    await c.close();
  });

  it('counts the calls, their time and tokens, and the failures, in /metrics', async () => {
    const text = await (await fetch(`${s.url}/metrics`)).text();
    const value = (line: string) =>
      Number(
        text
          .split('\n')
          .find((l) => l.startsWith(line))
          ?.split(' ')
          .at(-1),
      );
    expect(value('openenv_model_calls_total{outcome="ok"}')).toBeGreaterThanOrEqual(6);
    expect(value('openenv_model_calls_total{outcome="refused"}')).toBeGreaterThanOrEqual(4);
    expect(value('openenv_model_call_seconds_count{stream="true"}')).toBeGreaterThanOrEqual(1);
    expect(value('openenv_model_tokens_total{kind="output"}')).toBeGreaterThanOrEqual(45);
    for (const reason of ['model_calls_exhausted', 'model_tokens_exhausted', 'model_time_exhausted', 'model_upstream_timeout'])
      expect(value(`openenv_env_failures_total{reason="${reason}"}`)).toBe(1);
  });

  it('a server budget caps what a reset asks, and a reset may ask for less', () => {
    expect(capBudgets({ calls: 5, tokens: 100 }, { calls: 9, wall_time_s: 3 })).toEqual({ calls: 5, tokens: 100, wall_time_s: 3 });
    expect(capBudgets({ calls: 5 }, { calls: 2 })).toEqual({ calls: 2 });
    expect(capBudgets({}, {})).toEqual({});
  });

  it("takes a reset's upstream only with --model-from-reset, and budgets only with an upstream", () => {
    const base = { gateway: new ModelGateway(), defaultModel: null, budgets: { calls: 3 } };
    const serverOnly = new ModelAccess({ ...base, defaultUpstream: { base_url: 'http://127.0.0.1:9/v1', headers: {} }, fromReset: false });
    expect(() => serverOnly.ask({ model: { base_url: 'http://127.0.0.1:8/v1', headers: {} } })).toThrow(/--model-from-reset/);
    expect(serverOnly.ask({ model_budgets: { calls: 9, tokens: 5 } })).toEqual({
      upstream: { base_url: 'http://127.0.0.1:9/v1', headers: {} },
      budgets: { calls: 3, tokens: 5 },
    });
    const resetOnly = new ModelAccess({ ...base, defaultUpstream: null, fromReset: true });
    expect(resetOnly.ask({})).toBeNull();
    expect(() => resetOnly.ask({ model_budgets: { calls: 1 } })).toThrow(/names no model upstream/);
    expect(resetOnly.doorFor('never-reset')).toBeUndefined();
  });
});

describe('a server without the gateway', () => {
  let s: ProcessServer;
  beforeAll(async () => {
    s = await startProcessServer({}, { bundle: MODEL_BUNDLE });
  });
  afterAll(() => s?.stop());

  it("refuses a reset's model fields, and gives its envs no gateway variables", async () => {
    const c = await WsClient.open(s.url);
    const refused = await c.reset({ task_id: 'ask-0', model: { base_url: 'http://127.0.0.1:9/v1' } });
    expect(refused.data).toMatchObject({ code: 'VALIDATION_ERROR' });
    expect(refused.data.message).toMatch(/no model gateway/);
    const ok = await c.reset({ task_id: 'ask-0' });
    expect(ok.type).toBe('observation');
    expect(resultOf(await c.call('whoami'))).toMatchObject({ OPENAI_BASE_URL: null, OPENAI_API_KEY: null, ANTHROPIC_BASE_URL: null, ANTHROPIC_API_KEY: null });
    await c.close();
  });
});
