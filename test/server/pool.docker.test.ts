/**
 * The warm pool on real Docker: the engine holds as many env containers as the cap, pool
 * included, and never more (counted from the engine's start and die events over the pool's fill
 * and a burst larger than the cap); each env container serves one
 * episode and is gone after; a pooled container killed behind the server's back is discarded and
 * the reset still succeeds; SIGTERM, and SIGKILL then a restart, leave nothing, pool included.
 */
import { execFileSync } from 'node:child_process';
import { expect, it } from 'vitest';
import { LABELS } from '../../src/sandbox/sandbox.js';
import { followContainerLives } from '../../scripts/lib/container-lives.js';
import { describeDocker, labelledResources, LOCAL_NODE_IMAGE, uniqueInstance, waitFor } from '../support/docker.js';
import { FIXTURE_BUNDLE, INSTANCE_LABEL, startServer } from '../support/docker-server.js';
import { spawnServer } from '../support/serve-process.js';
import { WsClient } from '../../scripts/lib/ws-client.js';

function serverArgs(instance: string, extra: string[] = []): string[] {
  return [FIXTURE_BUNDLE, '--port', '0', '--instance', instance, '--build-arg', `NODE_IMAGE=${LOCAL_NODE_IMAGE}`, ...extra];
}

/** container id → its env id label, for this instance */
function containersByEnvId(instance: string): Map<string, string> {
  const out = execFileSync('docker', ['ps', '-a', '--filter', `label=${INSTANCE_LABEL}=${instance}`, '--format', `{{.ID}} {{.Label "${LABELS.episode}"}}`], {
    encoding: 'utf8',
  });
  const m = new Map<string, string>();
  for (const line of out.split('\n').filter(Boolean)) {
    const [id, envId] = line.split(' ');
    m.set(envId!, id!);
  }
  return m;
}

async function poolReady(url: string, n: number): Promise<void> {
  await waitFor(
    async () => {
      const h = (await (await fetch(`${url}/health`)).json()) as { pool?: { ready: number } };
      return h.pool?.ready === n;
    },
    120_000,
    `${n} pooled envs ready`,
  );
}

describeDocker('warm pool on Docker', () => {
  it('a burst of 10 with --max-concurrent-envs 4 and --warm-pool 4: 4 env containers at once and never more, each episode on its own container, gone after', async () => {
    const instance = uniqueInstance();
    const label = `${INSTANCE_LABEL}=${instance}`;
    // from before the server starts: the pool's own fill is counted too
    const lives = followContainerLives(label);
    const s = await startServer({ instance, maxConcurrentEnvs: 4, warmPool: 4, maxConcurrentDeploys: 2 });
    try {
      await poolReady(s.url, 4);
      expect(labelledResources(label).containers).toHaveLength(4);
      const used: { envId: string; container: string }[] = [];
      await Promise.all(
        Array.from({ length: 10 }, async () => {
          const c = await WsClient.open(s.url);
          const r = await c.reset({ task_id: 'fx-echo-0' });
          expect(r.type).toBe('observation');
          const envId = s.app.openenv.manager.get(r.data.observation.episode_id)!.envId;
          const container = containersByEnvId(s.instance).get(envId);
          expect(container).toBeDefined();
          used.push({ envId, container: container! });
          expect((await c.call('echo', { text: 'x' })).data.observation.result.content[0].text).toBe('x');
          await c.call('end_turn', {});
          await c.close();
          await s.app.openenv.manager.get(r.data.observation.episode_id)?.tornDown;
        }),
      );
      // the full pool held the 4 slots; the burst never went past them
      expect((await lives.stop()).peak).toBe(4);
      expect(new Set(used.map((u) => u.container)).size).toBe(10);
      expect(used.filter((u) => u.envId.startsWith('pool-')).length).toBeGreaterThanOrEqual(4);
      // single use: no container that served an episode is still there, or in the pool
      await poolReady(s.url, 4);
      const now = labelledResources(label).containers;
      for (const u of used) expect(now.some((id) => u.container.startsWith(id) || id.startsWith(u.container))).toBe(false);
    } finally {
      await s.stop();
      expect(labelledResources(label)).toEqual({ containers: [], networks: [] });
    }
  });

  it("a pooled container killed behind the server's back is discarded, and the reset still succeeds", async () => {
    const s = await startServer({ maxConcurrentEnvs: 2, warmPool: 1 });
    const label = `${INSTANCE_LABEL}=${s.instance}`;
    try {
      await poolReady(s.url, 1);
      const [deadId, container] = [...containersByEnvId(s.instance).entries()][0]!;
      execFileSync('docker', ['kill', container!]);
      const c = await WsClient.open(s.url);
      const r = await c.reset({ task_id: 'fx-echo-0' });
      expect(r.type).toBe('observation');
      expect(s.app.openenv.manager.get(r.data.observation.episode_id)!.envId).not.toBe(deadId);
      expect((await c.call('echo', { text: 'alive' })).data.observation.result.content[0].text).toBe('alive');
      await c.close();
      await waitFor(() => !containersByEnvId(s.instance).has(deadId!), 30_000, 'the dead pooled env removed');
    } finally {
      await s.stop();
      expect(labelledResources(label)).toEqual({ containers: [], networks: [] });
    }
  });

  it('SIGTERM tears the pool down with the episodes; after SIGKILL a restart sweeps pooled leftovers', async () => {
    const instance = uniqueInstance('pool-signals');
    const label = `${INSTANCE_LABEL}=${instance}`;
    // no network stock: the networks counted are the pooled envs' and the episode's
    // no reaper: what SIGKILL leaves is the restart's to sweep here
    const first = await spawnServer(serverArgs(instance, ['--max-concurrent-envs', '3', '--warm-pool', '2', '--network-stock', '0', '--no-reaper']));
    await poolReady(first.url, 2);
    const c = await WsClient.open(first.url);
    expect((await c.reset({ task_id: 'fx-echo-0' })).type).toBe('observation');
    await poolReady(first.url, 2);
    expect(labelledResources(label).containers).toHaveLength(3);
    first.child.kill('SIGKILL');
    await first.exited;
    const left = labelledResources(label);
    expect(left.containers).toHaveLength(3);
    expect(left.networks).toHaveLength(3);

    const second = await spawnServer(serverArgs(instance, ['--max-concurrent-envs', '3', '--warm-pool', '2', '--network-stock', '0']));
    const sweep = second.lines().find((l) => l.event === 'startup_sweep');
    expect((sweep!.containers as string[]).length).toBe(3);
    await poolReady(second.url, 2);
    const k = await WsClient.open(second.url);
    const r = await k.reset({ task_id: 'fx-echo-0' });
    expect(r.data.observation.timings.pooled).toBe(true);
    second.child.kill('SIGTERM');
    expect(await second.exited).toEqual({ code: 0, signal: null });
    expect(labelledResources(label)).toEqual({ containers: [], networks: [] });
  });
});
