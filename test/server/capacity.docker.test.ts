/**
 * FIFO admission against real env containers, the cap counted from the engine's own start/die
 * events (capacity.test.ts covers admission with the envs as processes).
 */
import { expect, it } from 'vitest';
import { followContainerLives } from '../../scripts/lib/container-lives.js';
import { describeDocker, waitFor } from '../support/docker.js';
import { INSTANCE_LABEL, suiteServer } from '../support/docker-server.js';
import { playTwelveThroughFour } from '../support/fifo-scenario.js';

describeDocker('admission on real Docker', () => {
  const s = suiteServer({ maxConcurrentEnvs: 4 });

  it('12 concurrent resets with 4 slots: all complete, in arrival order, 4 env containers at once and never more', async () => {
    const lives = followContainerLives(`${INSTANCE_LABEL}=${s.instance}`);
    const fifo = await playTwelveThroughFour(s.app, s.url);
    await waitFor(() => s.app.openenv.admission.activeCount === 0);
    const { peak, starts } = await lives.stop();
    // FIFO: the resets reached the queue in the order they were sent, and got slots in that order
    expect(fifo.arrived).toEqual(fifo.sent);
    expect(fifo.granted).toEqual([...Array(12).keys()]);
    expect(fifo.waits[11]!).toBeGreaterThan(0.2);
    // every reset started an env container; the first four ran together (the scenario waits for
    // all four), and no more than 4 ever ran at once
    expect(starts).toBe(12);
    expect(peak).toBe(4);
  });
});
