/**
 * The gateway served on real Docker, by the server as users run it (`node dist/serve.js` with
 * --model-url): an env container calls its door, on its own episode network, with the credential
 * it was given, against a scripted upstream on 127.0.0.1, whole and streamed, and the calls are in
 * the episode's transcript; another episode's credential and none are refused, another episode's
 * door drops the connection, the server's API and the upstream are not reachable from the env;
 * each budget ends an episode with its reason; a hung upstream ends it in time; SIGTERM with a
 * call in flight exits 0 and leaves nothing on the engine.
 */
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { WsClient } from '../../scripts/lib/ws-client.js';
import { describeDocker, labelledResources, LOCAL_NODE_IMAGE, uniqueInstance, waitFor } from '../support/docker.js';
import { INSTANCE_LABEL } from '../support/docker-server.js';
import { spawnServer, type ServerProcess } from '../support/serve-process.js';
import { chatChunks, chatCompletion, startFakeUpstream, type FakeUpstream, type Received } from './support/fake-upstream.js';

const MODEL_BUNDLE = fileURLToPath(new URL('../fixtures/model-v1', import.meta.url));
const UPSTREAM_KEY = `sk-docker-${randomBytes(6).toString('hex')}`;
/** a pool of its own, apart from the default pool the other docker tests share */
const POOL = `10.222.${Math.floor(Math.random() * 250)}.0/24`;

function script(r: Received) {
  const prompt = JSON.stringify(r.body?.messages ?? '');
  if (prompt.includes('hang')) return { kind: 'hang' as const };
  const usage: [number, number] = prompt.includes('big') ? [40, 10] : [10, 7];
  if (r.body?.stream) return { kind: 'sse' as const, events: chatChunks(['from ', 'the ', 'stream'], { usage }), gapMs: 20 };
  return { kind: 'json' as const, body: chatCompletion(`whole reply to ${r.body?.messages?.[0]?.content}`, { usage }) };
}

const resultOf = (frame: any) => frame.data.observation.result?.data;

