/** A real server process: SIGTERM drains and exits 0 leaving nothing; after SIGKILL a restart sweeps. */
import { expect, it } from 'vitest';
import { containerNetworkIds, describeDocker, labelledResources, LOCAL_NODE_IMAGE, uniqueInstance, waitFor } from '../support/docker.js';
import { spawnServer } from '../support/serve-process.js';
import { FIXTURE_BUNDLE, INSTANCE_LABEL } from '../support/docker-server.js';
import { WsClient } from '../../scripts/lib/ws-client.js';
import { parsePrometheusText, valueOf } from '../../scripts/lib/prom-text.js';

const TOKEN = 'process-test-token-5f2a';
const EPISODE_LABEL = 'io.openenv.bundle-server.episode';

function serverArgs(instance: string, extra: string[] = []): string[] {
  return [FIXTURE_BUNDLE, '--port', '0', '--instance', instance, '--build-arg', `NODE_IMAGE=${LOCAL_NODE_IMAGE}`, '--max-concurrent-envs', '2', ...extra];
}

describeDocker('the server process and its signals', () => {
  it('SIGTERM with live episodes: waiting and running sessions are told why, exit 0 within the shutdown timeout, nothing left', async () => {
    const instance = uniqueInstance('sigterm');
    const srv = await spawnServer(serverArgs(instance, ['--shutdown-timeout', '20']), { AGENTENV_TOKEN: TOKEN });
    const running = await Promise.all([WsClient.open(srv.url, TOKEN), WsClient.open(srv.url, TOKEN)]);
    await Promise.all(running.map((c) => c.reset({ task_id: 'fx-echo-0' })));
    const waiting = await WsClient.open(srv.url, TOKEN);
    const waitingReply = waiting.reset({ task_id: 'fx-echo-1' });
    await new Promise((r) => setTimeout(r, 300));
    expect(labelledResources(`${INSTANCE_LABEL}=${instance}`).containers).toHaveLength(2);

    const t0 = Date.now();
    srv.child.kill('SIGTERM');
    const refused = await waitingReply;
    expect(refused).toMatchObject({ type: 'error', data: { code: 'SESSION_ERROR', reason: 'shutting_down' } });
    expect((await waiting.closed).code).toBe(1001);
    for (const c of running) {
      const told = await c.next();
      expect(told).toMatchObject({ type: 'error', data: { code: 'SESSION_ERROR', reason: 'shutting_down' } });
      expect((await c.closed).code).toBe(1001);
    }
    const exit = await srv.exited;
    const tookMs = Date.now() - t0;
    // exit 0 is the drain finishing within --shutdown-timeout (past it the server exits 1)
    expect(exit).toEqual({ code: 0, signal: null });
    console.info(`SIGTERM to exit: ${tookMs} ms (--shutdown-timeout 20 s)`);
    expect(labelledResources(`${INSTANCE_LABEL}=${instance}`)).toEqual({ containers: [], networks: [] });
    expect(srv.output()).not.toContain(TOKEN);
  });

  it('SIGKILL leaves labelled envs; a restart with the same instance removes them and says so', async () => {
    const instance = uniqueInstance('sigkill');
    // no network stock: the networks counted are the episodes' (the stock has a test of its own below)
    // no reaper: what SIGKILL leaves is the restart's to sweep here (the reaper has a test of its own)
    const first = await spawnServer(serverArgs(instance, ['--network-stock', '0', '--no-reaper']));
    const clients = await Promise.all([WsClient.open(first.url), WsClient.open(first.url)]);
    await Promise.all(clients.map((c) => c.reset({ task_id: 'fx-echo-0' })));
    first.child.kill('SIGKILL');
    await first.exited;
    const left = labelledResources(`${INSTANCE_LABEL}=${instance}`);
    expect(left.containers).toHaveLength(2);
    expect(left.networks).toHaveLength(2);

    const second = await spawnServer(serverArgs(instance, ['--network-stock', '0']));
    const sweep = second.lines().find((l) => l.event === 'startup_sweep');
    expect(sweep).toBeDefined();
    expect((sweep!.containers as string[]).length).toBe(2);
    expect((sweep!.networks as string[]).length).toBe(2);
    expect(labelledResources(`${INSTANCE_LABEL}=${instance}`)).toEqual({ containers: [], networks: [] });
    // and it serves
    const c = await WsClient.open(second.url);
    expect((await c.reset({ task_id: 'fx-echo-0' })).type).toBe('observation');
    second.child.kill('SIGTERM');
    expect(await second.exited).toEqual({ code: 0, signal: null });
    await waitFor(() => labelledResources(`${INSTANCE_LABEL}=${instance}`).containers.length === 0);
    expect(labelledResources(`${INSTANCE_LABEL}=${instance}`)).toEqual({ containers: [], networks: [] });
  });

  it('the network stock: made at start and used by one episode; what SIGKILL leaves of it, a restart sweeps; SIGTERM removes it', async () => {
    const instance = uniqueInstance('stock');
    const label = `${INSTANCE_LABEL}=${instance}`;
    const stockFull = async (url: string) => {
      const m = parsePrometheusText(await (await fetch(`${url}/metrics`)).text());
      return valueOf(m, 'openenv_network_stock_size') === 3 && valueOf(m, 'openenv_network_stock_ready') === 3;
    };
    const first = await spawnServer(serverArgs(instance, ['--network-stock', '3', '--no-reaper']));
    await waitFor(() => stockFull(first.url), 30_000, 'the stock made');
    const stocked = labelledResources(label).networks;
    expect(stocked).toHaveLength(3);
    const c = await WsClient.open(first.url);
    const episodeId = (await c.reset({ task_id: 'fx-echo-0' })).data.observation.episode_id as string;
    const [env] = labelledResources(`${EPISODE_LABEL}=${episodeId}`).containers;
    const envNets = containerNetworkIds(env!).map((id) => id.slice(0, 12));
    // the episode's env sits on a network the stock had made before the reset
    expect(envNets).toHaveLength(1);
    expect(stocked).toContain(envNets[0]);
    // out with the episode, it counts as the stock's: none is made behind it
    const metric = async (name: string) => valueOf(parsePrometheusText(await (await fetch(`${first.url}/metrics`)).text()), name);
    expect(await metric('openenv_network_stock_ready')).toBe(2);
    expect(labelledResources(label).networks.sort()).toEqual([...stocked].sort());
    // the episode ends: its network comes back empty, to be handed out again
    await c.close();
    await waitFor(async () => (await metric('openenv_network_stock_recycled_total')) === 1, 30_000, 'the network back in the stock');
    expect(await stockFull(first.url)).toBe(true);
    expect(labelledResources(label).networks.sort()).toEqual([...stocked].sort());
    const again = await WsClient.open(first.url);
    const second_ = (await again.reset({ task_id: 'fx-echo-0' })).data.observation.episode_id as string;
    const [env2] = labelledResources(`${EPISODE_LABEL}=${second_}`).containers;
    expect(stocked).toContain(containerNetworkIds(env2!)[0]!.slice(0, 12));
    first.child.kill('SIGKILL');
    await first.exited;
    const left = labelledResources(label);
    expect(left.containers).toHaveLength(1);
    expect(left.networks.sort()).toEqual([...stocked].sort());

    const second = await spawnServer(serverArgs(instance, ['--network-stock', '3']));
    const sweep = second.lines().find((l) => l.event === 'startup_sweep');
    expect((sweep!.networks as string[]).length).toBe(3);
    await waitFor(() => stockFull(second.url), 30_000, "the new server's stock made");
    const now = labelledResources(label);
    expect(now.containers).toEqual([]);
    expect(now.networks).toHaveLength(3);
    for (const n of left.networks) expect(now.networks).not.toContain(n);
    second.child.kill('SIGTERM');
    expect(await second.exited).toEqual({ code: 0, signal: null });
    expect(labelledResources(label)).toEqual({ containers: [], networks: [] });
  });

  it('a second signal exits at once', async () => {
    const instance = uniqueInstance('twice');
    const srv = await spawnServer(serverArgs(instance, ['--shutdown-timeout', '30']));
    const c = await WsClient.open(srv.url);
    await c.reset({ task_id: 'fx-echo-0' });
    // Both signals are sent before the server can act on either; the drain that the first one
    // starts needs engine round trips to tear the episode down, so the second one always finds it
    // still running and exits at once.
    srv.child.kill('SIGTERM');
    srv.child.kill('SIGINT');
    const exit = await srv.exited;
    expect(exit).toEqual({ code: 1, signal: null });
    const second = srv.lines().find((l) => l.msg === 'second signal: exiting at once');
    expect(second, srv.output()).toBeDefined();
    // whatever the second signal cut short, a restart of the same instance cleans up (a restart
    // without a stock of its own, so that every network left would be the first one's)
    const again = await spawnServer(serverArgs(instance, ['--network-stock', '0']));
    expect(labelledResources(`${INSTANCE_LABEL}=${instance}`)).toEqual({ containers: [], networks: [] });
    again.child.kill('SIGTERM');
    expect((await again.exited).code).toBe(0);
  });
});
