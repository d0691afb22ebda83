/**
 * The reaper: a server killed hard and never restarted leaves nothing, within a bound; while the
 * server lives the watcher removes nothing; a clean stop ends the watcher without a removal; a
 * server started again under the same name keeps what it deployed. The server is the built
 * binary, as users run it.
 */
import { execFileSync } from 'node:child_process';
import Dockerode from 'dockerode';
import { expect, it } from 'vitest';
import { InstanceLock, LOCK_LABELS } from '../../../src/sandbox/engine/instance-lock.js';
import { labelFilters } from '../../../src/sandbox/engine/labels.js';
import { reapBefore, reapUntilQuiet } from '../../../src/sandbox/docker/reaper.js';
import { describeDocker, labelledResources, LOCAL_NODE_IMAGE, uniqueInstance, waitFor } from '../../support/docker.js';
import { FIXTURE_BUNDLE, INSTANCE_LABEL } from '../../support/docker-server.js';
import { spawnServer, type ServerProcess } from '../../support/serve-process.js';
import { WsClient } from '../../../scripts/lib/ws-client.js';

function lockMarkers(instance: string): string[] {
  return execFileSync('docker', ['volume', 'ls', '-q', '--filter', `label=${LOCK_LABELS.lock}=${instance}`], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean);
}

