/**
 * A warm-pool env's credential at the gateway, over real HTTP on loopback against a scripted
 * upstream: issued at its deploy bound to no episode (its calls refused, 403 not_in_episode, none
 * forwarded), bound at the hand-over to the episode that took the env (its calls then that
 * episode's: records, budgets, revocation), and the same through ModelAccess (the episode's own
 * upstream and budgets; an episode without model access has the pooled credential revoked).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ModelAccess } from '../../src/episodes/model-access.js';
import { ModelGateway } from '../../src/gateway/index.js';
import { chatCompletion, startFakeUpstream } from './support/fake-upstream.js';
import { LOOPBACK_DOOR, Observed, call } from './support/harness-client.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** `bare`: a gateway with no upstream of its own, as the server makes it (ModelAccess holds the server's) */
async function setup(bare = false) {
  const up = await startFakeUpstream(() => ({ kind: 'json', body: chatCompletion('hello', { usage: [3, 2] }) }));
  const seen = new Observed();
  const gw = new ModelGateway({ observer: seen.observer, ...(bare ? {} : { defaultUpstream: { base_url: up.baseUrl } }), limits: { port: 0 } });
  cleanups.push(async () => {
    await gw.close();
    await up.close();
  });
  return { up, gw, seen };
}

const chat = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };

describe("a warm-pool env's credential", () => {
  it('before the hand-over: refused with 403 not_in_episode, nothing forwarded, the harness told not to retry', async () => {
    const { up, gw, seen } = await setup();
    const pooled = await gw.issue('pool-1', { door: LOOPBACK_DOOR, unbound: true });
    const r = await call(pooled, '/v1/chat/completions', chat);
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('not_in_episode');
    expect(r.body.error.message).toMatch(/bound to no episode yet.*warm pool/);
    expect(r.headers['x-should-retry']).toBe('false');
    expect(up.received).toHaveLength(0);
    // the refusal is recorded under the env's own id, which no episode's transcript holds
    expect(seen.of('pool-1').map((x) => x.outcome)).toEqual(['refused']);
    // a wrong key is still a 401, not a hint that the door is a pooled one
    expect((await call(pooled, '/v1/chat/completions', chat, { key: 'oeg-wrong' })).status).toBe(401);
  });

  it("bound at the hand-over: the same credential's calls are the episode's (records, budgets); revoking the episode ends them", async () => {
    const { up, gw, seen } = await setup();
    const pooled = await gw.issue('pool-2', { door: LOOPBACK_DOOR, unbound: true });
    expect(gw.bind('pool-2', 'ep-9', { budgets: { calls: 1 } })).toBe(true);
    expect(gw.episodes).toEqual(['ep-9']);
    expect(gw.bind('pool-2', 'ep-10', {})).toBe(false);
    const ok = await call(pooled, '/v1/chat/completions', chat);
    expect(ok.status).toBe(200);
    expect(up.received).toHaveLength(1);
    expect(seen.of('ep-9').map((x) => x.outcome)).toEqual(['ok']);
    expect(gw.use('ep-9')).toMatchObject({ calls: 1, tokens: 5 });
    // the episode's budget of one call holds
    expect((await call(pooled, '/v1/chat/completions', chat)).status).toBe(429);
    await gw.revoke('ep-9');
    expect(gw.episodes).toEqual([]);
    await expect(call(pooled, '/v1/chat/completions', chat)).rejects.toThrow();
  });
});

describe('ModelAccess with a warm pool', () => {
  async function access() {
    const { up, gw, seen } = await setup(true);
    const other = await startFakeUpstream(() => ({ kind: 'json', body: chatCompletion('from the reset', { usage: [1, 1] }) }));
    cleanups.push(() => other.close());
    const a = new ModelAccess({ gateway: gw, defaultUpstream: { base_url: up.baseUrl, headers: {} }, defaultModel: null, fromReset: true, budgets: {} });
    /** a pooled env's door, opened as its deploy does */
    const door = async (envId: string) => {
      const opened = await a.pooledDoor(envId)({ ...LOOPBACK_DOOR });
      const credential = opened.env.OPENAI_API_KEY!;
      return { credential, origin: opened.env.ANTHROPIC_BASE_URL!, address: opened.door.ip, port: opened.door.port, env: opened.env } as never;
    };
    return { a, gw, seen, up, other, door };
  }

  it("an episode whose reset named no upstream gets the server's, through the pooled env's credential", async () => {
    const { a, seen, up, door } = await access();
    const issued = await door('pool-7');
    a.hold('ep-7', a.ask({} as never));
    a.handOver('pool-7', 'ep-7');
    expect((await call(issued, '/v1/chat/completions', chat)).status).toBe(200);
    expect(up.received).toHaveLength(1);
    expect(seen.of('ep-7').map((x) => x.outcome)).toEqual(['ok']);
    await a.revoke('ep-7');
  });

  it("handOver binds the pooled credential to the episode with the episode's own upstream and budgets", async () => {
    const { a, seen, up, other, door } = await access();
    const issued = await door('pool-3');
    expect((await call(issued, '/v1/chat/completions', chat)).status).toBe(403);
    a.hold('ep-3', a.ask({ model: { base_url: other.baseUrl }, model_budgets: { calls: 5 } } as never));
    a.handOver('pool-3', 'ep-3');
    const r = await call(issued, '/v1/chat/completions', chat);
    expect(r.status).toBe(200);
    expect(r.body.choices[0].message.content).toBe('from the reset');
    expect(other.received).toHaveLength(1);
    expect(up.received).toHaveLength(0);
    expect(seen.of('ep-3').map((x) => x.outcome)).toEqual(['ok']);
    await a.revoke('ep-3');
  });

  it('an episode without model access has the pooled credential revoked at the hand-over; a discarded pooled env too, and its door never opens after', async () => {
    const { a, gw, door } = await access();
    await door('pool-4');
    a.handOver('pool-4', 'ep-none');
    await new Promise((r) => setTimeout(r, 50));
    expect(gw.episodes).toEqual([]);
    await door('pool-5');
    await a.revoke('pool-5');
    expect(gw.episodes).toEqual([]);
    const late = a.pooledDoor('pool-6');
    await a.revoke('pool-6');
    await expect(late({ ...LOOPBACK_DOOR })).rejects.toThrow(/discarded before its model door opened/);
    expect(gw.episodes).toEqual([]);
  });
});
