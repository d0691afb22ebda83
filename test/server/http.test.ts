/** Auth and the read-only routes (docs/protocol.md), against a real app with a token. */
import request from 'supertest';
import { describe, expect, it } from 'vitest';
import { processSuiteServer } from '../support/process-server.js';
import { WsClient } from '../../scripts/lib/ws-client.js';

const TOKEN = 'tok-http-test-9c1e7d';

describe('auth and HTTP routes', () => {
  const s = processSuiteServer({ token: TOKEN });
  const auth = { authorization: `Bearer ${TOKEN}` };

  it('401 with WWW-Authenticate on HTTP without a token or with a wrong one; /health stays open', async () => {
    for (const headers of [{}, { authorization: 'Bearer wrong' }, { authorization: TOKEN }, { authorization: `Basic ${TOKEN}` }]) {
      const r = await request(s.url).get('/bundle').set(headers);
      expect(r.status).toBe(401);
      expect(r.headers['www-authenticate']).toBe('Bearer');
      expect(r.body.error).toBe('unauthorized');
      expect(JSON.stringify(r.body)).not.toContain(TOKEN);
    }
    const h = await request(s.url).get('/health');
    expect(h.status).toBe(200);
    expect(h.body).toEqual({ status: 'healthy' });
    expect((await request(s.url).get('/bundle').set(auth)).status).toBe(200);
  });

  it('refuses the WebSocket upgrade with 401 before upgrading; accepts the right token', async () => {
    await expect(WsClient.open(s.url)).rejects.toMatchObject({ statusCode: 401 });
    await expect(WsClient.open(s.url, 'wrong')).rejects.toMatchObject({ statusCode: 401 });
    const c = await WsClient.open(s.url, TOKEN);
    expect((await c.reset({ task_id: 'fx-echo-0' })).type).toBe('observation');
    await c.close();
  });

  it('never writes the token to the log', async () => {
    await request(s.url).get('/tasks').set(auth);
    await request(s.url).get('/tasks').set({ authorization: 'Bearer wrong-one' });
    expect(s.logs().length).toBeGreaterThan(0);
    expect(s.logs()).not.toContain(TOKEN);
  });

  it("/metadata is OpenEnv's EnvironmentMetadata, exactly", async () => {
    const r = await request(s.url).get('/metadata').set(auth);
    expect(Object.keys(r.body).sort()).toEqual(['author', 'description', 'documentation_url', 'name', 'readme_content', 'version']);
    expect(r.body).toMatchObject({ name: 'fixture-v1', version: '1.0.0', author: null, documentation_url: null });
    expect(r.body.readme_content).toMatch(/echo/i);
  });

  it('/schema gives action, observation and state JSON Schemas', async () => {
    const r = await request(s.url).get('/schema').set(auth);
    expect(Object.keys(r.body).sort()).toEqual(['action', 'observation', 'state']);
    expect(r.body.state.properties.phase.enum).toContain('waiting');
  });

  it('/bundle gives splits, toolsets and settings', async () => {
    const r = await request(s.url).get('/bundle').set(auth);
    expect(r.body).toMatchObject({ name: 'fixture-v1', default_split: 'train', splits: { train: 6, eval: 2 }, toolsets: ['echo'] });
    expect(Object.keys(r.body.settings).sort()).toEqual([
      'episode_timeout_s',
      'idle_timeout_s',
      'max_concurrent_envs',
      'max_steps',
      'max_waiting',
      'reset_timeout_s',
      'reward',
      'runtime',
      'split_priority',
      'tool_timeout_s',
    ]);
  });

  it('/tasks pages a split; /tasks/{id} gives one row; bad input is 4xx with a message', async () => {
    const page = await request(s.url).get('/tasks?split=train&offset=2&limit=3').set(auth);
    expect(page.body).toMatchObject({ split: 'train', total: 6, offset: 2 });
    expect(page.body.tasks.map((t: { index: number }) => t.index)).toEqual([2, 3, 4]);
    const row = page.body.tasks[2];
    expect(Object.keys(row).sort()).toEqual(['groups', 'index', 'max_turns', 'messages', 'split', 'task_id', 'toolset', 'turns']);
    expect(row).toMatchObject({ task_id: 'fx-two-turn', groups: {}, turns: 2, messages: [{ role: 'system' }, { role: 'user', content: 'first prompt' }] });
    const one = await request(s.url).get('/tasks/fx-two-turn').set(auth);
    expect(one.body).toEqual(row);
    expect((await request(s.url).get('/tasks/nope').set(auth)).status).toBe(404);
    const badSplit = await request(s.url).get('/tasks?split=nope').set(auth);
    expect(badSplit.status).toBe(404);
    expect(badSplit.body.message).toMatch(/splits: train, eval/);
    const badLimit = await request(s.url).get('/tasks?limit=5000').set(auth);
    expect(badLimit.status).toBe(400);
    expect(badLimit.body.error).toBe('invalid_request');
    expect(badLimit.body.message).toMatch(/limit/);
  });

  it('/toolsets lists each toolset with end_turn, without deploying anything', async () => {
    const before = s.app.openenv.sandbox.networksInUse();
    const r = await request(s.url).get('/toolsets').set(auth);
    expect(r.body.toolsets.echo.map((t: { name: string }) => t.name)).toEqual(['echo', 'finish_now', 'sleep', 'crash', 'fail', 'end_turn']);
    for (const t of r.body.toolsets.echo) expect(Object.keys(t).sort()).toEqual(['description', 'input_schema', 'name']);
    expect(s.app.openenv.sandbox.networksInUse()).toBe(before);
  });

  it('an unknown route is a JSON 404, not a stack trace', async () => {
    const r = await request(s.url).get('/nope').set(auth);
    expect(r.status).toBe(404);
    expect(r.body.error).toBe('not_found');
  });

  it('draining (SIGTERM): /health turns 503 with the reason, and new resets are refused with shutting_down', async () => {
    const c = await WsClient.open(s.url, TOKEN);
    const drained = s.app.openenv.drain(10_000);
    const h = await request(s.url).get('/health');
    expect(h.status).toBe(503);
    expect(h.body).toEqual({ status: 'unhealthy', reason: expect.stringMatching(/draining/) });
    await drained;
    expect(c.closeInfo?.code ?? (await c.closed).code).toBe(1001);
    const late = await WsClient.open(s.url, TOKEN);
    const r = await late.next();
    expect(r).toMatchObject({ type: 'error', data: { code: 'SESSION_ERROR', reason: 'shutting_down' } });
    expect((await late.closed).code).toBe(1001);
  });
});