function serverArgs(instance: string, extra: string[] = []): string[] {
  return [FIXTURE_BUNDLE, '--port', '0', '--instance', instance, '--build-arg', `NODE_IMAGE=${LOCAL_NODE_IMAGE}`, '--max-concurrent-envs', '4', ...extra];
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

function reaperPid(srv: ServerProcess): number {
  const line = srv.lines().find((l) => l.event === 'reaper');
  expect(line, srv.output()).toBeDefined();
  return line!.pid as number;
}

/** a network of the instance, as the dead server's last request would have made it */
function labelledNetwork(instance: string, name: string): string {
  const labels = labelFilters(instance).label.flatMap((l) => ['--label', l]);
  return execFileSync('docker', ['network', 'create', '--internal', ...labels, name], { encoding: 'utf8' }).trim();
}

const LOOKS = { settleMs: 1_000, quietPasses: 2, lateForMs: 20_000 };

/** what of the instance is on the engine: containers, networks, lock markers */
const footprint = (instance: string) => ({ ...labelledResources(`${INSTANCE_LABEL}=${instance}`), markers: lockMarkers(instance) });

describeDocker('the reaper', () => {
  it('SIGKILL and no restart: every container, network and lock marker of the instance is gone within 30 s', async () => {
    const instance = uniqueInstance('reaper-kill');
    // two episodes, a warm env and a network stock: everything a server leaves
    const srv = await spawnServer(serverArgs(instance, ['--warm-pool', '1', '--network-stock', '2']));
    const pid = reaperPid(srv);
    const clients = await Promise.all([WsClient.open(srv.url), WsClient.open(srv.url)]);
    await Promise.all(clients.map((c) => c.reset({ task_id: 'fx-echo-0' })));
    await waitFor(() => footprint(instance).containers.length === 3, 60_000, 'two episodes and a pooled env');
    const before = footprint(instance);
    expect(before.networks.length).toBeGreaterThanOrEqual(3);
    expect(before.markers).toHaveLength(1);

    srv.child.kill('SIGKILL');
    await srv.exited;
    const t0 = Date.now();
    await waitFor(
      () => {
        const f = footprint(instance);
        return f.containers.length + f.networks.length + f.markers.length === 0;
      },
      30_000,
      'nothing of the killed instance left',
    );
    const tookMs = Date.now() - t0;
    console.info(`reaper: ${before.containers.length} containers, ${before.networks.length} networks, 1 marker removed ${tookMs} ms after SIGKILL`);
    // its job done, the watcher is gone too
    await waitFor(() => !alive(pid), 10_000, 'the reaper exited');
    await Promise.all(clients.map((c) => c.close()));
  });

  it('removes nothing while the server lives, and a clean stop ends it without a removal', async () => {
    const instance = uniqueInstance('reaper-live');
    const srv = await spawnServer(serverArgs(instance, ['--network-stock', '0']));
    const pid = reaperPid(srv);
    const c = await WsClient.open(srv.url);
    await c.reset({ task_id: 'fx-echo-0' });
    const live = footprint(instance);
    await new Promise((r) => setTimeout(r, 3000));
    expect(alive(pid)).toBe(true);
    expect(footprint(instance)).toEqual(live);
    expect((await c.call('echo', { text: 'still here' })).data.observation.result.content[0].text).toBe('still here');
    await c.close();

    srv.child.kill('SIGTERM');
    expect(await srv.exited).toEqual({ code: 0, signal: null });
    await waitFor(() => !alive(pid), 10_000, 'the reaper exited after the clean stop');
    expect(footprint(instance)).toEqual({ containers: [], networks: [], markers: [] });
  });

  it('a server started again under the same name right after the kill keeps the episode it deployed', async () => {
    const instance = uniqueInstance('reaper-again');
    const first = await spawnServer(serverArgs(instance, ['--network-stock', '0']));
    const firstReaper = reaperPid(first);
    const old = await WsClient.open(first.url);
    await old.reset({ task_id: 'fx-echo-0' });
    first.child.kill('SIGKILL');
    await first.exited;

    // the successor sweeps at its start and deploys; the first one's watcher removes only what is older
    const second = await spawnServer(serverArgs(instance, ['--network-stock', '0']));
    const c = await WsClient.open(second.url);
    const reset = await c.reset({ task_id: 'fx-echo-0' });
    expect(reset.type).toBe('observation');
    await waitFor(() => !alive(firstReaper), 30_000, "the first server's reaper done");
    expect(footprint(instance).containers).toHaveLength(1);
    expect((await c.call('echo', { text: 'mine' })).data.observation.result.content[0].text).toBe('mine');
    await c.close();
    await old.close();
    second.child.kill('SIGTERM');
    expect(await second.exited).toEqual({ code: 0, signal: null });
    expect(footprint(instance)).toEqual({ containers: [], networks: [], markers: [] });
  });

  it('a network the engine finishes after the server is gone is removed by a later look', async () => {
    const instance = uniqueInstance('reaper-late');
    const docker = new Dockerode();
    const goneAt = Date.now();
    await new Promise((r) => setTimeout(r, 50));
    // the engine was still making it when the server died: created after the moment it was gone
    const reaping = reapUntilQuiet(docker, instance, goneAt, LOOKS);
    await new Promise((r) => setTimeout(r, 150));
    const late = labelledNetwork(instance, `${instance}-late`);
    // one look, as the reaper had, keeps it: it is younger than the server's end
    expect((await reapBefore(docker, instance, goneAt)).networks).toEqual([]);
    expect(footprint(instance).networks).toHaveLength(1);
    const reaped = await reaping;
    expect(reaped.networks).toEqual([late]);
    expect(footprint(instance)).toEqual({ containers: [], networks: [], markers: [] });
  });

  it('a successor that holds the name ends the later looks, and keeps what it made', async () => {
    const instance = uniqueInstance('reaper-heir');
    const docker = new Dockerode();
    const goneAt = Date.now();
    const heir = new InstanceLock(docker, { instance, heartbeatMs: 1_000, settleMs: 50 });
    await heir.claim();
    try {
      const reaping = reapUntilQuiet(docker, instance, goneAt, LOOKS);
      const its = labelledNetwork(instance, `${instance}-heirs`);
      // the later looks see a live holder: what is there is the successor's
      expect(await reaping).toEqual({ containers: [], networks: [], markers: [] });
      expect(footprint(instance).networks).toEqual([its.slice(0, 12)]);
    } finally {
      execFileSync('docker', ['network', 'rm', `${instance}-heirs`]);
      await heir.release();
    }
    expect(footprint(instance)).toEqual({ containers: [], networks: [], markers: [] });
  });
});
