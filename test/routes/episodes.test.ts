/** Stateful HTTP episodes (docs/protocol.md), with the envs as processes. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProcessServer, type ProcessServer } from '../support/process-server.js';
import { waitFor } from '../../scripts/lib/wait.js';
import { WsClient } from '../../scripts/lib/ws-client.js';
import { http } from './http.js';

describe('/episodes', () => {
  let s: ProcessServer;
  const call = (method: string, path: string, body?: unknown) => http(s.url, method, path, body);
  /** the episode's env process runs */
  const running = (id: string) => s.sandbox.live().includes(id);
  /** the episode still holds an env process, running or not */
  const holds = (id: string) => s.sandbox.held().includes(id);

  beforeAll(async () => {
    // small budgets so the idle and capacity cases run in seconds
    s = await startProcessServer({ maxConcurrentEnvs: 2, idleTimeout: 3, toolTimeout: 1 });
  });
  afterAll(async () => {
    // fails if an env process outlived the app
    await s?.stop();
  });

  it('plays a full two-turn episode: create, state, list_tools, call_tool, bad input, end_turn, done, delete', async () => {
    const created = await call('POST', '/episodes', { task_id: 'fx-two-turn', seed: 3 });
    expect(created.status).toBe(201);
    const id = created.body.episode_id as string;
    expect(created.body).toMatchObject({ reward: null, done: false, observation: { episode_id: id, task_id: 'fx-two-turn', seed: 3, turn: 1, turns: 2 } });
    expect(created.body.observation.messages[1]).toEqual({ role: 'user', content: 'first prompt' });
    expect(running(id)).toBe(true);

    expect((await call('GET', `/episodes/${id}`)).body).toEqual({
      episode_id: id,
      task_id: 'fx-two-turn',
      step_count: 0,
      turn: 1,
      done: false,
      phase: 'running',
    });

    const tools = await call('POST', `/episodes/${id}/step`, { type: 'list_tools' });
    expect(tools.status).toBe(200);
    expect(tools.body.observation.tools.map((t: { name: string }) => t.name)).toEqual(['echo', 'finish_now', 'sleep', 'crash', 'fail', 'end_turn']);

    const echo = await call('POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'echo', arguments: { text: 'hello' } });
    expect(echo.body).toEqual({
      observation: {
        tool_name: 'echo',
        result: { content: [{ type: 'text', text: 'hello' }], structured_content: { text: 'hello' }, data: { text: 'hello' }, is_error: false },
        error: null,
      },
      reward: null,
      done: false,
    });

    // a malformed action is the client's error (400); arguments that are not an object are the model's (200, invalid_args)
    const malformed = await call('POST', `/episodes/${id}/step`, { type: 'call_tool' });
    expect(malformed.status).toBe(400);
    expect(malformed.body.error).toBe('invalid_request');
    const notJson = await call('POST', `/episodes/${id}/step`, '{"type":');
    expect(notJson.status).toBe(400);
    const badArgs = await call('POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'echo', arguments: '{"text":"x"}' });
    expect(badArgs.status).toBe(200);
    expect(badArgs.body.observation.error.error_type).toBe('invalid_args');
    const unknownTool = await call('POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'nope', arguments: {} });
    expect(unknownTool.body.observation.error.error_type).toBe('tool_not_found');

    const turn1 = await call('POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'end_turn', arguments: { answer: 'a' } });
    expect(turn1.body.done).toBe(false);
    expect(turn1.body.observation.result.content[0].text).toBe('second prompt');
    const turn2 = await call('POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'end_turn', arguments: {} });
    expect(turn2.body).toMatchObject({ done: true, reward: 0.5, observation: { end_reason: 'turns_ended', scores: { quality: 0.5 } } });

    // ended: the env is gone, the state stays readable, a late step is "episode_done"
    await waitFor(() => !holds(id), 30_000, 'the ended episode torn down');
    expect((await call('GET', `/episodes/${id}`)).body).toMatchObject({ episode_id: id, done: true, phase: 'done', step_count: 5, turn: 2 });
    const late = await call('POST', `/episodes/${id}/step`, { type: 'list_tools' });
    expect(late.status).toBe(409);
    expect(late.body).toMatchObject({ error: 'episode_done', reason: 'episode_done' });

    expect((await call('DELETE', `/episodes/${id}`)).status).toBe(204);
    expect((await call('GET', `/episodes/${id}`)).status).toBe(404);
  });

  it('DELETE tears a running episode down at once', async () => {
    const created = await call('POST', '/episodes', { split: 'eval', index: 0 });
    expect(created.status).toBe(201);
    const id = created.body.episode_id as string;
    expect(running(id)).toBe(true);
    const del = await call('DELETE', `/episodes/${id}`);
    expect(del.status).toBe(204);
    expect(del.body).toBeNull();
    // 204 is sent after the teardown: nothing of the episode is left
    expect(holds(id)).toBe(false);
    expect((await call('GET', '/episodes')).body.active).toEqual([]);
  });

  it('an unknown id is 404 for state, step and delete; bad reset data is 400, an unknown task 404', async () => {
    for (const [m, p, b] of [
      ['GET', '/episodes/no-such-id', undefined],
      ['POST', '/episodes/no-such-id/step', { type: 'list_tools' }],
      ['DELETE', '/episodes/no-such-id', undefined],
    ] as const) {
      const r = await call(m, p, b);
      expect(r.status, `${m} ${p}`).toBe(404);
      expect(r.body.error).toBe('not_found');
      expect(r.body.message).toContain('no-such-id');
    }
    const badIndex = await call('POST', '/episodes', { split: 'train', index: -1 });
    expect(badIndex.status).toBe(400);
    expect(badIndex.body.message).toContain('index');
    const notObject = await call('POST', '/episodes', [1, 2]);
    expect(notObject.status).toBe(400);
    const unknownTask = await call('POST', '/episodes', { task_id: 'no-such-task' });
    expect(unknownTask.status).toBe(404);
    expect((await call('GET', '/episodes')).body).toEqual({ active: [], waiting: 0, capacity: 2 });
  });

  it('GET /episodes lists an HTTP episode beside a /ws one', async () => {
    const ws = await WsClient.open(s.url);
    const r = await ws.reset({ task_id: 'fx-echo-0' });
    expect(r.type).toBe('observation');
    const wsId = r.data.observation.episode_id as string;
    const created = await call('POST', '/episodes', { task_id: 'fx-echo-1' });
    const httpId = created.body.episode_id as string;
    await call('POST', `/episodes/${httpId}/step`, { type: 'call_tool', tool_name: 'echo', arguments: { text: 'x' } });

    const list = await call('GET', '/episodes');
    expect(list.status).toBe(200);
    expect(list.body.capacity).toBe(2);
    expect(list.body.waiting).toBe(0);
    const byId = Object.fromEntries(list.body.active.map((e: { episode_id: string }) => [e.episode_id, e]));
    expect(Object.keys(byId).sort()).toEqual([wsId, httpId].sort());
    expect(byId[wsId]).toMatchObject({ task_id: 'fx-echo-0', phase: 'running', transport: 'ws', steps: 0, reward: null });
    expect(byId[httpId]).toMatchObject({ task_id: 'fx-echo-1', phase: 'running', transport: 'http', steps: 1, reward: null });
    expect(Date.parse(byId[httpId].started_at)).toBeGreaterThan(Date.now() - 60_000);
    expect(Object.keys(byId[httpId]).sort()).toEqual(['episode_id', 'phase', 'reward', 'started_at', 'steps', 'task_id', 'transport']);

    // the /ws session's episode is readable over HTTP but driven only through its socket
    expect((await call('GET', `/episodes/${wsId}`)).body).toMatchObject({ episode_id: wsId, phase: 'running' });
    const steal = await call('POST', `/episodes/${wsId}/step`, { type: 'list_tools' });
    expect(steal.status).toBe(409);
    expect(steal.body.error).toBe('owned_by_ws_session');

    await ws.close();
    expect((await call('DELETE', `/episodes/${httpId}`)).status).toBe(204);
    await waitFor(async () => (await call('GET', '/episodes')).body.active.length === 0, 30_000, 'no live episode');
  });

  it('at capacity a POST waits, then answers 503 with Retry-After; a freed slot admits the next one', async () => {
    const holders = await Promise.all([0, 1].map(() => call('POST', '/episodes', { task_id: 'fx-echo-0' })));
    expect(holders.map((h) => h.status)).toEqual([201, 201]);
    const t0 = Date.now();
    const refused = await call('POST', '/episodes', { task_id: 'fx-echo-1', reset_timeout_s: 1 });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    expect(refused.status).toBe(503);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(refused.body).toMatchObject({ error: 'capacity_reached', active_sessions: 2, max_sessions: 2, waiting: 1 });
    expect(refused.body.waited_s).toBeGreaterThanOrEqual(0.9);
    expect(refused.body.message).toContain('reset timeout');
    // nothing of the refused reset is left
    expect((await call('GET', '/episodes')).body.active).toHaveLength(2);

    // a waiting POST is admitted when a slot frees
    const waiting = call('POST', '/episodes', { task_id: 'fx-echo-1', reset_timeout_s: 60 });
    await waitFor(async () => (await call('GET', '/episodes')).body.waiting === 1, 10_000, 'the POST queued');
    const listed = (await call('GET', '/episodes')).body.active.find((e: { phase: string }) => e.phase === 'waiting');
    expect(listed).toMatchObject({ task_id: 'fx-echo-1', transport: 'http' });
    await call('DELETE', `/episodes/${holders[0]!.body.episode_id}`);
    const admitted = await waiting;
    expect(admitted.status).toBe(201);
    expect(admitted.body.episode_id).toBe(listed.episode_id);
    await Promise.all([holders[1]!.body.episode_id, admitted.body.episode_id].map((id) => call('DELETE', `/episodes/${id}`)));
  });

  it('a client that disconnects while its POST waits leaves the queue', async () => {
    const holders = await Promise.all([0, 1].map(() => call('POST', '/episodes', { task_id: 'fx-echo-0' })));
    const ac = new AbortController();
    const gone = http(s.url, 'POST', '/episodes', { task_id: 'fx-echo-1' }, {}, ac.signal).catch((e: Error) => e);
    await waitFor(() => s.app.openenv.admission.waitingCount === 1, 10_000, 'the POST queued');
    ac.abort();
    expect(await gone).toBeInstanceOf(Error);
    await waitFor(() => s.app.openenv.admission.waitingCount === 0, 10_000, 'the queue emptied');
    const list = (await call('GET', '/episodes')).body;
    expect(list.waiting).toBe(0);
    expect(list.active.map((e: { episode_id: string }) => e.episode_id).sort()).toEqual(holders.map((h) => h.body.episode_id).sort());
    // the freed place is not handed to the departed client: the next reset gets the next slot
    await call('DELETE', `/episodes/${holders[0]!.body.episode_id}`);
    const next = await call('POST', '/episodes', { task_id: 'fx-echo-1', reset_timeout_s: 30 });
    expect(next.status).toBe(201);
    await Promise.all([holders[1]!.body.episode_id, next.body.episode_id].map((id) => call('DELETE', `/episodes/${id}`)));
    expect(s.app.openenv.admission.activeCount).toBe(0);
  });

  it('an idle HTTP episode is torn down after idle_timeout; requests keep it alive', async () => {
    const kept = (await call('POST', '/episodes', { task_id: 'fx-echo-0' })).body.episode_id as string;
    const idle = (await call('POST', '/episodes', { task_id: 'fx-echo-1' })).body.episode_id as string;
    const t0 = Date.now();
    // poke `kept` every second for longer than idle_timeout (3 s)
    while (Date.now() - t0 < 4500) {
      expect((await call('GET', `/episodes/${kept}`)).body.phase).toBe('running');
      await new Promise((r) => setTimeout(r, 1000));
    }
    await waitFor(() => !holds(idle), 10_000, 'the idle episode torn down');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(2900);
    const ids = (await call('GET', '/episodes')).body.active.map((e: { episode_id: string }) => e.episode_id);
    expect(ids).toEqual([kept]);
    expect((await call('GET', `/episodes/${idle}`)).body).toMatchObject({ done: true, phase: 'done' });
    const late = await call('POST', `/episodes/${idle}/step`, { type: 'list_tools' });
    expect(late.status).toBe(409);
    expect(s.logs()).toContain('"event":"http_idle"');
    expect(running(kept)).toBe(true);
    await call('DELETE', `/episodes/${kept}`);
  });
});

describe('http() helper', () => {
  it('reports a refused connection as an error', async () => {
    await expect(http('http://127.0.0.1:1', 'GET', '/')).rejects.toThrow();
  });
});
