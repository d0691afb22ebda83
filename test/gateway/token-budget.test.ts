/**
 * The token budget against a harness that tries to spend more than it was given: a stream that
 * declines its usage chunk, calls started at once, a hang-up before the usage comes, and upstreams
 * that report no usage at all (whole or streamed, every API, a stream cut midway). Each call is
 * counted (the upstream's usage, else the estimate from the bytes it sent and received), a reply
 * cap is lowered to what the budget leaves, and access ends once the count passes the budget.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { GATEWAY } from '../../src/defaults.js';
import { ModelGateway, type Issued } from '../../src/gateway/index.js';
import {
  anthropicEvents,
  anthropicMessage,
  chatChunks,
  chatCompletion,
  responsesEvents,
  startFakeUpstream,
  type Received,
  type Reply,
} from './support/fake-upstream.js';
import { LOOPBACK_DOOR, Observed, call, openStream, waitUntil } from './support/harness-client.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(script: (r: Received) => Reply, limits: Record<string, number> = {}) {
  const up = await startFakeUpstream(script);
  const seen = new Observed();
  const gw = new ModelGateway({ observer: seen.observer, defaultUpstream: { base_url: up.baseUrl }, limits: { port: 0, ...limits } });
  cleanups.push(async () => {
    await gw.close();
    await up.close();
  });
  return { up, gw, seen };
}

/** a call of 1,000 tokens, by the upstream's count */
const THOUSAND: [number, number] = [400, 600];

/** an upstream as OpenAI is: a chat stream carries its usage chunk only when the request asks for it */
function openaiLike(r: Received): Reply {
  if (r.body?.stream)
    return { kind: 'sse', events: chatChunks(['a thousand ', 'tokens'], { usage: r.body.stream_options?.include_usage === true ? THOUSAND : null }) };
  return { kind: 'json', body: chatCompletion('a thousand tokens', { usage: THOUSAND }) };
}

const chat = (extra: Record<string, unknown> = {}) => ({ model: 'm', messages: [{ role: 'user', content: 'spend' }], ...extra });
const declined = () => chat({ stream: true, stream_options: { include_usage: false } });

/** the bytes of the request the upstream received, as the gateway sent them */
const sentBytes = (r: Received) => Buffer.byteLength(JSON.stringify(r.body));
const bytesOf = (parts: string[]) => Buffer.byteLength(parts.join(''));

describe('the attack: streams that decline their usage chunk', () => {
  it('six 1,000-token calls one after another with include_usage false on a 1,500 budget: the second ends access, no later call is forwarded', async () => {
    const { up, gw, seen } = await setup(openaiLike);
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR, budgets: { tokens: 1500 } });
    const replies = [];
    for (let i = 0; i < 6; i++) replies.push(await call(a, '/v1/chat/completions', declined()));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 429, 429, 429, 429]);
    expect(replies.slice(2).every((r) => r.body.error.code === 'model_tokens_exhausted' && r.headers['x-should-retry'] === 'false')).toBe(true);
    expect(up.received).toHaveLength(2);
    // asked upstream whatever the harness said; withheld from the harness, which declined it
    for (const r of up.received) expect(r.body.stream_options).toEqual({ include_usage: true });
    for (const r of replies.slice(0, 2)) {
      expect(r.body).toContain('"a thousand "');
      expect(r.body).toContain('data: [DONE]');
      expect(r.body).not.toContain('"usage":{');
    }
    const recs = seen.of('ep');
    expect(recs.slice(0, 2).map((r) => [r.usage, r.usage_estimated])).toEqual([
      [{ input_tokens: 400, output_tokens: 600, total_tokens: 1000 }, false],
      [{ input_tokens: 400, output_tokens: 600, total_tokens: 1000 }, false],
    ]);
    expect(seen.endsOf('ep')).toEqual([{ reason: 'model_tokens_exhausted', message: expect.stringContaining('2000 tokens') }]);
    expect(gw.use('ep')).toMatchObject({ calls: 2, tokens: 2000 });
  });

  it('six started at once (no cap): a call with no cap runs alone, so two are forwarded, and the four waiting are refused when access ends', async () => {
    const { up, gw, seen } = await setup(openaiLike, { maxInFlight: 6 });
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR, budgets: { tokens: 1500 } });
    const replies = await Promise.all(Array.from({ length: 6 }, () => call(a, '/v1/chat/completions', declined())));
    expect(up.received).toHaveLength(2);
    expect(replies.map((r) => r.status).sort()).toEqual([200, 200, 429, 429, 429, 429]);
    const refused = seen.of('ep').filter((r) => r.outcome === 'refused');
    expect(refused.map((r) => [r.refusal, r.usage])).toEqual(Array(4).fill(['model_tokens_exhausted', null]));
    expect(
      seen
        .of('ep')
        .filter((r) => r.outcome === 'ok')
        .map((r) => r.usage!.total_tokens),
    ).toEqual([1000, 1000]);
    expect(seen.endsOf('ep').map((e) => e.reason)).toEqual(['model_tokens_exhausted']);
  });

  it("six started at once with max_tokens 1,000: the second's cap is lowered to the 500 left, the others wait, and none of them goes", async () => {
    const { up, gw, seen } = await setup(
      (r) => ({ kind: 'sse', events: chatChunks(['x'], { usage: r.body.stream_options?.include_usage ? [400, r.body.max_tokens] : null }), holdAfter: 1 }),
      { maxInFlight: 6 },
    );
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR, budgets: { tokens: 1500 } });
    const pending = Array.from({ length: 6 }, () => call(a, '/v1/chat/completions', chat({ stream: true, max_tokens: 1000 })));
    // both are upstream at once: what the budget leaves covers both replies' caps
    await up.receivedN(2);
    expect(up.received.map((r) => r.body.max_tokens).sort()).toEqual([1000, 500]);
    await waitUntil(() => gw.use('ep')!.in_flight === 6, 5000, 'the other four to wait at the door');
    up.release();
    const replies = await Promise.all(pending);
    expect(up.received).toHaveLength(2);
    expect(replies.map((r) => r.status).sort()).toEqual([200, 200, 429, 429, 429, 429]);
    // 400 + 1,000 and 400 + 500: past the budget only by the prompts, which no cap holds
    expect(gw.use('ep')!.tokens).toBe(2300);
    expect(seen.endsOf('ep').map((e) => e.reason)).toEqual(['model_tokens_exhausted']);
  });
});

