/**
 * The swarm sandbox's bookkeeping of its overlay stock, against an in-memory stand-in for the
 * manager's API (the lab test, ahead-of-demand.docker.test.ts, proves the same on a real swarm):
 * a stocked overlay is nobody's episode for the reconciler, one taken by a deploy is removed with
 * that deploy and never handed out again, and close() removes the stock. Also the deploy's stage
 * clock and the shared node listing.
 */
import type Dockerode from 'dockerode';
import { describe, expect, it } from 'vitest';
import { LABELS } from '../../../src/sandbox/sandbox.js';
import { STOCK_KEY_PREFIX } from '../../../src/sandbox/engine/network-stock.js';
import { DeployStages } from '../../../src/sandbox/swarm/deploy-stages.js';
import { SwarmSandbox } from '../../../src/sandbox/swarm/swarm-sandbox.js';
import { NodeListing } from '../../../src/sandbox/swarm/tasks.js';
import { waitFor } from '../../support/docker.js';

interface FakeNetwork {
  Id: string;
  Labels: Record<string, string>;
  connected: Set<string>;
}

/** the few manager calls the stock and a failing deploy make; services cannot be created */
function fakeManager() {
  const networks = new Map<string, FakeNetwork>();
  let next = 0;
  let nodeListings = 0;
  const matches = (labels: Record<string, string>, filters?: string) => {
    const wanted: string[] = filters ? ((JSON.parse(filters) as { label?: string[] }).label ?? []) : [];
    return wanted.every((l) => {
      const [k, v] = l.split('=');
      return labels[k!] === v;
    });
  };
  const docker = {
    createNetwork: async (o: { Labels: Record<string, string> }) => {
      const Id = `net${next++}`.padEnd(24, '0');
      networks.set(Id, { Id, Labels: o.Labels, connected: new Set() });
      return { id: Id };
    },
    getNetwork: (id: string) => ({
      connect: async ({ Container }: { Container: string }) => networks.get(id)?.connected.add(Container),
      disconnect: async ({ Container }: { Container: string }) => networks.get(id)?.connected.delete(Container),
      remove: async () => {
        if (!networks.delete(id)) throw Object.assign(new Error('no such network'), { statusCode: 404 });
      },
    }),
    listNetworks: async ({ filters }: { filters?: string }) => [...networks.values()].filter((n) => matches(n.Labels, filters)),
    listServices: async () => [],
    listTasks: async () => [],
    listNodes: async () => {
      nodeListings++;
      return [
        {
          ID: 'node1',
          Status: { State: 'ready', Addr: '10.0.0.1' },
          Spec: { Availability: 'active', Role: 'manager' },
          Description: { Resources: { NanoCPUs: 2e9, MemoryBytes: 8 * 2 ** 30 } },
        },
      ];
    },
    createService: async () => {
      throw Object.assign(new Error('the manager refuses services today'), { statusCode: 500 });
    },
  };
  return { docker: docker as unknown as Dockerode, networks, nodeListings: () => nodeListings };
}

const ENV = {
  name: 'echo',
  image: 'echo:1',
  port: 8000,
  readyPath: '/health',
  deployTimeoutMs: 5000,
  resources: { memoryMb: 64, cpus: 0.1, pids: 64 },
  environment: {},
};

function sandbox(docker: Dockerode, stock: number): SwarmSandbox {
  return new SwarmSandbox({ docker, instance: 'inst', bundleName: 'b', attachContainer: 'server-ctr', networkStock: stock, removeBaseDelayMs: 1 });
}

const episodeOf = (n: FakeNetwork) => n.Labels[LABELS.episode] ?? '';

