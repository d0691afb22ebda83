/**
 * How a swarm env is taken away (src/sandbox/swarm/removal.ts), against an in-memory stand-in for
 * the manager that keeps a task's life as swarm does: scaled to nothing, the task is marked
 * `remove`, its node reports its end a moment later, and the task reaper deletes it a moment after
 * that. Docker 20.10's manager crashes when a service is removed while one of its tasks is being
 * reaped (CI lost the lab's manager so: a nil task in swarmkit's SetServiceTasksRemove), so a
 * service is removed only once none of its tasks is left, except a task on a node that is down.
 * The lab tests (multi-node.docker.test.ts and the others) remove services so on a real swarm.
 */
import type Dockerode from 'dockerode';
import { describe, expect, it } from 'vitest';
import type { Owned } from '../../../src/sandbox/engine/owned.js';
import { removeOwned } from '../../../src/sandbox/swarm/removal.js';
import type { SwarmTask } from '../../../src/sandbox/swarm/tasks.js';

interface FakeTask extends SwarmTask {
  ServiceID: string;
}

/** a manager whose tasks end `endMs` after a scale-down and are reaped `reapMs` after that */
function fakeManager(opts: { endMs: number; reapMs: number; lostNode?: string; failedListings?: number }) {
  let failListings = opts.failedListings ?? 0;
  const services = new Map<string, { replicas: number; version: number }>();
  const tasks = new Map<string, FakeTask>();
  const networks = new Set<string>();
  /** what each service removal found in the store: the tasks of the service still there */
  const removals: Array<{ service: string; tasksLeft: string[] }> = [];
  const timers: NodeJS.Timeout[] = [];
  const later = (ms: number, fn: () => void) => timers.push(setTimeout(fn, ms));
  const addEnv = (id: string, node = 'node1') => {
    services.set(id, { replicas: 1, version: 1 });
    tasks.set(`task-${id}`, { ID: `task-${id}`, ServiceID: id, NodeID: node, DesiredState: 'running', Status: { State: 'running' } });
    networks.add(`net-${id}`);
  };
  const docker = {
    getService: (id: string) => ({
      inspect: async () => {
        const s = services.get(id);
        if (!s) throw Object.assign(new Error('no such service'), { statusCode: 404 });
        return { Version: { Index: s.version }, Spec: { Mode: { Replicated: { Replicas: s.replicas } } } };
      },
      update: async (spec: { Mode: { Replicated: { Replicas: number } } }) => {
        const s = services.get(id)!;
        s.replicas = spec.Mode.Replicated.Replicas;
        s.version++;
        for (const t of tasks.values()) {
          if (t.ServiceID !== id) continue;
          t.DesiredState = 'remove';
          // a node that is down reports nothing: its task neither ends nor goes
          if (t.NodeID === opts.lostNode) continue;
          later(opts.endMs, () => {
            t.Status = { State: 'shutdown' };
            later(opts.reapMs, () => tasks.delete(t.ID));
          });
        }
      },
      remove: async () => {
        removals.push({ service: id, tasksLeft: [...tasks.values()].filter((t) => t.ServiceID === id).map((t) => t.ID) });
        services.delete(id);
      },
    }),
    listTasks: async ({ filters }: { filters: string }) => {
      if (failListings-- > 0) throw Object.assign(new Error('context deadline exceeded'), { statusCode: 500 });
      const wanted = (JSON.parse(filters) as { service: string[] }).service;
      return [...tasks.values()].filter((t) => wanted.includes(t.ServiceID)).map((t) => structuredClone(t));
    },
    listNodes: async () =>
      ['node1', 'node2'].map((ID) => ({
        ID,
        Status: { State: ID === opts.lostNode ? 'down' : 'ready', Addr: '10.0.0.1' },
        Spec: { Availability: 'active', Role: ID === 'node1' ? 'manager' : 'worker' },
        Description: { Resources: { NanoCPUs: 2e9, MemoryBytes: 2 ** 30 } },
      })),
    getNetwork: (id: string) => ({
      remove: async () => {
        const service = id.replace(/^net-/, '');
        // as swarmkit's removeNetwork: in use by a task still meant to run (scaled down: desired `remove`, whatever runs on its node)
        if ([...tasks.values()].some((t) => t.ServiceID === service && t.NodeID !== opts.lostNode && t.DesiredState === 'running'))
          throw Object.assign(new Error(`network ${id} is in use by task`), { statusCode: 409 });
        networks.delete(id);
      },
    }),
  };
  return { docker: docker as unknown as Dockerode, addEnv, removals, tasks, networks, stop: () => timers.forEach(clearTimeout) };
}

