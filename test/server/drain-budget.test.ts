/**
 * SIGTERM's drain has one budget (--shutdown-timeout) for the episodes' teardowns and for what the
 * sandbox made ahead of demand (its stock's stop: the network stock), run side by side: a hung
 * removal ends the drain at the budget, says it timed out, and does not add a budget of its own.
 */
import { describe, expect, it } from 'vitest';
import type { Sandbox } from '../../src/sandbox/sandbox.js';
import { startProcessServer } from '../support/process-server.js';
import type { ProcessSandbox } from '../support/process-sandbox.js';
import { WsClient } from '../../scripts/lib/ws-client.js';

/** the process sandbox, with a stock whose stop (and optionally teardowns) wait for `released` */
function hanging(released: Promise<void>, { teardowns }: { teardowns: boolean }) {
  return (sb: ProcessSandbox): Sandbox =>
    new Proxy(sb, {
      get(target, key) {
        if (key === 'stock') return { start: () => {}, stop: () => released, stats: () => ({ size: 1, ready: 0, making: 0, made: 0, taken: 0, missed: 0 }) };
        if (key === 'teardown' && teardowns) return (...args: Parameters<Sandbox['teardown']>) => released.then(() => target.teardown(...args));
        const v: unknown = Reflect.get(target, key, target);
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
}

describe('the drain budget', () => {
  it('a hung stock removal and hung teardowns end the drain once, at the budget, timed out', async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const s = await startProcessServer({}, { checkLeftovers: false, wrap: hanging(released, { teardowns: true }) });
    try {
      const c = await WsClient.open(s.url);
      await c.reset({ task_id: 'fx-echo-0' });
      const t0 = performance.now();
      const result = await s.app.openenv.drain(1500);
      const took = performance.now() - t0;
      expect(result).toEqual({ tornDown: 1, timedOut: true });
      expect(took).toBeGreaterThanOrEqual(1400);
      // the stock removal's wait is what is left of the same 1.5 s, not 1.5 s more after the episodes'
      expect(took).toBeLessThan(2700);
    } finally {
      release();
      await s.stop();
    }
  });

  it('episodes torn down in time but a stock removal still going: timed out', async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const s = await startProcessServer({}, { wrap: hanging(released, { teardowns: false }) });
    try {
      const c = await WsClient.open(s.url);
      await c.reset({ task_id: 'fx-echo-0' });
      expect(await s.app.openenv.drain(800)).toEqual({ tornDown: 1, timedOut: true });
      expect(s.sandbox.held()).toEqual([]);
    } finally {
      release();
      await s.stop();
    }
  });

  it('both done in time: not timed out', async () => {
    const released = Promise.resolve();
    const s = await startProcessServer({}, { wrap: hanging(released, { teardowns: false }) });
    try {
      const c = await WsClient.open(s.url);
      await c.reset({ task_id: 'fx-echo-0' });
      expect(await s.app.openenv.drain(10_000)).toEqual({ tornDown: 1, timedOut: false });
    } finally {
      await s.stop();
    }
  });
});