describe('a harness that hangs up', () => {
  it('before the usage chunk: the gateway reads on to it and counts it; two such calls end a 1,500 budget', async () => {
    // the usage chunk comes last, long after the harness has hung up on the first piece
    const events = chatChunks(
      Array.from({ length: 100 }, (_, i) => `piece ${i} `),
      { usage: THOUSAND },
    );
    const { up, gw, seen } = await setup(() => ({ kind: 'sse', events, gapMs: 20 }));
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR, budgets: { tokens: 1500 } });
    for (let i = 1; i <= 2; i++) {
      const s = await openStream(a, '/v1/chat/completions', chat({ stream: true }));
      await s.until('"piece 0 "');
      s.cancel();
      await waitUntil(() => seen.of('ep').length === i, 10_000, `the record of call ${i}`);
      expect(seen.last('ep')).toMatchObject({
        outcome: 'client_gone',
        status: 499,
        usage: { input_tokens: 400, output_tokens: 600, total_tokens: 1000 },
        usage_estimated: false,
      });
    }
    expect(seen.endsOf('ep').map((e) => e.reason)).toEqual(['model_tokens_exhausted']);
    expect((await call(a, '/v1/chat/completions', chat())).status).toBe(429);
    expect(up.received).toHaveLength(2);
  });

  it('and the stream does not end within the bound after: the upstream call is closed, counted from its bytes and at least its cap, estimated', async () => {
    const events = chatChunks(['partial']).slice(0, 2);
    const { up, gw, seen } = await setup(() => ({ kind: 'sse', events, then: 'hang' }), { hangUpDrainMs: 300 });
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR });
    const s = await openStream(a, '/v1/chat/completions', chat({ stream: true, max_tokens: 700 }));
    await s.until('"partial"');
    s.cancel();
    await waitUntil(() => seen.of('ep').length === 1, 10_000, 'the record');
    await waitUntil(() => up.openResponses() === 0, 5000, "the upstream's request to be closed");
    const input = sentBytes(up.received[0]!);
    expect(bytesOf(events)).toBeLessThan(700);
    expect(seen.last('ep')).toMatchObject({
      outcome: 'client_gone',
      usage: { input_tokens: input, output_tokens: 700, total_tokens: input + 700 },
      usage_estimated: true,
      error: expect.stringContaining('did not end within 0.3 s'),
    });
    expect(seen.ends).toEqual([]);
  });

  it('on a whole reply that never comes, with no cap: it may have made all the budget left, so it counts that, and access ends', async () => {
    const { up, gw, seen } = await setup(() => ({ kind: 'hang' }), { hangUpDrainMs: 300 });
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR, budgets: { tokens: 5000 } });
    const ctl = new AbortController();
    const pending = fetch(`${a.origin}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.credential}`, 'content-type': 'application/json' },
      body: JSON.stringify(chat()),
      signal: ctl.signal,
    }).catch(() => null);
    await up.receivedN(1);
    ctl.abort();
    await pending;
    await waitUntil(() => seen.of('ep').length === 1, 10_000, 'the record');
    const input = sentBytes(up.received[0]!);
    expect(seen.last('ep')).toMatchObject({ outcome: 'client_gone', usage: { input_tokens: input, output_tokens: 5000 }, usage_estimated: true });
    expect(seen.endsOf('ep').map((e) => e.reason)).toEqual(['model_tokens_exhausted']);
  });
});

