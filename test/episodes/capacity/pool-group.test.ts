/**
 * The warm pool's groups (--warm-pool-group) and its stale envs, over the rig's fake sandbox and
 * fake clock, in a bundle of 32 envs (a Harbor dataset's task each with its own image): a
 * group's first reset starts N-1 more of its env; a group arriving together starts no more than
 * it needs; later resets of a group take the envs still deploying; envs of a group nobody took
 * give way; the env asked for least lately gives way first; the cap holds throughout.
 */
import { describe, expect, it, vi } from 'vitest';
import type { LoadedBundle } from '../../../src/bundle/index.js';
import { WARM_POOL } from '../../../src/defaults.js';
import { WarmPool, type Lease } from '../../../src/episodes/capacity/pool.js';
import type { GroupSize } from '../../../src/episodes/capacity/pool-demand.js';
import { makeRig, metricValue, onRigClock, type Rig } from '../../support/fake-sandbox.js';

/** a bundle of `n` envs e0…e{n-1}, its default split holding tasks of `seeded` only */
function manyEnvBundle(n: number, seeded: string[]): LoadedBundle {
  const envs = Object.fromEntries(Array.from({ length: n }, (_, i) => [`e${i}`, {}]));
  const tasks = seeded.map((env, i) => ({ task_id: `t${i}`, env }));
  return {
    manifest: { envs, default_split: 'train' },
    splits: { train: tasks },
    envOf: (t: { env: string }) => ({ name: t.env, spec: {} }),
  } as unknown as LoadedBundle;
}

interface Setup {
  rig: Rig;
  pool: WarmPool;
  /** env names of the pool's deploys, in order */
  deployedEnvs: string[];
  /** the most admission slots taken at once, sampled at every deploy and every lease */
  maxActive: () => number;
}

async function setUp(opts: {
  capacity: number;
  size: number;
  group: GroupSize;
  seeded: string[];
  deployMs?: number;
  imageReady?: (env: string) => boolean;
}): Promise<Setup> {
  const rig = await makeRig({ capacity: opts.capacity, deployLimit: 8 });
  const bundle = manyEnvBundle(32, opts.seeded);
  const deployedEnvs: string[] = [];
  let max = 0;
  const sample = () => (max = Math.max(max, rig.admission.activeCount));
  rig.sandbox.beforeDeploy = async (req) => {
    sample();
    deployedEnvs.push(req.env.name);
    if (opts.deployMs) await new Promise((r) => setTimeout(r, opts.deployMs));
  };
  const pool = new WarmPool({
    size: opts.size,
    group: opts.group,
    bundle,
    sandbox: rig.sandbox,
    admission: rig.admission,
    deploys: rig.deploys,
    envSpec: async (name) => ({ ...rig.spec, name }),
    ...(opts.imageReady ? { imageReady: opts.imageReady } : {}),
    metrics: rig.metrics,
    log: rig.log.logger,
    check: async () => true,
  });
  pool.start();
  await vi.advanceTimersByTimeAsync(opts.deployMs ?? 0);
  return { rig, pool, deployedEnvs, maxActive: () => (sample(), max) };
}

function reset(s: Setup, env: string): Promise<Lease> {
  return s.pool.acquire(env, { timeoutMs: 60_000, adopt: () => {} });
}

const byEnv = (s: Setup, env: string) => s.pool.status().by_env[env]!;
/** how many ready pooled envs of each of `envs` */
const readyOf = (s: Setup, ...envs: string[]) => envs.map((e) => byEnv(s, e).ready);

