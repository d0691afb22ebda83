/**
 * The episode registry on its own, over a fake sandbox and a fake clock: which task a reset
 * names, how each reset is counted, the drain and its budget, and the reconciler's strays.
 */
import { describe, expect, it, vi } from 'vitest';
import { BadInputError, CapacityError, NotFoundError, ShuttingDownError } from '../../src/errors.js';
import { EpisodeManager } from '../../src/episodes/manager.js';
import { gate, makeRig, metricValue, onRigClock, type Rig } from '../support/fake-sandbox.js';

function managerOf(rig: Rig, random = () => 0): EpisodeManager {
  return new EpisodeManager(rig.deps, rig.log.logger, random);
}

describe('EpisodeManager', () => {
  onRigClock();

  it('picks the task a reset names: task_id, split and index, seed modulo the split, or the default split at random', async () => {
    const rig = await makeRig();
    const m = managerOf(rig, () => 0.99);
    const id = (data: Parameters<EpisodeManager['pickTask']>[0]) => m.pickTask(data).task_id;
    expect(id({ task_id: 'fx-eval-1' })).toBe('fx-eval-1');
    expect(id({ task_id: 'fx-eval-1', split: 'eval', index: 1 })).toBe('fx-eval-1');
    expect(id({ split: 'eval', index: 0 })).toBe('fx-eval-0');
    // train has 6 tasks: seed 13 is index 1, and the injected random 0.99 is the last
    expect(id({ seed: 13 })).toBe('fx-echo-1');
    expect(id({})).toBe('fx-bad-scores');
    expect(() => m.pickTask({ task_id: 'fx-eval-1', split: 'train' })).toThrow(
      new BadInputError('VALIDATION_ERROR', 'task "fx-eval-1" is in split "eval", not "train"'),
    );
    expect(() => m.pickTask({ task_id: 'fx-eval-1', index: 0 })).toThrow('task "fx-eval-1" has index 1, not 0');
    expect(() => m.pickTask({ task_id: 'nope' })).toThrow(NotFoundError);
    expect(() => m.pickTask({ split: 'nope' })).toThrow('unknown split "nope"; splits: train, eval');
    expect(() => m.pickTask({ split: 'eval', index: 2 })).toThrow('split "eval" has 2 tasks (index 0..1); index 2 is out of range');
  });

  it('lists an episode from its creation, waiting, until its teardown; a reset may ask for a shorter wait than the server’s', async () => {
    const rig = await makeRig({ settings: { resetTimeoutMs: 10_000 } });
    const m = managerOf(rig);
    const short = m.create({ task_id: 'fx-echo-0', reset_timeout_s: 2 }, 'http');
    const long = m.create({ task_id: 'fx-echo-0', reset_timeout_s: 600 }, 'ws');
    expect(short.queueTimeoutMs).toBe(2000);
    expect(long.queueTimeoutMs).toBe(10_000);
    expect(m.list().map((e) => e.id)).toEqual([short.id, long.id]);
    expect(m.get(short.id)).toBe(short);
    await m.start(short);
    await short.close();
    await long.close();
    expect(m.list()).toEqual([]);
  });

  it('counts every reset by how it went: started, invalid, capacity, deploy_failed, aborted, shutting_down', async () => {
    const rig = await makeRig({ capacity: 1, maxWaiting: 0 });
    const m = managerOf(rig);
    const count = (outcome: string) => metricValue(rig.metrics.resets, { outcome });
    const running = m.create({ task_id: 'fx-echo-0' }, 'ws');
    await m.start(running);
    expect(() => m.create({ task_id: 'nope' }, 'ws')).toThrow(NotFoundError);
    const refused = m.create({ task_id: 'fx-echo-1' }, 'ws');
    expect(await m.start(refused).catch((e: unknown) => e)).toBeInstanceOf(CapacityError);
    await running.close();
    rig.sandbox.beforeDeploy = async () => {
      throw new Error('no engine');
    };
    const failed = m.create({ task_id: 'fx-echo-1' }, 'ws');
    expect(((await m.start(failed).catch((e: unknown) => e)) as Error).name).toBe('DeployFailedError');
    const held = gate();
    rig.sandbox.beforeDeploy = () => held.promise;
    const aborted = m.create({ task_id: 'fx-echo-1' }, 'ws');
    const starting = m.start(aborted).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(0);
    await aborted.close();
    held.open();
    expect(((await starting) as Error).name).toBe('AbortError');
    await m.drain(1000);
    expect(() => m.create({ task_id: 'fx-echo-1' }, 'ws')).toThrow(ShuttingDownError);
    expect([
      await count('started'),
      await count('invalid'),
      await count('capacity'),
      await count('deploy_failed'),
      await count('aborted'),
      await count('shutting_down'),
    ]).toEqual([1, 1, 1, 1, 1, 1]);
  });

  it('drains: waiting resets refused, every episode torn down, within the budget', async () => {
    const rig = await makeRig({ capacity: 1 });
    const m = managerOf(rig);
    const running = m.create({ task_id: 'fx-echo-0' }, 'ws');
    await m.start(running);
    const waiting = m.create({ task_id: 'fx-echo-1' }, 'ws');
    const waited = m.start(waiting).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(0);
    expect(await m.drain(5000)).toEqual({ tornDown: 2, timedOut: false });
    expect(await waited).toBeInstanceOf(ShuttingDownError);
    expect(m.isDraining).toBe(true);
    expect(rig.sandbox.tornDown).toEqual([running.id]);
    expect(m.list()).toEqual([]);
    expect(rig.admission.activeCount).toBe(0);
  });

  it('a teardown that hangs ends the drain at its budget, timed out', async () => {
    const rig = await makeRig();
    const m = managerOf(rig);
    const ep = m.create({ task_id: 'fx-echo-0' }, 'ws');
    await m.start(ep);
    const hung = gate();
    rig.sandbox.onTeardown = () => hung.promise;
    let result: unknown = null;
    const drained = m.drain(3000).then((r) => (result = r));
    await vi.advanceTimersByTimeAsync(2999);
    expect(result).toBeNull();
    await vi.advanceTimersByTimeAsync(1);
    await drained;
    expect(result).toEqual({ tornDown: 1, timedOut: true });
    hung.open();
    await ep.tornDown;
  });

  it('the reconciler removes what the engine holds for no live episode, and leaves live envs alone; a removal that fails is retried next time', async () => {
    const rig = await makeRig();
    const m = managerOf(rig);
    const ep = m.create({ task_id: 'fx-echo-0' }, 'ws');
    await m.start(ep);
    rig.sandbox.strays.add('gone-1');
    rig.sandbox.strays.add('gone-2');
    const failOnce = new Set(['gone-2']);
    rig.sandbox.onTeardown = async (id, envRemoved) => {
      if (failOnce.delete(id)) throw new Error('busy');
      envRemoved();
    };
    expect(await m.reconcile()).toEqual(['gone-1', 'gone-2']);
    expect(m.straysRemoved).toBe(1);
    expect(
      rig.log
        .lines()
        .filter((l) => l.event === 'stray_removal_failed')
        .map((l) => l.episode_id),
    ).toEqual(['gone-2']);
    expect(await m.reconcile()).toEqual(['gone-2']);
    expect(m.straysRemoved).toBe(2);
    expect(await m.reconcile()).toEqual([]);
    expect(rig.sandbox.tornDown).toEqual(['gone-1', 'gone-2']);
    // on a timer, until the drain stops it
    rig.sandbox.strays.add('gone-3');
    m.startReconciler(60_000);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(m.straysRemoved).toBe(3);
    await m.drain(1000);
    rig.sandbox.strays.add('gone-4');
    await vi.advanceTimersByTimeAsync(120_000);
    expect(m.straysRemoved).toBe(3);
    expect(await m.reconcile()).toEqual([]);
  });
});