describe('an upstream that reports no usage: counted from the bytes, marked estimated', () => {
  const strip = (events: string[]) => events.map((e) => e.replace(/,"usage":\{[^}]*\}/g, ''));
  const noUsage = (body: any) => {
    const { usage: _, ...rest } = body;
    return rest;
  };
  const cases: { name: string; path: string; body: Record<string, unknown>; reply: Reply }[] = [
    { name: 'chat, whole', path: '/v1/chat/completions', body: chat(), reply: { kind: 'json', body: noUsage(chatCompletion('no usage here')) } },
    {
      name: 'chat, streamed',
      path: '/v1/chat/completions',
      body: chat({ stream: true }),
      reply: { kind: 'sse', events: chatChunks(['no ', 'usage'], { usage: null }) },
    },
    {
      name: 'responses, whole',
      path: '/v1/responses',
      body: { model: 'm', input: 'hi' },
      reply: { kind: 'json', body: { id: 'r', object: 'response', status: 'completed', output: [] } },
    },
    {
      name: 'responses, streamed',
      path: '/v1/responses',
      body: { model: 'm', input: 'hi', stream: true },
      reply: { kind: 'sse', events: strip(responsesEvents('hello')) },
    },
    {
      name: 'anthropic, whole',
      path: '/v1/messages',
      body: { model: 'c', max_tokens: 100, messages: [] },
      reply: { kind: 'json', body: noUsage(anthropicMessage('no usage')) },
    },
    {
      name: 'anthropic, streamed',
      path: '/v1/messages',
      body: { model: 'c', max_tokens: 100, messages: [], stream: true },
      reply: { kind: 'sse', events: strip(anthropicEvents(['no ', 'usage'])) },
    },
  ];

  for (const c of cases) {
    it(c.name, async () => {
      expect(JSON.stringify(c.reply)).not.toContain('_tokens');
      const { up, gw, seen } = await setup(() => c.reply);
      const a = await gw.issue('ep', { door: LOOPBACK_DOOR, budgets: { tokens: 1_000_000 } });
      const r = await call(a, c.path, c.body);
      expect(r.status).toBe(200);
      const input = sentBytes(up.received[0]!);
      const output = c.reply.kind === 'sse' ? bytesOf(c.reply.events) : Buffer.byteLength(JSON.stringify((c.reply as { body: unknown }).body));
      expect(seen.last('ep')).toMatchObject({
        outcome: 'ok',
        usage: { input_tokens: input * GATEWAY.estimatedTokensPerByte, output_tokens: output * GATEWAY.estimatedTokensPerByte, total_tokens: input + output },
        usage_estimated: true,
      });
      expect(gw.use('ep')!.tokens).toBe(input + output);
    });
  }

  it('the estimate counts against the budget like any usage: access ends once it passes', async () => {
    const { up, gw, seen } = await setup(() => ({ kind: 'json', body: noUsage(chatCompletion('x'.repeat(600))) }));
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR, budgets: { tokens: 1500 } });
    expect((await call(a, '/v1/chat/completions', chat())).status).toBe(200);
    expect((await call(a, '/v1/chat/completions', chat())).status).toBe(200);
    expect((await call(a, '/v1/chat/completions', chat())).status).toBe(429);
    expect(up.received).toHaveLength(2);
    expect(seen.endsOf('ep').map((e) => e.reason)).toEqual(['model_tokens_exhausted']);
  });

  it('a stream cut midway counts its bytes even where the usage so far says less; a 4xx counts nothing (the model did not run)', async () => {
    let n = 0;
    const cut = anthropicEvents(['x'.repeat(2000)]).slice(0, 4);
    const { up, gw, seen } = await setup(
      () =>
        n++ === 0
          ? { kind: 'json', status: 400, body: { type: 'error', error: { type: 'invalid_request_error', message: 'prompt is too long' } } }
          : { kind: 'sse', events: cut, then: 'hang' },
      { streamIdleMs: 300 },
    );
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR });
    const body = { model: 'c', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] };
    expect((await call(a, '/v1/messages', body)).status).toBe(400);
    expect(seen.last('ep')).toMatchObject({ outcome: 'upstream_rejected', usage: null, usage_estimated: false });
    expect(gw.use('ep')!.tokens).toBe(0);
    await call(a, '/v1/messages', { ...body, stream: true });
    // message_start said 12 in and 1 out; the text that came after is 2,000 bytes
    const input = sentBytes(up.received[1]!);
    expect(seen.last('ep')).toMatchObject({ outcome: 'upstream_timeout', usage: { input_tokens: input, output_tokens: bytesOf(cut) }, usage_estimated: true });
  });
});

