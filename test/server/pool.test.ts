/**
 * The warm pool and the deploy cap on the ProcessSandbox: pooled envs are single-use, the cap
 * holds with the pool in it, a waiting reset takes a pooled env (or has one of another env
 * evicted for it), a pooled env that died is discarded at hand-out, failing refills stop and say
 * so, and nothing is left after a drain (each server's stop() checks). Events and bounds only.
 * pool.docker.test.ts proves the same of real containers.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parsePrometheusText, valueOf } from '../../scripts/lib/prom-text.js';
import { afterAll, describe, expect, it } from 'vitest';
import { WARM_POOL } from '../../src/defaults.js';
import type { PoolStatus } from '../../src/protocol/pool.js';
import { FIXTURE_BUNDLE, startProcessServer, type ProcessServer } from '../support/process-server.js';
import { waitFor } from '../../scripts/lib/wait.js';
import { WsClient } from '../../scripts/lib/ws-client.js';

async function health(s: ProcessServer): Promise<{ status: string; pool?: PoolStatus }> {
  return (await fetch(`${s.url}/health`)).json() as Promise<{ status: string; pool?: PoolStatus }>;
}

async function metric(s: ProcessServer, name: string, labels: Record<string, string> = {}): Promise<number> {
  return valueOf(parsePrometheusText(await (await fetch(`${s.url}/metrics`)).text()), name, labels) ?? NaN;
}

/** ids of the pooled env processes held now */
function pooledIds(s: ProcessServer): string[] {
  return s.sandbox.held().filter((id) => id.startsWith('pool-'));
}

async function poolReady(s: ProcessServer, n: number): Promise<void> {
  await waitFor(async () => (await health(s)).pool?.ready === n, 30_000, `${n} pooled envs ready`);
}

async function play(c: WsClient, taskId = 'fx-echo-0') {
  const r = await c.reset({ task_id: taskId });
  expect(r.type).toBe('observation');
  const end = await c.call('end_turn', {});
  expect(end.data.done).toBe(true);
  return r.data.observation as { episode_id: string; timings: { pooled?: boolean; pool_wait_s?: number; queued_s: number } };
}