describe('warm pool groups (--warm-pool-group)', () => {
  onRigClock();

  it("a group's first reset starts N-1 more of its env (evicting the stalest pooled envs for room); its later resets, staggered, are hits", async () => {
    const s = await setUp({ capacity: 16, size: 8, group: 8, seeded: ['e0'] });
    expect(byEnv(s, 'e0').ready).toBe(8);
    const first = await reset(s, 'e1');
    expect(first.pooled).toBeNull();
    await vi.advanceTimersByTimeAsync(0);
    // room for 7 of e1: 7 of the 8 pooled e0 (no group of theirs open) gave way
    expect(byEnv(s, 'e1')).toEqual({ ready: 7, deploying: 0 });
    expect(byEnv(s, 'e0').ready).toBe(1);
    expect(await metricValue(s.rig.metrics.poolDiscarded, { reason: 'stale' })).toBe(7);
    const later: Lease[] = [];
    for (let i = 0; i < 7; i++) {
      await vi.advanceTimersByTimeAsync(400);
      later.push(await reset(s, 'e1'));
    }
    expect(later.every((l) => l.pooled !== null)).toBe(true);
    expect(s.pool.counts).toMatchObject({ hits: 7, misses: 1 });
    // 8 resets of e1, 7 envs of e1 deployed by the pool: none more
    expect(s.deployedEnvs.filter((e) => e === 'e1')).toHaveLength(7);
    expect(s.maxActive()).toBeLessThanOrEqual(16);
  });

  it('a group of 8 arriving together starts no more than it needs: no more envs of its env than its 8 resets', async () => {
    const s = await setUp({ capacity: 16, size: 8, group: 8, seeded: ['e0'], deployMs: 1000 });
    const burst = Array.from({ length: 8 }, () => reset(s, 'e1'));
    await vi.advanceTimersByTimeAsync(5000);
    const leases = await Promise.all(burst);
    const own = leases.filter((l) => l.pooled === null).length;
    const pooledE1 = s.deployedEnvs.filter((e) => e === 'e1').length;
    expect(own + pooledE1).toBeLessThanOrEqual(8);
    expect(s.pool.counts.hits + s.pool.counts.misses).toBe(8);
    // and nothing of e1 stays pooled for a group that is complete
    expect(byEnv(s, 'e1')).toEqual({ ready: 0, deploying: 0 });
    expect(s.maxActive()).toBeLessThanOrEqual(16);
  });

  it('a group staggered while its envs still deploy: later resets take those deploying (hits), none deploys its own', async () => {
    const s = await setUp({ capacity: 16, size: 8, group: 4, seeded: ['e0', 'e1', 'e2', 'e3', 'e4', 'e5', 'e6', 'e7'], deployMs: 1000 });
    // a pool with room: 4 of the 8 seeded envs' slots are free once they give way; here the pool holds e0…e7
    const first = await reset(s, 'e9');
    expect(first.pooled).toBeNull();
    await vi.advanceTimersByTimeAsync(100);
    expect(byEnv(s, 'e9').deploying).toBe(3);
    const rest = [100, 200, 300].map(async (ms) => {
      await vi.advanceTimersByTimeAsync(ms);
      return reset(s, 'e9');
    });
    await vi.advanceTimersByTimeAsync(3000);
    const leases = await Promise.all(rest);
    expect(leases.every((l) => l.pooled !== null)).toBe(true);
    expect(s.deployedEnvs.filter((e) => e === 'e9')).toHaveLength(3);
    expect(s.pool.counts).toMatchObject({ hits: 3, misses: 1 });
  });

  it("a reset waiting for its group's env still deploying goes to the queue at its reset timeout (a free slot: it deploys its own)", async () => {
    const s = await setUp({ capacity: 16, size: 8, group: 4, seeded: ['e0'], deployMs: 10_000 });
    await reset(s, 'e1');
    await vi.advanceTimersByTimeAsync(100);
    expect(byEnv(s, 'e1').deploying).toBe(3);
    let lease: Lease | null = null;
    void s.pool.acquire('e1', { timeoutMs: 2000, adopt: () => {} }).then((l) => (lease = l));
    await vi.advanceTimersByTimeAsync(1900);
    expect(lease).toBeNull();
    await vi.advanceTimersByTimeAsync(200);
    expect(lease).not.toBeNull();
    expect(lease!.pooled).toBeNull();
    // the env it waited for is back in the pool, unpromised, still deploying
    expect(byEnv(s, 'e1').deploying).toBe(3);
    expect(s.pool.counts).toMatchObject({ hits: 0, misses: 2 });
  });

  it('envs started for a group that nobody takes give way after a while (discarded, reason expired)', async () => {
    const s = await setUp({ capacity: 16, size: 8, group: 8, seeded: ['e0'] });
    await reset(s, 'e1');
    await vi.advanceTimersByTimeAsync(500);
    await reset(s, 'e1');
    await vi.advanceTimersByTimeAsync(0);
    expect(byEnv(s, 'e1').ready).toBe(6);
    await vi.advanceTimersByTimeAsync(WARM_POOL.anticipationTtlMs + 1000);
    expect(await metricValue(s.rig.metrics.poolDiscarded, { reason: 'expired' })).toBe(6);
    expect(s.pool.status().ready + s.pool.status().deploying).toBeLessThanOrEqual(8);
  });

  it('auto: learns the group size from how resets of one env arrive (the median of the last groups), off until a group closed', async () => {
    const s = await setUp({ capacity: 32, size: 8, group: 'auto', seeded: ['e0'] });
    /** the envs a reset of `env` made the pool start at once */
    const startedBy = async (env: string): Promise<string[]> => {
      const before = s.deployedEnvs.length;
      (await reset(s, env)).slot.release();
      await vi.advanceTimersByTimeAsync(0);
      return s.deployedEnvs.slice(before);
    };
    // the first group of 4 (200 ms apart): nothing is known yet, nothing is started for it
    expect(await startedBy('e1')).toEqual([]);
    for (let i = 0; i < 3; i++) {
      await vi.advanceTimersByTimeAsync(200);
      (await reset(s, 'e1')).slot.release();
    }
    await vi.advanceTimersByTimeAsync(WARM_POOL.groupGapMs + 1000);
    // once it closed, groups are 4: the next env's first reset starts 3 more of it
    expect(await startedBy('e2')).toEqual(['e2', 'e2', 'e2']);
  });

  it('the cap holds: with 4 slots and groups of 8, the pool starts only what free slots allow, never ahead of a waiting reset', async () => {
    const s = await setUp({ capacity: 4, size: 4, group: 8, seeded: ['e0'], deployMs: 500 });
    const leases: Promise<Lease>[] = [];
    for (let i = 0; i < 8; i++) {
      leases.push(reset(s, 'e1'));
      await vi.advanceTimersByTimeAsync(100);
    }
    await vi.advanceTimersByTimeAsync(2000);
    expect(s.maxActive()).toBeLessThanOrEqual(4);
    // the episodes end one by one; the waiting resets get slots (or pooled envs), the cap still holds
    for (const l of leases) {
      const lease = await l;
      expect(s.rig.admission.activeCount).toBeLessThanOrEqual(4);
      lease.slot.release();
      await vi.advanceTimersByTimeAsync(600);
    }
    expect(s.maxActive()).toBeLessThanOrEqual(4);
    expect(s.pool.counts.hits + s.pool.counts.misses).toBe(8);
  });
});

