/**
 * The end-to-end /ws episode both layers play (ws.test.ts on processes, ws.docker.test.ts on real
 * containers): reset fx-two-turn by id, list_tools, a call, end_turn twice, the reward from the
 * env's scores, then a late step refused. `whileRunning` lets a layer check its env is there.
 * Returns the episode id.
 */
import { expect } from 'vitest';
import { WsClient } from '../../scripts/lib/ws-client.js';

export async function playTwoTurnEpisode(url: string, whileRunning: (episodeId: string) => void | Promise<void> = () => {}): Promise<string> {
  const c = await WsClient.open(url);
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
  const episodeId: string = o.episode_id;
  await whileRunning(episodeId);

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
  return episodeId;
}
