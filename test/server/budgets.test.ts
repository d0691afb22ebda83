/** The per-episode budgets: max_steps, --episode-timeout, --idle-timeout, each named where it ends an episode. */
import { describe, expect, it } from 'vitest';
import { processSuiteServer } from '../support/process-server.js';
import { waitFor } from '../../scripts/lib/wait.js';
import { WsClient } from '../../scripts/lib/ws-client.js';

describe('episode budgets', () => {
  const s = processSuiteServer({ maxSteps: 3, toolTimeout: 1, episodeTimeout: 3, idleTimeout: 2 });

  it('past max_steps the episode ends, scored as is', async () => {
    const c = await WsClient.open(s.url);
    await c.reset({ task_id: 'fx-echo-0' });
    expect((await c.call('echo', { text: '1' })).data.done).toBe(false);
    expect((await c.call('echo', { text: '2' })).data.done).toBe(false);
    const third = await c.call('echo', { text: '3' });
    expect(third.data).toMatchObject({ done: true, reward: 0.5 });
    expect(third.data.observation).toMatchObject({ end_reason: 'max_steps', scores: { quality: 0.5 } });
    expect(third.data.observation.result.content[0].text).toBe('3');
    await c.close();
  });

  it('past --episode-timeout the episode is torn down and its next reply says env_failed/episode_timeout', async () => {
    const c = await WsClient.open(s.url);
    await c.reset({ task_id: 'fx-echo-0' });
    // keep the session talking (so it is not idle) past the episode budget; list_tools is no
    // tool call, so it does not use up max_steps
    const until = Date.now() + 30_000;
    let r = await c.listTools();
    while (!r.data.done && Date.now() < until) {
      await new Promise((res) => setTimeout(res, 400));
      r = await c.listTools();
    }
    // the first reply after the budget ran out reports it; later steps are refused as episode_done
    expect(r.data).toMatchObject({ done: true, reward: null });
    expect(r.data.observation.failure).toMatchObject({ reason: 'episode_timeout' });
    expect(r.data.observation.failure.message).toMatch(/--episode-timeout \(3 s\)/);
    expect((await c.call('echo', { text: 'later' })).data).toMatchObject({ code: 'EXECUTION_ERROR', reason: 'episode_done' });
    await c.close();
  });

  it('a session silent for --idle-timeout is closed and its episode torn down', async () => {
    const c = await WsClient.open(s.url);
    await c.reset({ task_id: 'fx-echo-1' });
    const closed = await c.closed;
    expect(closed.code).toBe(1000);
    expect(closed.reason).toMatch(/idle_timeout \(2 s\)/);
    await waitFor(() => s.app.openenv.manager.list().length === 0 && s.app.openenv.admission.activeCount === 0);
  });
});