describe('the stream a harness gets', () => {
  it('the usage chunk is withheld only from a harness that declined it; the rest passes as it came (comments too)', async () => {
    const events = [': keep-alive\n\n', ...chatChunks(['one', 'two'], { usage: [5, 6] })];
    const usageChunk = events.find((e) => e.includes('"usage"'))!;
    const { up, gw, seen } = await setup(() => ({ kind: 'sse', events }));
    const a = await gw.issue('ep', { door: LOOPBACK_DOOR });
    const asked = [undefined, { include_usage: true }, { include_usage: false }, {}, { include_usage: false, continuous_usage_stats: false }];
    const texts: string[] = [];
    for (const so of asked) texts.push((await call(a, '/v1/chat/completions', chat({ stream: true, ...(so ? { stream_options: so } : {}) }))).body);
    expect(texts.slice(0, 2)).toEqual([events.join(''), events.join('')]);
    for (const t of texts.slice(2)) expect(t).toBe(events.filter((e) => e !== usageChunk).join(''));
    expect(up.received.map((r) => r.body.stream_options)).toEqual([
      { include_usage: true },
      { include_usage: true },
      { include_usage: true },
      { include_usage: true },
      { include_usage: true, continuous_usage_stats: false },
    ]);
    expect(seen.of('ep').map((r) => r.usage?.total_tokens)).toEqual([11, 11, 11, 11, 11]);
  });
});

describe('reply caps lowered to what the budget leaves', () => {
  it("each API's cap field: chat's per choice, Anthropic's thinking budget kept under it; a cap that fits and a request with none are left as they are", async () => {
    const { up, gw } = await setup((r) => {
      if (r.path.endsWith('/messages')) return { kind: 'json', body: anthropicMessage('ok', [1, 1]) };
      if (r.path.endsWith('/responses')) return { kind: 'sse', events: responsesEvents('ok', [1, 1]) };
      return { kind: 'json', body: chatCompletion('ok', { usage: [1, 1] }) };
    });
    const a: Issued = await gw.issue('ep', { door: LOOPBACK_DOOR, budgets: { tokens: 1000 } });
    await call(a, '/v1/chat/completions', chat({ n: 2, max_tokens: 800, max_completion_tokens: 900 }));
    await call(a, '/v1/responses', { model: 'm', input: 'hi', stream: true, max_output_tokens: 5000 });
    await call(a, '/v1/messages', { model: 'c', max_tokens: 4000, thinking: { type: 'enabled', budget_tokens: 3000 }, messages: [] });
    await call(a, '/v1/messages', { model: 'c', max_tokens: 100, thinking: { type: 'enabled', budget_tokens: 50 }, messages: [] });
    await call(a, '/v1/chat/completions', chat());
    const got = up.received.map((r) => r.body);
    // 1,000 left: 500 for each of 2 choices; then each call counted 2
    expect([got[0].max_tokens, got[0].max_completion_tokens, got[0].n]).toEqual([500, 500, 2]);
    expect(got[1].max_output_tokens).toBe(998);
    expect([got[2].max_tokens, got[2].thinking]).toEqual([996, { type: 'enabled', budget_tokens: 995 }]);
    expect([got[3].max_tokens, got[3].thinking.budget_tokens]).toEqual([100, 50]);
    expect(Object.keys(got[4]).filter((k) => k.startsWith('max_'))).toEqual([]);
    // with no token budget nothing is lowered
    const b = await gw.issue('free', { door: LOOPBACK_DOOR });
    await call(b, '/v1/messages', { model: 'c', max_tokens: 4000, messages: [] });
    expect(up.received[5]!.body.max_tokens).toBe(4000);
  });
});