describeDocker('the gateway served on Docker', () => {
  let upstream: FakeUpstream;
  let srv: ServerProcess;
  const instance = uniqueInstance('gw-served');

  beforeAll(async () => {
    upstream = await startFakeUpstream(script);
    srv = await spawnServer(
      [
        MODEL_BUNDLE,
        '--port',
        '0',
        '--instance',
        instance,
        '--build-arg',
        `NODE_IMAGE=${LOCAL_NODE_IMAGE}`,
        '--subnet-pool',
        POOL,
        '--max-concurrent-envs',
        '4',
        '--model-url',
        upstream.baseUrl,
        '--model',
        'policy',
        '--model-key-env',
        'GW_DOCKER_UPSTREAM_KEY',
        '--model-from-reset',
        '--model-call-timeout',
        '3',
      ],
      { GW_DOCKER_UPSTREAM_KEY: UPSTREAM_KEY },
    );
  }, 240_000);
  afterAll(async () => {
    if (srv && srv.child.exitCode === null) {
      srv.child.kill('SIGTERM');
      await srv.exited;
    }
    await upstream?.close();
  });

  async function episode(data: Record<string, unknown> = {}) {
    const c = await WsClient.open(srv.url);
    const reset = await c.reset({ task_id: 'ask-0', ...data }, 60_000);
    expect(reset.type, JSON.stringify(reset)).toBe('observation');
    return { c, id: reset.data.observation.episode_id as string, vars: resultOf(await c.call('whoami')) };
  }

  it('an env calls its door on its own network with its credential, whole and streamed; the calls are in its transcript', async () => {
    const { c, id, vars } = await episode();
    const door = new URL(vars.OPENAI_BASE_URL);
    // the door is the bridge's host address of the episode's own network, in the server's pool
    expect(door.hostname.startsWith(POOL.split('.').slice(0, 3).join('.') + '.')).toBe(true);
    expect(door.port).toBe('8201');
    expect(JSON.stringify(vars)).not.toContain(UPSTREAM_KEY);
    expect(vars.addresses).toHaveLength(1);

    expect(resultOf(await c.call('ask', { prompt: 'one' }))).toMatchObject({ status: 200, text: 'whole reply to one' });
    expect(resultOf(await c.call('ask', { prompt: 'two', stream: true }))).toMatchObject({ status: 200, text: 'from the stream' });
    const got = upstream.received.slice(-2);
    for (const r of got) expect(r.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);

    const t = (await (await fetch(`${srv.url}/console/episodes/${id}`)).json()) as any;
    const calls = t.events.filter((e: any) => e.kind === 'model_call');
    expect(calls.map((e: any) => [e.seq, e.stream, e.status, e.outcome])).toEqual([
      [1, false, 200, 'ok'],
      [2, true, 200, 'ok'],
    ]);
    expect(JSON.stringify(calls[1].response)).toContain('from the stream');
    expect(calls[1].usage).toEqual({ input_tokens: 10, output_tokens: 7, total_tokens: 17 });
    await c.close();
  });

  it("refuses another episode's credential and none; another episode's door, the server's API and the upstream are closed to the env", async () => {
    const a = await episode();
    const b = await episode();
    expect(resultOf(await a.c.call('ask', { prompt: 'x', key: b.vars.OPENAI_API_KEY })).status).toBe(401);
    expect(resultOf(await a.c.call('ask', { prompt: 'x', key: '' })).status).toBe(401);
    // B's door, with B's key, from A's network: dropped before a byte is read (the source check)
    const other = resultOf(await a.c.call('ask', { prompt: 'x', base: b.vars.OPENAI_BASE_URL, key: b.vars.OPENAI_API_KEY }));
    expect(other.error).toMatch(/ECONNRESET|socket hang up|EPIPE/);
    // the server's API (on 127.0.0.1) and the upstream are not at the env's gateway address
    const host = new URL(a.vars.OPENAI_BASE_URL).hostname;
    const apiPort = new URL(srv.url).port;
    const upstreamPort = new URL(upstream.baseUrl).port;
    // nor the engine's API port there (the socket is not mounted in any env)
    for (const port of [apiPort, upstreamPort, '2375']) {
      const probe = resultOf(await a.c.call('probe', { url: `http://${host}:${port}/health` }));
      expect(probe.error, `port ${port}`).toMatch(/ECONNREFUSED|ETIMEDOUT|ECONNRESET/);
    }
    // nor B's env, on B's network
    expect(b.vars.addresses).toHaveLength(1);
    const env = resultOf(await a.c.call('probe', { url: `http://${b.vars.addresses[0]}:8000/health` }));
    expect(env.error).toMatch(/ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ECONNREFUSED/);
    // neither episode is hurt
    expect(resultOf(await a.c.call('ask', { prompt: 'fine' })).status).toBe(200);
    expect(resultOf(await b.c.call('ask', { prompt: 'fine' })).status).toBe(200);
    await a.c.close();
    await b.c.close();
  });

  it('each budget ends its episode with its reason', async () => {
    const calls = await episode({ model_budgets: { calls: 1 } });
    expect(resultOf(await calls.c.call('ask', { prompt: 'first' })).status).toBe(200);
    const second = await calls.c.call('ask', { prompt: 'second' });
    expect(second.data.observation.failure).toMatchObject({ reason: 'model_calls_exhausted', phase: 'model' });

    const tokens = await episode({ model_budgets: { tokens: 30 } });
    // the call that passes the budget completes; the episode ends as it is settled, by the next step at the latest
    let after = await tokens.c.call('ask', { prompt: 'big' });
    if (!after.data.done) await waitFor(async () => (after = await tokens.c.listTools()).data.done === true, 15_000, 'the tokens budget');
    expect(after.data.observation.failure).toMatchObject({ reason: 'model_tokens_exhausted', phase: 'model' });

    // no step before the budget may run out (it may do so while the env deploys): the first step
    // after it says so, later ones are refused as episode_done
    const time = { c: await WsClient.open(srv.url) };
    expect((await time.c.reset({ task_id: 'ask-0', model_budgets: { wall_time_s: 1 } }, 60_000)).type).toBe('observation');
    let r = await time.c.listTools();
    if (!r.data.done) await waitFor(async () => (r = await time.c.listTools()).data.done === true, 15_000, 'the wall-time budget');
    expect(r.data.observation.failure).toMatchObject({ reason: 'model_time_exhausted', phase: 'model' });
    for (const e of [calls, tokens, time]) await e.c.close();
  });

  it('a hung upstream ends the episode in time, with model_upstream_timeout', async () => {
    const { c } = await episode();
    const t0 = Date.now();
    const r = await c.call('ask', { prompt: 'hang' });
    expect(Date.now() - t0).toBeLessThan(15_000);
    expect(r.data.observation.failure).toMatchObject({ reason: 'model_upstream_timeout', phase: 'model' });
    await c.close();
  });

  it('SIGTERM with a model call in flight exits 0 and leaves nothing on the engine', async () => {
    const { c } = await episode();
    const before = upstream.received.length;
    const pending = c.call('ask', { prompt: 'hang' }).catch((e: unknown) => e);
    await upstream.receivedN(before + 1);
    srv.child.kill('SIGTERM');
    const exit = await srv.exited;
    expect(exit, srv.output().slice(-2000)).toEqual({ code: 0, signal: null });
    await pending;
    // the gateway closed its call upstream too
    await waitFor(() => upstream.openResponses() === 0, 10_000, 'the upstream call closed');
    expect(labelledResources(`${INSTANCE_LABEL}=${instance}`)).toEqual({ containers: [], networks: [] });
  });
});
