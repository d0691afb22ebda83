/**
 * Lanes against real env containers (lanes.test.ts plays the same with the envs as processes):
 * at a full cap, eval resets are granted ahead of the training resets queued before them, within
 * the share, and the cap holds, counted from the engine's own start and die events.
 */
import { expect, it } from 'vitest';
import { followContainerLives } from '../../scripts/lib/container-lives.js';
import { parsePrometheusText, valueOf } from '../../scripts/lib/prom-text.js';
import { describeDocker } from '../support/docker.js';
import { INSTANCE_LABEL, suiteServer } from '../support/docker-server.js';
import { evalResets, playQueuedAtFullCap, trainResets } from '../support/lanes-scenario.js';

describeDocker('lanes on real Docker', () => {
  const s = suiteServer({ maxConcurrentEnvs: 2 });

  it('6 training resets then 4 eval ones at a full cap of 2: the evals first but for every 4th grant, the oldest training reset; 2 env containers at once', async () => {
    const lives = followContainerLives(`${INSTANCE_LABEL}=${s.instance}`);
    const r = await playQueuedAtFullCap(s.app, s.url, [...trainResets(6), ...evalResets(4)]);
    const { peak, starts } = await lives.stop();
    expect(r.granted).toEqual(['e0', 'e1', 'e2', 't0', 'e3', 't1', 't2', 't3', 't4', 't5']);
    for (const e of ['e0', 'e1', 'e2', 'e3']) for (const t of ['t1', 't2', 't3', 't4', 't5']) expect(r.waits[e]!).toBeLessThan(r.waits[t]!);
    // the holders and the ten queued resets each started an env container, never more than 2 at once
    expect(starts).toBe(12);
    expect(peak).toBe(2);
    const m = parsePrometheusText(await (await fetch(`${s.url}/metrics`)).text());
    expect(valueOf(m, 'openenv_queue_wait_seconds_count', { lane: 'high' })).toBe(4);
    expect(valueOf(m, 'openenv_queue_wait_seconds_count', { lane: 'normal' })).toBe(8);
  });
});
