/**
 * FIFO admission against real env containers, the cap sampled on the engine itself (capacity.test.ts
 * covers admission with the envs as processes).
 */
import { expect, it } from 'vitest';
import { describeDocker, labelledContainersAsync, waitFor } from '../support/docker.js';
import { INSTANCE_LABEL, suiteServer } from '../support/docker-server.js';
import { WsClient } from '../support/ws-client.js';

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
    const clients = await Promise.all(Array.from({ length: 12 }, () => WsClient.open(s.url)));
    // watch the server's own queue: the order resets reach it, and the order slots are granted
    const { manager, admission } = s.app.openenv;
    const arrived: string[] = [];
    const granted: number[] = [];
    const realStart = manager.start.bind(manager);
    const realAcquire = admission.acquire.bind(admission);
    let calls = 0;
    // resolved as each reset reaches the manager, so each client sends after the one before arrived
    const arrivals: (() => void)[] = [];
    const hasArrived = clients.map((_, i) => new Promise<void>((r) => (arrivals[i] = r)));
    manager.start = (ep, data) => {
      arrived.push(String(data.episode_id));
      arrivals[arrived.length - 1]?.();
      return realStart(ep, data);
    };
    admission.acquire = (opts) => {
      const k = calls++;
      return realAcquire(opts).then((slot) => (granted.push(k), slot));
    };
    const waits: number[] = [];
    const episodes = clients.map(async (c, i) => {
      // one after another, so arrival order is well defined
      if (i > 0) await hasArrived[i - 1];
      const r = await c.reset({ task_id: 'fx-echo-0', episode_id: `c${i}` });
      waits[i] = r.data.observation.timings.queued_s;
      expect(r.type).toBe('observation');
      await c.call('sleep', { seconds: 0.3 });
      const end = await c.call('end_turn', {});
      expect(end.data.done).toBe(true);
      expect(end.data.reward).toBe(0.5);
      await c.close();
      return r.data.observation.timings;
    });
    await Promise.all(episodes);
    sampling = false;
    await sampler;
    manager.start = realStart;
    admission.acquire = realAcquire;
    // FIFO: the resets reached the queue in the order they were sent, and got slots in that order
    expect(arrived).toEqual(clients.map((_, i) => `c${i}`));
    expect(granted).toEqual([...Array(12).keys()]);
    expect(waits[11]!).toBeGreaterThan(0.2);
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThanOrEqual(4);
    await waitFor(() => s.app.openenv.admission.activeCount === 0);
  });
});
