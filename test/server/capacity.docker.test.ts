/**
 * FIFO admission against real env containers, the cap sampled on the engine itself (capacity.test.ts
 * covers admission with the envs as processes).
 */
import { expect, it } from 'vitest';
import { describeDocker, labelledContainersAsync, waitFor } from '../support/docker.js';
import { INSTANCE_LABEL, suiteServer } from '../support/docker-server.js';
import { playTwelveThroughFour } from '../support/fifo-scenario.js';

describeDocker('admission on real Docker', () => {
  const s = suiteServer({ maxConcurrentEnvs: 4 });

  it('12 concurrent resets with 4 slots: all complete, in arrival order, never more than 4 env containers', async () => {
    let peak = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        peak = Math.max(peak, (await labelledContainersAsync(`${INSTANCE_LABEL}=${s.instance}`)).length);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const fifo = await playTwelveThroughFour(s.app, s.url);
    sampling = false;
    await sampler;
    // FIFO: the resets reached the queue in the order they were sent, and got slots in that order
    expect(fifo.arrived).toEqual(fifo.sent);
    expect(fifo.granted).toEqual([...Array(12).keys()]);
    expect(fifo.waits[11]!).toBeGreaterThan(0.2);
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThanOrEqual(4);
    await waitFor(() => s.app.openenv.admission.activeCount === 0);
  });
});
