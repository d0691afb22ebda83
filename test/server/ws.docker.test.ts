/**
 * The end-to-end episode over /ws once on real env containers, so the real path stays proven
 * (ws.test.ts covers the protocol with the envs as processes).
 */
import { expect, it } from 'vitest';
import { LABELS } from '../../src/sandbox/sandbox.js';
import { describeDocker, labelledResources, waitFor } from '../support/docker.js';
import { suiteServer } from '../support/docker-server.js';
import { playTwoTurnEpisode } from '../support/two-turn-scenario.js';

describeDocker('WS /ws sessions on real Docker', () => {
  const s = suiteServer({ maxConcurrentEnvs: 4 });

  it('plays a two-turn task by task_id: list_tools, call_tool, end_turn twice, reward from scores', async () => {
    const episodeId = await playTwoTurnEpisode(s.url, (id) => {
      // the env is a real container, labelled with the episode
      expect(labelledResources(`${LABELS.episode}=${id}`).containers).toHaveLength(1);
    });
    await waitFor(() => labelledResources(`${LABELS.episode}=${episodeId}`).containers.length === 0, 30_000, 'the container removed');
  });
});
