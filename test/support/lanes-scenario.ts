/**
 * The lanes scenario both layers play (lanes.test.ts on processes, lanes.docker.test.ts on real
 * containers): holders take every slot, then the resets given queue one after another (each sent
 * once the one before is in the queue, so arrival order is theirs); then the holders end and every
 * queued reset plays a short episode as soon as it has its env. Slots free one at a time and each
 * goes to the waiter the queue names next, so the grant order depends on the queue alone, not on
 * how fast envs start. Returns that order (by label) and each reset's queue wait.
 */
import type { FastifyInstance } from 'fastify';
import { expect } from 'vitest';
import { waitFor } from '../../scripts/lib/wait.js';
import { WsClient } from '../../scripts/lib/ws-client.js';

export interface QueuedReset {
  label: string;
  task_id: string;
  /** the reset's own priority, if it names one */
  priority?: string;
}

export interface LanesResult {
  /** labels in the order their resets were granted slots */
  granted: string[];
  /** label → queued_s of its reset observation */
  waits: Record<string, number>;
}

/** `n` trainer resets of the train split, t0..t(n-1) */
export const trainResets = (n: number, from = 0): QueuedReset[] => Array.from({ length: n }, (_, i) => ({ label: `t${from + i}`, task_id: 'fx-echo-0' }));
/** `n` resets of the eval split, e0..e(n-1) */
export const evalResets = (n: number): QueuedReset[] => Array.from({ length: n }, (_, i) => ({ label: `e${i}`, task_id: 'fx-eval-0' }));

export async function playQueuedAtFullCap(app: FastifyInstance, url: string, queued: QueuedReset[]): Promise<LanesResult> {
  const { admission } = app.openenv;
  const holders = await Promise.all(Array.from({ length: admission.capacity }, () => WsClient.open(url)));
  for (const h of holders) expect((await h.reset({ task_id: 'fx-echo-0' })).type).toBe('observation');
  expect(admission.activeCount).toBe(admission.capacity);

  // every acquire from here on is a queued reset's, in the order they were sent
  const granted: string[] = [];
  const realAcquire = admission.acquire.bind(admission);
  let calls = 0;
  admission.acquire = (opts) => {
    const label = queued[calls++]!.label;
    return realAcquire(opts).then((slot) => (granted.push(label), slot));
  };
  const waits: Record<string, number> = {};
  try {
    const clients = await Promise.all(queued.map(() => WsClient.open(url)));
    const played: Promise<void>[] = [];
    for (const [i, q] of queued.entries()) {
      const c = clients[i]!;
      const reset = c.reset({ task_id: q.task_id, episode_id: q.label, ...(q.priority ? { priority: q.priority } : {}) }, 120_000);
      played.push(
        reset.then(async (r) => {
          expect(r.type, `${q.label}'s reset`).toBe('observation');
          waits[q.label] = r.data.observation.timings.queued_s;
          expect((await c.call('end_turn', {})).data.done).toBe(true);
          await c.close();
        }),
      );
      await waitFor(() => admission.waitingCount === i + 1, 10_000, `${q.label} in the queue`, 10);
    }
    // the queue is whole: the holders end, and each freed slot goes where the queue says
    for (const h of holders) {
      expect((await h.call('end_turn', {})).data.done).toBe(true);
      await h.close();
    }
    await Promise.all(played);
  } finally {
    admission.acquire = realAcquire;
  }
  await waitFor(() => admission.activeCount === 0, 30_000, 'every slot back');
  return { granted, waits };
}
