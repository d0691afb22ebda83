/**
 * The env lease on its own, over a fake sandbox and a fake clock: where an episode's slot is
 * taken (admission, or with a pooled env) and freed (the moment the sandbox says the env is gone,
 * or after a teardown that failed), and how its env is got (pooled, or deployed under the deploy
 * limiter at a reset's priority).
 */
import { describe, expect, it, vi } from 'vitest';
import { isAbortError } from '../../../src/util/abort.js';
import { EnvLease } from '../../../src/episodes/capacity/env-lease.js';
import { WarmPool } from '../../../src/episodes/capacity/pool.js';
import { gate, makeRig, metricValue, onRigClock, type Rig } from '../../support/fake-sandbox.js';

const signal = () => new AbortController().signal;

function leaseOf(rig: Rig, episodeId = 'ep-1'): EnvLease {
  return new EnvLease(rig.deps, episodeId, 'echo', rig.log.logger);
}

describe('EnvLease', () => {
  onRigClock();

  it('frees its slot the moment the sandbox says the env is gone, before the teardown ends; the next waiter gets it then', async () => {
    const rig = await makeRig({ capacity: 1 });
    const lease = leaseOf(rig);
    await lease.takeSlot({ queueTimeoutMs: 1000, signal: signal() });
    const handle = await lease.env(signal());
    expect(handle.envId).toBe('ep-1');
    expect(rig.admission.activeCount).toBe(1);
    const next = rig.admission.acquire({ timeoutMs: 60_000 });
    const networkGone = gate();
    // the container goes after 2 s of the fake clock, the network 3 s later
    rig.sandbox.onTeardown = async (_id, envRemoved) => {
      vi.setSystemTime(Date.now() + 2000);
      envRemoved();
      await networkGone.promise;
      vi.setSystemTime(Date.now() + 3000);
    };
    const released = lease.release();
    let slot: Awaited<typeof next> | null = null;
    void next.then((s) => (slot = s));
    await vi.advanceTimersByTimeAsync(0);
    // the waiter has the slot while the teardown still removes the network
    expect(slot).not.toBeNull();
    expect(rig.sandbox.tornDown).toEqual([]);
    networkGone.open();
    await released;
    expect(rig.sandbox.tornDown).toEqual(['ep-1']);
    expect(await metricValue(rig.metrics.teardownStage, { stage: 'env_removed' }, '_sum')).toBe(2);
    expect(await metricValue(rig.metrics.teardownStage, { stage: 'network_removed' }, '_sum')).toBe(3);
    expect(await metricValue(rig.metrics.teardown, { outcome: 'ok' }, '_sum')).toBe(5);
    slot!.release();
    expect(rig.admission.activeCount).toBe(0);
  });

  it('a teardown that fails frees the slot anyway and says the reconciler will retry', async () => {
    const rig = await makeRig({ capacity: 1 });
    const lease = leaseOf(rig);
    await lease.takeSlot({ queueTimeoutMs: 1000, signal: signal() });
    await lease.env(signal());
    rig.sandbox.onTeardown = async () => {
      throw new Error('the engine said no');
    };
    await lease.release();
    expect(rig.admission.activeCount).toBe(0);
    expect(
      rig.log
        .lines()
        .filter((l) => l.event === 'teardown_failed')
        .map((l) => l.err),
    ).toEqual(['the engine said no']);
    expect(await metricValue(rig.metrics.teardown, { outcome: 'failed' }, '_count')).toBe(1);
  });

  it('release is idempotent: every call gets the same promise and the sandbox is asked once', async () => {
    const rig = await makeRig();
    const lease = leaseOf(rig);
    await lease.takeSlot({ queueTimeoutMs: 1000, signal: signal() });
    await lease.env(signal());
    const a = lease.release();
    const b = lease.release();
    expect(b).toBe(a);
    await Promise.all([a, b, lease.release()]);
    expect(rig.sandbox.tornDown).toEqual(['ep-1']);
  });

  it('with nothing deployed, release frees the slot without asking the sandbox to remove anything', async () => {
    const rig = await makeRig();
    const lease = leaseOf(rig);
    await lease.takeSlot({ queueTimeoutMs: 1000, signal: signal() });
    await lease.release();
    expect(rig.admission.activeCount).toBe(0);
    expect(rig.sandbox.tornDown).toEqual([]);
  });

  it('a signal aborted before the deploy: AbortError, nothing deployed, and the slot still goes back', async () => {
    const rig = await makeRig();
    const lease = leaseOf(rig);
    await lease.takeSlot({ queueTimeoutMs: 1000, signal: signal() });
    // its image was ready at once: no image wait to tell
    expect(lease.imageWaitedMs).toBeNull();
    const ac = new AbortController();
    ac.abort();
    expect(isAbortError(await lease.env(ac.signal).catch((e: unknown) => e))).toBe(true);
    expect(rig.sandbox.deployed).toEqual([]);
    await lease.release();
    expect(rig.admission.activeCount).toBe(0);
  });

  it('deploys at a reset’s priority: a freed deploy turn goes to the lease before a refill that waited longer', async () => {
    const rig = await makeRig({ capacity: 4, deployLimit: 1 });
    const order: string[] = [];
    const blocker = gate();
    const busy = rig.deploys.run(() => blocker.promise, { priority: 'refill' });
    const refill = rig.deploys.run(async () => order.push('refill'), { priority: 'refill' });
    rig.sandbox.beforeDeploy = async (req) => void order.push(req.envId);
    const lease = leaseOf(rig);
    await lease.takeSlot({ queueTimeoutMs: 1000, signal: signal() });
    const env = lease.env(signal());
    await vi.advanceTimersByTimeAsync(0);
    expect(rig.deploys.waiting).toBe(2);
    blocker.open();
    await Promise.all([busy, refill, env]);
    expect(order).toEqual(['ep-1', 'refill']);
    await lease.release();
  });

  it("waits for its env's image before it takes a slot, saying so; the slot's wait gets what is left of the one timeout; a failed image takes no slot", async () => {
    const rig = await makeRig({ capacity: 1 });
    const image = gate();
    const told: string[] = [];
    rig.deps.envSpec = async (_name, wait) => {
      wait?.onWait?.('building');
      told.push(`timeout ${wait?.timeoutMs}`);
      await image.promise;
      return rig.spec;
    };
    const lease = leaseOf(rig);
    // the one slot is held: the lease waits for its image, then for the slot
    const holder = await rig.admission.acquire({ timeoutMs: 1000 });
    const taking = lease.takeSlot({ queueTimeoutMs: 10_000, signal: signal() }).catch((e: Error) => e);
    await vi.advanceTimersByTimeAsync(4000);
    expect(told).toEqual(['timeout 10000']);
    expect(rig.admission.waitingCount).toBe(0);
    expect(rig.log.lines().filter((l) => l.event === 'waiting_for_image')).toEqual([
      expect.objectContaining({ env: 'echo', image_state: 'building', msg: 'waiting for its image (env "echo": building)' }),
    ]);
    image.open();
    await vi.advanceTimersByTimeAsync(0);
    expect(rig.admission.waitingCount).toBe(1);
    // 4 s went to the image: the slot's wait ends 6 s later, not 10
    await vi.advanceTimersByTimeAsync(5900);
    expect(rig.admission.waitingCount).toBe(1);
    await vi.advanceTimersByTimeAsync(200);
    expect((await taking) as Error).toMatchObject({ name: 'CapacityError' });
    // the 4 s of the image's wait, for the reset's timings
    expect(lease.imageWaitedMs).toBe(4000);
    holder.release();

    // an image that failed: no slot, and env() throws its error
    const failed = new EnvLease(
      { ...rig.deps, envSpec: () => Promise.reject(new Error('cannot build the image of env `echo`: step 2 failed')) },
      'ep-2',
      'echo',
      rig.log.logger,
    );
    await failed.takeSlot({ queueTimeoutMs: 1000, signal: signal() });
    expect(failed.holdsSlot).toBe(false);
    await expect(failed.env(signal())).rejects.toThrow('step 2 failed');
  });

  describe('with a warm pool', () => {
    async function pooledRig() {
      const rig = await makeRig({ capacity: 2 });
      const pool = new WarmPool({
        size: 1,
        bundle: rig.bundle,
        sandbox: rig.sandbox,
        admission: rig.admission,
        deploys: rig.deploys,
        envSpec: async () => rig.spec,
        metrics: rig.metrics,
        log: rig.log.logger,
        now: () => Date.now(),
        check: async () => true,
      });
      rig.deps.pool = pool;
      pool.start();
      await vi.advanceTimersByTimeAsync(0);
      expect(pool.status().ready).toBe(1);
      return { rig, pool };
    }

    it('takes the pooled env with its slot: the env’s own id from the hand-over on, no deploy of its own, the wait in the pool timed', async () => {
      const { rig, pool } = await pooledRig();
      const [pooledId] = rig.sandbox.deployed;
      expect(pooledId).toMatch(/^pool-/);
      await vi.advanceTimersByTimeAsync(1500);
      const lease = leaseOf(rig);
      await lease.takeSlot({ queueTimeoutMs: 1000, signal: signal() });
      expect(lease.envId).toBe(pooledId);
      expect(lease.pooled).toEqual({ waitedMs: 1500 });
      expect(pool.holds(pooledId!)).toBe(false);
      const handle = await lease.env(signal());
      expect(handle.envId).toBe(pooledId);
      // the pool refills its own slot; the lease deployed nothing
      expect(rig.sandbox.deployed.filter((id) => !id.startsWith('pool-'))).toEqual([]);
      await lease.release();
      expect(rig.sandbox.tornDown).toEqual([pooledId]);
      await pool.close();
    });

    it('a pooled env that died before the first observation is replaced once, under the episode’s own id', async () => {
      const { rig, pool } = await pooledRig();
      const lease = leaseOf(rig, 'ep-7');
      await lease.takeSlot({ queueTimeoutMs: 1000, signal: signal() });
      const dead = lease.envId;
      await lease.env(signal());
      const fresh = await lease.replaceDeadPooledEnv(signal());
      expect(fresh.envId).toBe('ep-7');
      expect(lease.envId).toBe('ep-7');
      expect(lease.pooled).toBeNull();
      expect(rig.sandbox.tornDown).toEqual([dead]);
      expect(await metricValue(rig.metrics.poolDiscarded, { reason: 'dead' })).toBe(1);
      await expect(lease.replaceDeadPooledEnv(signal())).rejects.toThrow('only an env taken from the warm pool is replaced');
      await lease.release();
      expect(rig.sandbox.tornDown).toEqual([dead, 'ep-7']);
      await pool.close();
    });
  });
});
