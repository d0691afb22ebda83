/**
 * The end-to-end episode over /ws once on real env containers, so the real path stays proven
 * (ws.test.ts covers the protocol with the envs as processes).
 */
import { expect, it } from 'vitest';
import { LABELS } from '../../src/sandbox/sandbox.js';
import { describeDocker, labelledResources, waitFor } from '../support/docker.js';
import { suiteServer } from '../support/docker-server.js';
import { WsClient } from '../support/ws-client.js';

describeDocker('WS /ws sessions on real Docker', () => {
  const s = suiteServer({ maxConcurrentEnvs: 4 });

  it('plays a two-turn task by task_id: list_tools, call_tool, end_turn twice, reward from scores', async () => {
    const c = await WsClient.open(s.url);
    const r = await c.reset({ task_id: 'fx-two-turn', seed: 7, episode_id: 'my-label' });
    expect(r.type).toBe('observation');
    expect(r.data.done).toBe(false);
    expect(r.data.reward).toBeNull();
    const o = r.data.observation;
    expect(o).toMatchObject({ task_id: 'fx-two-turn', split: 'train', seed: 7, toolset: 'echo', turn: 1, turns: 2, max_turns: 4 });
    expect(o.messages).toEqual([
      { role: 'system', content: expect.any(String) },
      { role: 'user', content: 'first prompt' },
    ]);
    expect(o.tools.map((t: { name: string }) => t.name)).toContain('end_turn');
    const episodeId = o.episode_id;
    // the env is a real container, labelled with the episode
    expect(labelledResources(`${LABELS.episode}=${episodeId}`).containers).toHaveLength(1);

    const tools = await c.listTools();
    expect(tools.data.observation.tools.map((t: { name: string }) => t.name)).toEqual(['echo', 'finish_now', 'sleep', 'crash', 'fail', 'end_turn']);

    const echo = await c.call('echo', { text: 'hello' });
    expect(echo.data.observation.error).toBeNull();
    expect(echo.data.observation.result.content[0]).toEqual({ type: 'text', text: 'hello' });
    expect(echo.data.observation.result.is_error).toBe(false);

    const t1 = await c.call('end_turn', { answer: 'a' });
    expect(t1.data.done).toBe(false);
    expect(t1.data.observation.result.content[0].text).toBe('second prompt');
    expect((await c.state()).data).toMatchObject({ episode_id: episodeId, task_id: 'fx-two-turn', turn: 2, done: false, phase: 'running' });

    const t2 = await c.call('end_turn', { answer: 'b' });
    expect(t2.data.done).toBe(true);
    expect(t2.data.reward).toBe(0.5);
    expect(t2.data.observation).toMatchObject({ end_reason: 'turns_ended', scores: { quality: 0.5 } });
    expect(Object.keys(t2.data.observation.timings).sort()).toEqual(['deploy_s', 'queued_s', 'running_s']);

    const after = await c.call('echo', { text: 'late' });
    expect(after).toMatchObject({ type: 'error', data: { code: 'EXECUTION_ERROR', reason: 'episode_done' } });
    expect((await c.state()).data).toMatchObject({ done: true, phase: 'done' });
    await c.close();
    await waitFor(() => labelledResources(`${LABELS.episode}=${episodeId}`).containers.length === 0, 30_000, 'the container removed');
  });
});
