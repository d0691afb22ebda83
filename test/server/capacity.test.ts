/**
 * FIFO admission with the envs as processes: the cap holds, order holds, timeouts answer, nothing
 * leaks (capacity.docker.test.ts samples the cap on a real engine).
 */
import { describe, expect, it } from 'vitest';
import { processSuiteServer } from '../support/process-server.js';
import { waitFor } from '../../scripts/lib/wait.js';
import { playTwelveThroughFour } from '../support/fifo-scenario.js';
import { WsClient } from '../../scripts/lib/ws-client.js';

describe('admission', () => {
  const s = processSuiteServer({ maxConcurrentEnvs: 4 });

  it('12 concurrent resets with 4 slots: all complete, in arrival order, 4 env processes at once and never more', async () => {
    const spawnedBefore = s.sandbox.spawned;
    const fifo = await playTwelveThroughFour(s.app, s.url);
    // FIFO: the resets reached the queue in the order they were sent, and got slots in that order
    expect(fifo.arrived).toEqual(fifo.sent);
    expect(fifo.granted).toEqual([...Array(12).keys()]);
    expect(fifo.waits[11]!).toBeGreaterThan(0.2);
    // the sandbox counts every env process it held at once, not a sample: the first four held
    // their slots together (the scenario waits for all four), and the cap held after
    expect(s.sandbox.spawned - spawnedBefore).toBe(12);
    expect(s.sandbox.peak).toBe(4);
    await waitFor(() => s.app.openenv.admission.activeCount === 0);
  });

  it('a reset that waits past its timeout gets CAPACITY_REACHED with the counts; the session can reset again', async () => {
    const holders = await Promise.all(Array.from({ length: 4 }, () => WsClient.open(s.url)));
    await Promise.all(holders.map((h) => h.reset({ task_id: 'fx-echo-0' })));
    const c = await WsClient.open(s.url);
    const t0 = Date.now();
    const r = await c.reset({ task_id: 'fx-echo-1', reset_timeout_s: 1 });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    expect(r.type).toBe('error');
    expect(r.data).toMatchObject({ code: 'CAPACITY_REACHED', active_sessions: 4, max_sessions: 4, waiting: 1 });
    expect(r.data.waited_s).toBeGreaterThanOrEqual(0.9);
    expect(r.data.retry_after_s).toBeGreaterThanOrEqual(1);
    expect((await c.state()).data.phase).toBe('idle');
    await holders[0]!.close();
    const again = await c.reset({ task_id: 'fx-echo-1', reset_timeout_s: 30 });
    expect(again.type).toBe('observation');
    await Promise.all([c, ...holders.slice(1)].map((h) => h.close()));
    await waitFor(() => s.app.openenv.admission.activeCount === 0);
  });

  it('a client that disconnects while waiting, while deploying and while running leaves nothing behind', async () => {
    const holders = await Promise.all(Array.from({ length: 4 }, () => WsClient.open(s.url)));
    await Promise.all(holders.map((h) => h.reset({ task_id: 'fx-echo-0' })));
    // waiting: in the queue behind 4 running episodes
    const waiter = await WsClient.open(s.url);
    waiter.sendRaw(JSON.stringify({ type: 'reset', data: { task_id: 'fx-echo-1' } }));
    await waitFor(() => s.app.openenv.admission.waitingCount === 1);
    waiter.terminate();
    await waitFor(() => s.app.openenv.admission.waitingCount === 0);
    // running: drop two of the holders without a close frame
    holders[0]!.terminate();
    holders[1]!.terminate();
    await waitFor(() => s.app.openenv.admission.activeCount === 2);
    // deploying: a slot is free now; disconnect once the env process has started, while it is
    // still a minute away from ready
    const deployer = await WsClient.open(s.url);
    s.sandbox.overrideNextDeploy({ ECHO_READY_AFTER_MS: '60000' });
    const spawned = s.sandbox.nextSpawn();
    deployer.sendRaw(JSON.stringify({ type: 'reset', data: { task_id: 'fx-echo-2' } }));
    await spawned;
    expect(s.app.openenv.manager.list().some((e) => e.task.task_id === 'fx-echo-2' && e.phase === 'deploying')).toBe(true);
    deployer.terminate();
    holders[2]!.terminate();
    holders[3]!.terminate();
    await waitFor(() => s.app.openenv.admission.activeCount === 0 && s.app.openenv.manager.list().length === 0);
    await waitFor(() => s.sandbox.held().length === 0, 30_000, 'every env process gone');
    expect(s.app.openenv.sandbox.networksInUse()).toBe(0);
  });
});
