/**
 * The FIFO scenario both layers play (capacity.test.ts on processes, capacity.docker.test.ts on
 * real containers): 12 clients reset one after another on a server with 4 slots, each plays a
 * short episode; the first four play only once all four have their env, so the cap is reached
 * whatever the engine's speed. Returns the order the resets reached the queue, the order slots
 * were granted, and each reset's queue wait; each layer adds how it measured the cap.
 */
import type { FastifyInstance } from 'fastify';
import { expect } from 'vitest';
import { WsClient } from '../../scripts/lib/ws-client.js';

export interface FifoResult {
  /** the clients' labels, c0..c11 */
  sent: string[];
  arrived: string[];
  granted: number[];
  waits: number[];
}

export async function playTwelveThroughFour(app: FastifyInstance, url: string): Promise<FifoResult> {
  const clients = await Promise.all(Array.from({ length: 12 }, () => WsClient.open(url)));
  // watch the server's own queue: the order resets reach it, and the order slots are granted
  const { manager, admission } = app.openenv;
  const arrived: string[] = [];
  const granted: number[] = [];
  const realStart = manager.start.bind(manager);
  const realAcquire = admission.acquire.bind(admission);
  let calls = 0;
  // resolved as each reset reaches the manager, so each client sends after the one before arrived
  const arrivals: (() => void)[] = [];
  const hasArrived = clients.map((_, i) => new Promise<void>((r) => (arrivals[i] = r)));
  manager.start = (ep) => {
    arrived.push(String(ep.clientLabel));
    arrivals[arrived.length - 1]?.();
    return realStart(ep);
  };
  admission.acquire = (opts) => {
    const k = calls++;
    return realAcquire(opts).then((slot) => (granted.push(k), slot));
  };
  const waits: number[] = [];
  // the first `SLOTS` episodes hold their envs together: each waits until all have been reset
  const SLOTS = admission.capacity;
  let resetsIn = 0;
  let allIn!: () => void;
  const firstAllIn = new Promise<void>((r) => (allIn = r));
  try {
    await Promise.all(
      clients.map(async (c, i) => {
        // one after another, so arrival order is well defined
        if (i > 0) await hasArrived[i - 1];
        const r = await c.reset({ task_id: 'fx-echo-0', episode_id: `c${i}` });
        expect(r.type).toBe('observation');
        waits[i] = r.data.observation.timings.queued_s;
        if (i < SLOTS) {
          if (++resetsIn === SLOTS) allIn();
          await firstAllIn;
        }
        await c.call('sleep', { seconds: 0.3 });
        const end = await c.call('end_turn', {});
        expect(end.data.done).toBe(true);
        expect(end.data.reward).toBe(0.5);
        await c.close();
      }),
    );
  } finally {
    manager.start = realStart;
    admission.acquire = realAcquire;
  }
  return { sent: clients.map((_, i) => `c${i}`), arrived, granted, waits };
}
