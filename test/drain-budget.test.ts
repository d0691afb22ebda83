/**
 * SIGTERM's drain has one budget (--shutdown-timeout) for the episodes' teardowns and for what the
 * sandbox made ahead of demand (its unprepare: the network stock), run side by side: a hung
 * removal ends the drain at the budget, says it timed out, and does not add a budget of its own.
 * Proved on the runtime over a fake sandbox and a fake clock: the drain's outcome at each instant
 * of the budget, never a wall-clock window.
 */
import { describe, expect, it, vi } from 'vitest';
import { OptionsSchema } from '../src/config.js';
import { createRuntime, type OpenEnvRuntime } from '../src/runtime.js';
import { FakeSandbox, fixtureBundle, gate, onRigClock } from './support/fake-sandbox.js';
import { captureLog } from './support/log-capture.js';

const BUDGET_MS = 1500;

/** A runtime over the fake sandbox, with one episode deploying (its deploy never finishes on its own). */
async function runtimeWithAnEpisode(sandbox: FakeSandbox): Promise<OpenEnvRuntime> {
  const runtime = await createRuntime({
    options: OptionsSchema.parse({ instance: 'drain-budget', maxConcurrentEnvs: 2 }),
    bundle: await fixtureBundle(),
    log: captureLog({ level: 'warn' }).logger,
    sandbox,
    sweepOnStart: false,
  });
  await runtime.ready;
  const deploying = gate();
  sandbox.beforeDeploy = () => deploying.promise;
  const ep = runtime.manager.create({ task_id: 'fx-echo-0' }, 'ws');
  void runtime.manager.start(ep).catch(() => undefined);
  await vi.advanceTimersByTimeAsync(0);
  expect(ep.phase).toBe('deploying');
  return runtime;
}

/** The drain's result once it settles, or null while it runs. */
function watch(p: Promise<{ tornDown: number; timedOut: boolean }>) {
  let result: { tornDown: number; timedOut: boolean } | null = null;
  void p.then((r) => (result = r));
  return () => result;
}

describe('the drain budget', () => {
  onRigClock();

  it('a hung unprepare and a hung teardown end the drain once, at the budget, timed out: the unprepare gets what is left of it, not a budget more', async () => {
    const sandbox = new FakeSandbox();
    const runtime = await runtimeWithAnEpisode(sandbox);
    const hung = gate();
    sandbox.onTeardown = () => hung.promise;
    sandbox.onUnprepare = () => hung.promise;
    const start = Date.now();
    const result = watch(runtime.drain(BUDGET_MS));
    await vi.advanceTimersByTimeAsync(0);
    // both began at once
    expect(sandbox.events).toEqual(expect.arrayContaining(['unprepare', `teardown ${runtime.manager.list()[0]!.id}`]));
    await vi.advanceTimersByTimeAsync(BUDGET_MS - 1);
    expect(result()).toBeNull();
    // the budget's end: the episodes' wait ends, and what is left of it for the unprepare is
    // nothing (a timer of 0, which Node runs a millisecond later), not a budget of its own
    await vi.advanceTimersByTimeAsync(2);
    expect(Date.now() - start).toBe(BUDGET_MS + 1);
    expect(result()).toEqual({ tornDown: 1, timedOut: true });
    hung.open();
    await vi.advanceTimersByTimeAsync(0);
  });

  it('episodes torn down in time but an unprepare still going: timed out at the budget, the episode gone before it', async () => {
    const sandbox = new FakeSandbox();
    const runtime = await runtimeWithAnEpisode(sandbox);
    const id = runtime.manager.list()[0]!.id;
    const hung = gate();
    sandbox.onUnprepare = () => hung.promise;
    const result = watch(runtime.drain(BUDGET_MS));
    await vi.advanceTimersByTimeAsync(0);
    expect(sandbox.tornDown).toEqual([id]);
    expect(runtime.admission.activeCount).toBe(0);
    await vi.advanceTimersByTimeAsync(BUDGET_MS - 1);
    expect(result()).toBeNull();
    await vi.advanceTimersByTimeAsync(1);
    expect(result()).toEqual({ tornDown: 1, timedOut: true });
    hung.open();
    await vi.advanceTimersByTimeAsync(0);
  });

  it('both done in time: the drain ends as soon as they are, not timed out', async () => {
    const sandbox = new FakeSandbox();
    const runtime = await runtimeWithAnEpisode(sandbox);
    const result = watch(runtime.drain(BUDGET_MS));
    await vi.advanceTimersByTimeAsync(0);
    expect(result()).toEqual({ tornDown: 1, timedOut: false });
    expect(sandbox.events).toContain('unprepared');
  });
});