describe('the swarm overlay stock', () => {
  it('keeps stocked overlays joined and out of the episode ids; a taken one goes with its failed deploy and is never handed out again', async () => {
    const m = fakeManager();
    const s = sandbox(m.docker, 2);
    s.stock.start();
    await waitFor(async () => s.stock.stats().ready === 2, 5000, 'two overlays stocked');
    const first = [...m.networks.values()];
    expect(first.map(episodeOf).every((e) => e.startsWith(STOCK_KEY_PREFIX))).toBe(true);
    // joined before any deploy waits on them
    for (const n of first) expect([...n.connected]).toEqual(['server-ctr']);
    // the reconciler sees no episode in the stock, and still sees a stray
    expect(await s.listEnvIds()).toEqual([]);
    await m.docker.createNetwork({ Name: 'stray', Labels: { ...first[0]!.Labels, [LABELS.episode]: 'old-episode' } });
    expect(await s.listEnvIds()).toEqual(['old-episode']);

    await expect(s.deploy({ envId: 'ep-1', env: ENV })).rejects.toMatchObject({ reason: 'engine_error' });
    const taken = first[0]!.Id;
    // removed with the deploy's cleanup, and the stock made a fresh one in its place
    expect(m.networks.has(taken)).toBe(false);
    await waitFor(async () => s.stock.stats().ready === 2, 5000, 'the stock refilled');
    expect(s.stock.stats()).toMatchObject({ taken: 1, made: 3 });
    expect(s.networksInUse()).toBe(0);
    expect((await s.listEnvIds()).sort()).toEqual(['old-episode']);

    // the drain removes the stock (close() waits for that same removal); what is no stock's stays for the sweep
    await s.stock.stop();
    expect([...m.networks.values()].map(episodeOf)).toEqual(['old-episode']);
    expect(s.stock.stats().ready).toBe(0);
    await s.close();
    expect([...m.networks.values()].map(episodeOf)).toEqual(['old-episode']);
  });

  it('without a stock, a deploy makes its own overlay', async () => {
    const m = fakeManager();
    const s = sandbox(m.docker, 0);
    s.stock.start();
    await expect(s.deploy({ envId: 'ep-2', env: ENV })).rejects.toMatchObject({ reason: 'engine_error' });
    expect(s.stock.stats()).toMatchObject({ size: 0, made: 0, taken: 0 });
    expect(m.networks.size).toBe(0);
    await s.close();
  });
});

describe('a swarm deploy’s stages', () => {
  it('gives each stage the time since the previous mark, in order', () => {
    let t = 1000;
    const stages = new DeployStages(t, () => t);
    t += 5;
    stages.mark('nodes');
    t += 20;
    stages.mark('overlay');
    t += 300;
    stages.mark('schedule');
    t += 7;
    stages.mark('ready');
    expect(stages.fields()).toEqual({ nodesMs: 5, overlayMs: 20, scheduleMs: 300, readyMs: 7 });
    expect(Object.keys(stages.fields())).toEqual(['nodesMs', 'overlayMs', 'scheduleMs', 'readyMs']);
    // the same, by stage name, as the deploy's handle carries them into the stage histogram
    expect(stages.byStage()).toEqual({ nodes: 5, overlay: 20, schedule: 300, ready: 7 });
  });
});

describe('the shared node listing', () => {
  it('serves one listing to the deploys of a burst, lists again once it is old, and keeps no failure', async () => {
    const m = fakeManager();
    let now = 0;
    const listing = new NodeListing(m.docker, 1000, () => now);
    await Promise.all(Array.from({ length: 10 }, () => listing.get()));
    expect(m.nodeListings()).toBe(1);
    now = 1500;
    await listing.get();
    expect(m.nodeListings()).toBe(2);

    let fail = true;
    const flaky = { listNodes: async () => (fail ? Promise.reject(new Error('manager busy')) : m.docker.listNodes()) } as unknown as Dockerode;
    const again = new NodeListing(flaky, 1000, () => now);
    await expect(again.get()).rejects.toThrow('manager busy');
    fail = false;
    await expect(again.get()).resolves.toHaveLength(1);
  });
});