/** the fixture bundle with a second env `echo2` (same server, its own toolset and tasks), the default split using only `echo` */
function twoEnvBundle(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pool-two-envs-'));
  cpSync(FIXTURE_BUNDLE, dir, { recursive: true });
  cpSync(path.join(dir, 'envs/echo'), path.join(dir, 'envs/echo2'), { recursive: true });
  const manifest = JSON.parse(readFileSync(path.join(dir, 'bundle.json'), 'utf8'));
  manifest.name = 'fixture-two-envs';
  manifest.envs.echo2 = { ...manifest.envs.echo, build: 'envs/echo2' };
  manifest.toolsets.echo2 = { ...manifest.toolsets.echo, env: 'echo2' };
  writeFileSync(path.join(dir, 'bundle.json'), JSON.stringify(manifest, null, 2));
  const evalRows = readFileSync(path.join(dir, 'tasks/eval.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  const echo2 = evalRows.map((r, i) => ({ ...r, task_id: `fx2-echo-${i}`, toolset: 'echo2' }));
  writeFileSync(path.join(dir, 'tasks/eval.jsonl'), [...evalRows, ...echo2].map((r) => JSON.stringify(r)).join('\n') + '\n');
  return dir;
}

describe('warm pool', () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  it('fills to --warm-pool; a reset takes a pooled env, which serves that one episode and is gone after; the pool refills with fresh ones', async () => {
    const started = Date.now();
    const s = await startProcessServer({ maxConcurrentEnvs: 4, warmPool: 2 });
    try {
      await poolReady(s, 2);
      // the pooled env's wait is measured from when it was ready to when the reset took it
      await new Promise((r) => setTimeout(r, 300));
      const before = new Set(pooledIds(s));
      expect(before.size).toBe(2);
      const containers = new Map([...before].map((id) => [id, s.sandbox.containerIdOf(id)!]));
      const c = await WsClient.open(s.url);
      const r = await c.reset({ task_id: 'fx-echo-0' });
      const tookBy = Date.now();
      expect(r.type).toBe('observation');
      expect(r.data.observation.timings.pooled).toBe(true);
      const poolWaitMs = r.data.observation.timings.pool_wait_s * 1000;
      expect(poolWaitMs).toBeGreaterThanOrEqual(300);
      expect(poolWaitMs).toBeLessThanOrEqual(tookBy - started + 1);
      const episodeId: string = r.data.observation.episode_id;
      const ep = s.app.openenv.manager.get(episodeId)!;
      expect(before.has(ep.envId)).toBe(true);
      const usedContainer = containers.get(ep.envId)!;
      // slots the pool holds are not counted as running episodes
      await poolReady(s, 2);
      expect(await metric(s, 'openenv_episodes_running')).toBe(1);
      // the episode plays on the pooled env
      expect((await c.call('echo', { text: 'warm' })).data.observation.result.content[0].text).toBe('warm');
      await c.call('end_turn', {});
      await c.close();
      await ep.tornDown;
      // single use: that env (its process, by container id) is gone, and never handed out again
      expect(s.sandbox.held()).not.toContain(ep.envId);
      await poolReady(s, 2);
      const now = pooledIds(s);
      expect(now).not.toContain(ep.envId);
      expect(now.map((id) => s.sandbox.containerIdOf(id))).not.toContain(usedContainer);
      // later episodes, each reset once the pool is full again, get other pooled envs
      const seen = new Set<string>([ep.envId]);
      for (let i = 0; i < 3; i++) {
        await poolReady(s, 2);
        const k = await WsClient.open(s.url);
        const o = await play(k);
        expect(o.timings.pooled).toBe(true);
        const envId = s.app.openenv.manager.get(o.episode_id)!.envId;
        expect(seen.has(envId)).toBe(false);
        seen.add(envId);
        await k.close();
      }
      expect(await metric(s, 'openenv_pool_hits_total')).toBe(4);
      expect(await metric(s, 'openenv_pool_misses_total')).toBe(0);
      expect(await metric(s, 'openenv_pool_target')).toBe(2);
    } finally {
      await s.stop();
    }
  });

  it('a burst larger than the cap: every reset succeeds, the cap (pool included) and the deploy cap reached and never passed, each episode on its own env', async () => {
    const s = await startProcessServer({ maxConcurrentEnvs: 4, warmPool: 4, maxConcurrentDeploys: 2 });
    try {
      await poolReady(s, 4);
      const clients = await Promise.all(Array.from({ length: 10 }, () => WsClient.open(s.url)));
      const envIds = await Promise.all(
        clients.map(async (c) => {
          const r = await c.reset({ task_id: 'fx-echo-0' });
          expect(r.type).toBe('observation');
          const envId = s.app.openenv.manager.get(r.data.observation.episode_id)!.envId;
          await c.call('echo', { text: 'x' });
          await c.call('end_turn', {});
          await c.close();
          return envId;
        }),
      );
      expect(new Set(envIds).size).toBe(10);
      // the full pool held all 4 slots; its first fill ran 2 deploys at once
      expect(s.sandbox.peak).toBe(4);
      expect(s.sandbox.deployPeak).toBe(2);
      // the pool served the first ones
      expect(envIds.filter((id) => id.startsWith('pool-')).length).toBeGreaterThanOrEqual(4);
      await poolReady(s, 4);
      expect(s.sandbox.peak).toBe(4);
      // the reconciler leaves pooled envs alone
      expect(await s.app.openenv.manager.reconcile()).toEqual([]);
      expect(pooledIds(s)).toHaveLength(4);
    } finally {
      await s.stop();
    }
  });

  it('a reset that finds every slot held takes the pooled env still deploying instead of waiting for an episode to end', async () => {
    const s = await startProcessServer({ maxConcurrentEnvs: 2, warmPool: 1 });
    try {
      await poolReady(s, 1);
      // the refill after the first hit deploys slowly, so the next reset finds it deploying
      s.sandbox.overrideNextDeploy({ ECHO_READY_AFTER_MS: '1500' });
      const refill = s.sandbox.nextSpawn();
      const a = await WsClient.open(s.url);
      const ra = await a.reset({ task_id: 'fx-echo-0' });
      expect(ra.data.observation.timings.pooled).toBe(true);
      const refillId = await refill;
      expect(refillId.startsWith('pool-')).toBe(true);
      // both slots held: episode a, and the deploying refill
      expect(s.app.openenv.admission.activeCount).toBe(2);
      expect((await health(s)).pool).toMatchObject({ ready: 0, deploying: 1 });
      const b = await WsClient.open(s.url);
      const rb = await b.reset({ task_id: 'fx-echo-1' });
      expect(rb.type).toBe('observation');
      expect(rb.data.observation.timings.pooled).toBe(true);
      expect(s.app.openenv.manager.get(rb.data.observation.episode_id)!.envId).toBe(refillId);
      // episode a is still running: b did not wait for it
      expect(s.app.openenv.manager.get(ra.data.observation.episode_id)!.phase).toBe('running');
      await Promise.all([a, b].map((c) => c.close()));
      // episode a's env and the refill held both slots at once, and never more
      expect(s.sandbox.peak).toBe(2);
    } finally {
      await s.stop();
    }
  });

  it('a waiting reset for another env evicts a pooled env and deploys its own', async () => {
    const bundle = twoEnvBundle();
    dirs.push(bundle);
    const s = await startProcessServer({ maxConcurrentEnvs: 2, warmPool: 2 }, { bundle });
    try {
      await poolReady(s, 2);
      expect((await health(s)).pool!.by_env).toEqual({ echo: { ready: 2, deploying: 0 }, echo2: { ready: 0, deploying: 0 } });
      const a = await WsClient.open(s.url);
      const ra = await a.reset({ task_id: 'fx-echo-0' });
      expect(ra.data.observation.timings.pooled).toBe(true);
      // slots: episode a and one pooled echo env; no free slot for a refill
      const left = pooledIds(s).filter((id) => id !== s.app.openenv.manager.get(ra.data.observation.episode_id)!.envId);
      expect(left).toHaveLength(1);
      const exits: string[] = [];
      s.sandbox.events.on('exit', (id: string) => exits.push(id));
      const b = await WsClient.open(s.url);
      const rb = await b.reset({ task_id: 'fx2-echo-0' });
      expect(rb.type).toBe('observation');
      expect(rb.data.observation.timings.pooled).toBe(false);
      // the pooled echo env went for it
      expect(exits).toContain(left[0]);
      expect(s.sandbox.held()).not.toContain(left[0]);
      expect(await metric(s, 'openenv_pool_evictions_total')).toBe(1);
      expect(s.sandbox.peak).toBe(2);
      await Promise.all([a, b].map((c) => c.close()));
    } finally {
      await s.stop();
    }
  });

  it("a pooled env killed behind the server's back is discarded at hand-out, and the reset still succeeds", async () => {
    const s = await startProcessServer({ maxConcurrentEnvs: 2, warmPool: 1 });
    try {
      await poolReady(s, 1);
      const [dead] = pooledIds(s);
      await s.sandbox.killBehindBack(dead!);
      const c = await WsClient.open(s.url);
      const o = await play(c);
      expect(s.app.openenv.manager.get(o.episode_id)?.envId ?? 'ended').not.toBe(dead);
      expect(await metric(s, 'openenv_pool_discarded_total', { reason: 'dead' })).toBe(1);
      expect(s.sandbox.held()).not.toContain(dead);
      await c.close();
      await poolReady(s, 1);
    } finally {
      await s.stop();
    }
  });

  it('refills that keep failing stop refilling and say so in /health and /metrics; resets still deploy their own envs; refilling resumes after the backoff', async () => {
    let failing = true;
    const s = await startProcessServer(
      { maxConcurrentEnvs: 3, warmPool: 2 },
      {
        wrap: (sb) => {
          sb.failDeploysWhere((id) => (failing && id.startsWith('pool-') ? 'injected refill failure' : null));
          return sb;
        },
      },
    );
    try {
      await waitFor(async () => (await health(s)).pool?.refilling === false, 30_000, 'refills stopped');
      const h = await health(s);
      expect(h.status).toBe('healthy');
      expect(h.pool).toMatchObject({ refilling: false, ready: 0, last_error: expect.stringContaining('injected refill failure') });
      // stopped at the threshold, well inside the first backoff (WARM_POOL.backoffBaseMs)
      expect(h.pool!.consecutive_failures).toBe(WARM_POOL.maxConsecutiveFailures);
      expect(h.pool!.retry_in_s).toBeGreaterThan(0);
      expect(await metric(s, 'openenv_pool_refilling')).toBe(0);
      expect(await metric(s, 'openenv_pool_refill_failures_total')).toBe(WARM_POOL.maxConsecutiveFailures);
      expect(s.logs()).toContain('pool_refill_stopped');
      const c = await WsClient.open(s.url);
      const o = await play(c);
      expect(o.timings.pooled).toBe(false);
      await c.close();
      failing = false;
      await waitFor(async () => (await health(s)).pool?.ready === 2, 60_000, 'the pool refilled after the backoff');
      expect((await health(s)).pool!.refilling).toBe(true);
    } finally {
      await s.stop();
    }
  }, 120_000);

  it('draining tears pooled envs down with the episodes', async () => {
    const s = await startProcessServer({ maxConcurrentEnvs: 3, warmPool: 2 });
    await poolReady(s, 2);
    const c = await WsClient.open(s.url);
    await c.reset({ task_id: 'fx-echo-0' });
    await poolReady(s, 2);
    expect(s.sandbox.held()).toHaveLength(3);
    const result = await s.app.openenv.drain(20_000);
    expect(result.timedOut).toBe(false);
    expect(s.sandbox.held()).toEqual([]);
    await s.stop();
  });
});

describe('--max-concurrent-deploys', () => {
  it('cold resets reach the deploy cap and never pass it', async () => {
    const s = await startProcessServer({ maxConcurrentEnvs: 8, maxConcurrentDeploys: 2 });
    try {
      const clients = await Promise.all(Array.from({ length: 8 }, () => WsClient.open(s.url)));
      const obs = await Promise.all(clients.map((c) => play(c)));
      expect(obs).toHaveLength(8);
      expect(s.sandbox.deployPeak).toBe(2);
      // no pool: timings as before
      expect(Object.keys(obs[0]!.timings).sort()).toEqual(['deploy_s', 'queued_s', 'running_s']);
      await Promise.all(clients.map((c) => c.close()));
    } finally {
      await s.stop();
    }
  });
});