function owned(ids: string[]): Owned {
  return {
    envs: ids.map((id) => ({ id, episode: `ep-${id}` })),
    networks: ids.map((id) => ({ id: `net-${id}`, episode: `ep-${id}` })),
  } as unknown as Owned;
}

function settings(networkRemovalMs = 5000) {
  const warned: string[] = [];
  const log = { warn: (_o: unknown, msg: string) => warned.push(msg), info: () => undefined, error: () => undefined, debug: () => undefined };
  let envRemoved = 0;
  return {
    opts: { attachContainer: null, attempts: 3, baseDelayMs: 10, networkRemovalMs, log: log as never, onEnvRemoved: () => envRemoved++ },
    warned,
    envRemoved: () => envRemoved,
  };
}

describe('removing swarm envs', () => {
  it('removes a service only once its tasks are reaped, not merely ended (the moment Docker 20.10 crashes in)', async () => {
    // the reaper takes longer than a poll: removing at the task's end would find it still in the store
    const m = fakeManager({ endMs: 50, reapMs: 700 });
    const ids = ['svc-a', 'svc-b', 'svc-c'];
    ids.forEach((id) => m.addEnv(id));
    const s = settings();
    try {
      const result = await removeOwned(m.docker, owned(ids), s.opts);
      expect(result.failed).toEqual([]);
      expect(m.removals.map((r) => r.service).sort()).toEqual(ids);
      for (const r of m.removals) expect(r.tasksLeft, `tasks of ${r.service} in the store when it was removed`).toEqual([]);
      expect(m.networks.size).toBe(0);
      expect(s.envRemoved()).toBe(1);
      expect(s.warned).toEqual([]);
    } finally {
      m.stop();
    }
  });

  it('does not wait for a task on a node that is down, which neither ends nor goes', async () => {
    const m = fakeManager({ endMs: 20, reapMs: 100, lostNode: 'node2' });
    m.addEnv('svc-up', 'node1');
    m.addEnv('svc-lost', 'node2');
    const s = settings(20_000);
    const started = Date.now();
    try {
      await removeOwned(m.docker, owned(['svc-up', 'svc-lost']), s.opts);
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(m.removals.find((r) => r.service === 'svc-up')!.tasksLeft).toEqual([]);
      expect(m.removals.find((r) => r.service === 'svc-lost')!.tasksLeft).toEqual(['task-svc-lost']);
      expect(s.warned).toEqual([]);
    } finally {
      m.stop();
    }
  });

  it('gives up waiting after networkRemovalMs, says so, and removes the service anyway', async () => {
    // a task the reaper never deletes (a manager that never reaps): bounded, not forever
    const m = fakeManager({ endMs: 20, reapMs: 60_000 });
    m.addEnv('svc-slow');
    const s = settings(1500);
    try {
      await removeOwned(m.docker, owned(['svc-slow']), s.opts);
      expect(m.removals.map((r) => r.service)).toEqual(['svc-slow']);
      expect(s.warned).toContain('the tasks of scaled-down services were not all gone in time; removing the services anyway');
    } finally {
      m.stop();
    }
  });

  /** removes one env of a fake manager (its fake stopped after), with `networkRemovalMs` */
  async function removeOne(manager: Parameters<typeof fakeManager>[0], networkRemovalMs?: number) {
    const m = fakeManager(manager);
    m.addEnv('svc-one');
    const s = settings(networkRemovalMs);
    const result = await removeOwned(m.docker, owned(['svc-one']), s.opts).finally(() => m.stop());
    return { result, removals: m.removals, networksLeft: m.networks.size, envRemoved: s.envRemoved() };
  }

  it('waits through listings that fail: a manager that does not answer once says nothing of whether the tasks are gone', async () => {
    // the first listings fail (the one before the scale-down among them); the tasks end and are reaped meanwhile
    const r = await removeOne({ endMs: 300, reapMs: 300, failedListings: 4 });
    expect(r.result.failed).toEqual([]);
    expect(r.removals).toEqual([{ service: 'svc-one', tasksLeft: [] }]);
    expect(r.envRemoved).toBe(1);
  });

  it('does not say the env removed while its task still runs at the deadline: the removal is reported failed', async () => {
    // a node that never stops the container: its task stays running
    const r = await removeOne({ endMs: 60_000, reapMs: 100 }, 1500);
    expect(r.envRemoved).toBe(0);
    // the overlay went (swarm lets it: the task is meant to go): only the task, still running, holds the slot
    expect(r.networksLeft).toBe(0);
    expect(r.result.failed.map((f) => [f.kind, f.id, String(f.error)])).toEqual([
      ['service', 'svc-one', expect.stringMatching(/task task-svc-one on node node1 was still running 1.5 s after the service was scaled to nothing/)],
    ]);
  });
});