describe('stale envs give way first', () => {
  onRigClock();

  it('with the pool full, demand for another env evicts the pooled env of the env asked for least lately', async () => {
    const s = await setUp({ capacity: 8, size: 2, group: 2, seeded: ['e0', 'e1'] });
    // e0 asked for at 0 s, e1 at 5 s: each a hit, each refilled with its own env for the rest of its group of 2
    expect((await reset(s, 'e0')).pooled).not.toBeNull();
    await vi.advanceTimersByTimeAsync(5000);
    expect((await reset(s, 'e1')).pooled).not.toBeNull();
    await vi.advanceTimersByTimeAsync(WARM_POOL.groupGapMs + 2000);
    expect(readyOf(s, 'e0', 'e1')).toEqual([1, 1]);
    await reset(s, 'e2');
    await vi.advanceTimersByTimeAsync(0);
    // e0 (asked for least lately) went, e1 stayed, e2 came in its place
    expect(readyOf(s, 'e0', 'e1', 'e2')).toEqual([0, 1, 1]);
    expect(await metricValue(s.rig.metrics.poolDiscarded, { reason: 'stale' })).toBe(1);
  });

  it('an env whose group is over gives way before one only the seeding guessed (a group still to come); one whose group is arriving never does', async () => {
    const s = await setUp({ capacity: 8, size: 2, group: 2, seeded: ['e0', 'e1'] });
    await vi.advanceTimersByTimeAsync(5000);
    expect((await reset(s, 'e1')).pooled).not.toBeNull();
    await vi.advanceTimersByTimeAsync(WARM_POOL.groupGapMs + 2000);
    await reset(s, 'e2');
    await vi.advanceTimersByTimeAsync(0);
    // e1's group is over: it goes, though the seeded e0 was named earlier
    expect(readyOf(s, 'e0', 'e1', 'e2')).toEqual([1, 0, 1]);
    // e2's group is arriving: a group of e3 finds nothing that may give way but the seeded e0
    await reset(s, 'e3');
    await vi.advanceTimersByTimeAsync(0);
    expect(readyOf(s, 'e0', 'e2', 'e3')).toEqual([0, 1, 1]);
  });

  it('without groups: a pooled env of an env nobody asked for within the stale time gives way to a reset of another env; refills skip stale envs', async () => {
    const s = await setUp({ capacity: 8, size: 2, group: 1, seeded: ['e0'] });
    expect(byEnv(s, 'e0').ready).toBe(2);
    // e0 fresh: a reset of e5 finds the pool full of e0 and deploys its own, the pool keeps e0
    (await reset(s, 'e5')).slot.release();
    await vi.advanceTimersByTimeAsync(0);
    expect(byEnv(s, 'e0').ready).toBe(2);
    await vi.advanceTimersByTimeAsync(WARM_POOL.staleAfterMs + 1000);
    // now e0 is stale (and so is e5): a reset of e6 has one e0 give way, refilled with e6 (the one env asked for lately)
    (await reset(s, 'e6')).slot.release();
    await vi.advanceTimersByTimeAsync(0);
    expect(byEnv(s, 'e0').ready).toBe(1);
    expect(byEnv(s, 'e6').ready).toBe(1);
    expect(await metricValue(s.rig.metrics.poolDiscarded, { reason: 'stale' })).toBe(1);
  });

  it('deploys no env ahead of demand before its image is ready: no slot held through a build; it fills as images become ready', async () => {
    const ready = new Set<string>();
    const s = await setUp({ capacity: 8, size: 4, group: 4, seeded: ['e0', 'e1'], imageReady: (e) => ready.has(e) });
    // no image ready: nothing deployed, no slot taken
    expect(s.deployedEnvs).toEqual([]);
    expect(s.rig.admission.activeCount).toBe(0);
    // a group of e2 arrives while its image builds: nothing started for it yet
    const first = await reset(s, 'e2');
    expect(first.pooled).toBeNull();
    await vi.advanceTimersByTimeAsync(0);
    expect(s.deployedEnvs).toEqual([]);
    // e2's image is ready: the rest of its group is started (3), then the pool fills up to its size
    // with what demand names among envs whose image is ready (e2 again: e0 and e1 are still building)
    ready.add('e2');
    s.pool.imagesChanged();
    await vi.advanceTimersByTimeAsync(0);
    expect(s.deployedEnvs).toEqual(['e2', 'e2', 'e2', 'e2']);
    expect(s.rig.admission.activeCount).toBe(5);
    expect(s.maxActive()).toBeLessThanOrEqual(8);
    first.slot.release();
  });

  it("guesses no env demand does not name because its image happens to be ready first: it waits for the seeded envs' images", async () => {
    // the background builds finish in any order: e5's image (no task of the default split) before e0's
    const ready = new Set<string>(['e5']);
    const s = await setUp({ capacity: 8, size: 4, group: 4, seeded: ['e0'], imageReady: (e) => ready.has(e) });
    s.pool.imagesChanged();
    await vi.advanceTimersByTimeAsync(0);
    expect(s.deployedEnvs).toEqual([]);
    expect(s.rig.admission.activeCount).toBe(0);
    ready.add('e0');
    s.pool.imagesChanged();
    await vi.advanceTimersByTimeAsync(0);
    expect(s.deployedEnvs).toEqual(['e0', 'e0', 'e0', 'e0']);
  });
});
