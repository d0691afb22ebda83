/**
 * What the bench reads off a real engine (scripts/bench/engine.ts): the run's leftovers found by
 * label, whatever kind they are, and removed without touching another run's; the memory of an
 * instance's running env containers from the engine's stats; the engine's own processes.
 */
import { afterAll, expect, it } from 'vitest';
import { benchContext } from '../../scripts/bench/context.js';
import { countRunLeftovers, engineMemory, envContainersMemory, removeRunLeftovers } from '../../scripts/bench/engine.js';
import { LABELS } from '../../src/sandbox/sandbox.js';
import { LOCK_LABELS } from '../../src/sandbox/engine/instance-lock.js';
import { describeDocker, LOCAL_NODE_IMAGE, uniqueInstance } from '../support/docker.js';

describeDocker('the bench on the engine', () => {
  const ctx = { ...benchContext(LOCAL_NODE_IMAGE), run: uniqueInstance('benchtest'), progress: () => undefined };
  // another run's resources, which must survive this run's clean-up (a run id that merely starts like ours included)
  const other = { ...ctx, run: `${ctx.run}x` };

  afterAll(async () => {
    await removeRunLeftovers(ctx);
    await removeRunLeftovers(other);
  });

  it("counts the run's containers, networks and volumes by label, removes them all, and leaves another run's alone", async () => {
    const d = ctx.docker;
    const instance = `${ctx.run}-cold`;
    await d.createNetwork({ Name: `${ctx.run}-n0`, Internal: true, Labels: { bench: ctx.run } });
    const serverNet = await d.createNetwork({ Name: `${instance}-ep`, Internal: true, Labels: { [LABELS.managed]: '1', [LABELS.instance]: instance } });
    const ctr = await d.createContainer({
      Image: LOCAL_NODE_IMAGE,
      Cmd: ['node', '-e', 'setInterval(() => {}, 1000)'],
      Labels: { [LABELS.managed]: '1', [LABELS.instance]: instance },
      HostConfig: { NetworkMode: serverNet.id },
    });
    await ctr.start();
    await d.createVolume({ Name: `${instance}-claim`, Labels: { [LABELS.managed]: '1', [LOCK_LABELS.lock]: instance } });
    await d.createNetwork({ Name: `${other.run}-n0`, Internal: true, Labels: { bench: other.run } });

    expect(await countRunLeftovers(ctx)).toEqual({ containers: 1, networks: 2, volumes: 1 });
    expect(await countRunLeftovers(other)).toEqual({ containers: 0, networks: 1, volumes: 0 });

    // what the bench reads while envs are live: the running container's memory, the engine's processes
    const mem = await envContainersMemory(ctx, instance);
    expect(mem.containers).toBe(1);
    expect(mem.mb).toBeGreaterThan(1);
    const engine = engineMemory();
    expect(engine.dockerd_mb).toBeGreaterThan(0);
    expect(engine.shims).toBeGreaterThanOrEqual(1);
    expect(engine.shims_mb).toBeGreaterThan(0);

    // a running container on a network of its own: removed before its network, so both go
    await removeRunLeftovers(ctx);
    expect(await countRunLeftovers(ctx)).toEqual({ containers: 0, networks: 0, volumes: 0 });
    expect(await countRunLeftovers(other)).toEqual({ containers: 0, networks: 1, volumes: 0 });
  });
});
