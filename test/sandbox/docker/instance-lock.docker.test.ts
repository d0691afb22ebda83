/**
 * One live server per instance name: a second server under a name in use refuses to start, naming
 * the holder, instead of sweeping the first one's episodes; a name a dead server left is taken over
 * and swept; a holder that finds an older one stops serving.
 */
import { execFileSync } from 'node:child_process';
import { afterAll, expect, it } from 'vitest';
import { buildApp } from '../../../src/app.js';
import { DockerSandbox } from '../../../src/sandbox/docker/index.js';
import { SwarmSandbox } from '../../../src/sandbox/swarm/swarm-sandbox.js';
import { InstanceInUseError, LOCK_LABELS } from '../../../src/sandbox/engine/instance-lock.js';
import { describeDocker, labelledResources, LOCAL_NODE_IMAGE, TEST_BUILD_ARGS, uniqueInstance, waitFor } from '../../support/docker.js';
import { captureLog } from '../../support/log-capture.js';
import { spawnServer } from '../../support/serve-process.js';
import { FIXTURE_BUNDLE, INSTANCE_LABEL, startServer } from '../../support/docker-server.js';
import { WsClient } from '../../../scripts/lib/ws-client.js';

const EPISODE_LABEL = 'io.openenv.bundle-server.episode';

function docker(args: string[]): string {
  return execFileSync('docker', args, { encoding: 'utf8', stdio: 'pipe' }).trim();
}

function lockMarkers(instance: string): string[] {
  return docker(['volume', 'ls', '-q', '--filter', `label=${LOCK_LABELS.lock}=${instance}`])
    .split('\n')
    .filter(Boolean);
}

/** a marker as a server on another host would leave it */
function foreignMarker(instance: string, heartbeat: number, intervalMs: number, since = heartbeat): string {
  const name = `openenv-lock-test-${Math.random().toString(36).slice(2, 10)}`;
  const labels = {
    [LOCK_LABELS.lock]: instance,
    [LOCK_LABELS.holder]: `foreign${Math.random().toString(36).slice(2, 8)}`,
    [LOCK_LABELS.host]: 'some-other-host',
    [LOCK_LABELS.pid]: '4242',
    [LOCK_LABELS.pidns]: 'pid:[1]',
    [LOCK_LABELS.heartbeat]: String(heartbeat),
    [LOCK_LABELS.interval]: String(intervalMs),
    [LOCK_LABELS.since]: String(since),
  };
  docker(['volume', 'create', ...Object.entries(labels).flatMap(([k, v]) => ['--label', `${k}=${v}`]), name]);
  return name;
}

const instances: string[] = [];
function instanceName(prefix: string): string {
  const i = uniqueInstance(prefix);
  instances.push(i);
  return i;
}

describeDocker('one live server per instance name', () => {
  afterAll(() => {
    for (const i of instances) {
      const left = lockMarkers(i);
      if (left.length) docker(['volume', 'rm', '-f', ...left]);
      expect(left).toEqual([]); // every test released or took over what it made
    }
  });

  it("a second server under a live server's name refuses to start, naming it, and leaves its episodes alone", async () => {
    const instance = instanceName('lock-live');
    const first = await startServer({ instance });
    try {
      const c = await WsClient.open(first.url);
      const reset = await c.reset({ task_id: 'fx-echo-0' });
      const episodeId = reset.data.observation.episode_id as string;

      const log = captureLog({ level: 'info' });
      const logger = log.logger;
      const second = await buildApp(FIXTURE_BUNDLE, { instance, buildArgs: TEST_BUILD_ARGS, pingInterval: 0, logger, reconcileIntervalMs: 200 });
      const outcome = await second.openenv.ready.then(
        () => null,
        (e: unknown) => e,
      );
      // give a reconciler that should not exist the time to do its damage
      await new Promise((r) => setTimeout(r, 1_000));
      await second.close();

      expect(outcome).toBeInstanceOf(InstanceInUseError);
      expect((outcome as Error).message).toMatch(
        new RegExp(`instance "${instance}" is in use by a live server \\(host .+, pid ${process.pid}, holding it since`),
      );
      expect(log.text()).not.toMatch(/"event":"startup_sweep"/);
      // the first server's episode is untouched and plays on
      expect(labelledResources(`${EPISODE_LABEL}=${episodeId}`).containers).toHaveLength(1);
      const echo = await c.call('echo', { text: 'still mine' });
      expect(echo.data.observation.result.content[0].text).toBe('still mine');
      await c.close();
    } finally {
      await first.stop();
    }
    expect(lockMarkers(instance)).toEqual([]); // a clean shutdown gives the name back
    expect(labelledResources(`${INSTANCE_LABEL}=${instance}`)).toEqual({ containers: [], networks: [] });
  });

  it('a server killed with SIGKILL leaves the name to its successor, which sweeps what it left at once', async () => {
    execFileSync('npm', ['run', '--silent', 'build'], { stdio: 'pipe' });
    const instance = instanceName('lock-dead');
    // no network stock: the successor's own would be labelled with the name too
    const args = [FIXTURE_BUNDLE, '--port', '0', '--instance', instance, '--build-arg', `NODE_IMAGE=${LOCAL_NODE_IMAGE}`, '--network-stock', '0'];
    // no reaper: what SIGKILL leaves is the successor's to sweep here
    const first = await spawnServer([...args, '--no-reaper']);
    const c = await WsClient.open(first.url);
    await c.reset({ task_id: 'fx-echo-0' });
    first.child.kill('SIGKILL');
    await first.exited;
    expect(labelledResources(`${INSTANCE_LABEL}=${instance}`).containers).toHaveLength(1);
    expect(lockMarkers(instance)).toHaveLength(1);

    // its pid is gone on this host: no need to wait for the heartbeat to go stale
    const second = await spawnServer(args);
    try {
      const sweep = second.lines().find((l) => l.event === 'startup_sweep');
      expect((sweep?.containers as string[] | undefined)?.length).toBe(1);
      expect(labelledResources(`${INSTANCE_LABEL}=${instance}`)).toEqual({ containers: [], networks: [] });
      expect(lockMarkers(instance)).toHaveLength(1); // the successor's
    } finally {
      second.child.kill('SIGTERM');
      expect(await second.exited).toEqual({ code: 0, signal: null });
    }
    await waitFor(() => lockMarkers(instance).length === 0, 10_000, 'name released');
  });

  it("a live server's lock volume deleted by hand: a second server under its name still refuses, sweeps nothing, and the marker is back", async () => {
    const instance = instanceName('lock-deleted');
    const first = await startServer({ instance });
    try {
      const c = await WsClient.open(first.url);
      const reset = await c.reset({ task_id: 'fx-echo-0' });
      const episodeId = reset.data.observation.episode_id as string;
      const markers = lockMarkers(instance);
      expect(markers.length).toBeGreaterThan(0);
      docker(['volume', 'rm', '-f', ...markers]);

      const log = captureLog({ level: 'info' });
      const second = await buildApp(FIXTURE_BUNDLE, { instance, buildArgs: TEST_BUILD_ARGS, pingInterval: 0, logger: log.logger, reconcileIntervalMs: 200 });
      const outcome = await second.openenv.ready.then(
        () => null,
        (e: unknown) => e,
      );
      await second.close();
      expect(outcome).toBeInstanceOf(InstanceInUseError);
      expect(log.text()).not.toMatch(/"event":"startup_sweep"/);
      // the first server restored its marker and its episode plays on
      expect(lockMarkers(instance).length).toBeGreaterThan(0);
      expect(labelledResources(`${EPISODE_LABEL}=${episodeId}`).containers).toHaveLength(1);
      const echo = await c.call('echo', { text: 'still mine' });
      expect(echo.data.observation.result.content[0].text).toBe('still mine');
      await c.close();
    } finally {
      await first.stop();
    }
    expect(lockMarkers(instance)).toEqual([]);
    expect(labelledResources(`${INSTANCE_LABEL}=${instance}`)).toEqual({ containers: [], networks: [] });
  });

  // the claim is the engine skeleton's (engine/engine-sandbox.ts): a swarm sandbox's is the same
  // volume marker on its manager, so the main engine stands in for one here
  it.each([
    ['Docker', (o: ConstructorParameters<typeof DockerSandbox>[0]) => new DockerSandbox(o)],
    ['swarm', (o: ConstructorParameters<typeof DockerSandbox>[0]) => new SwarmSandbox({ ...o, attachContainer: null })],
  ] as const)('a %s sandbox that finds an older live holder of its name tells its server to stop serving, saying who holds it', async (_backend, make) => {
    const instance = instanceName('lock-lost');
    const log = captureLog({ level: 'info' });
    const a = make({ instance, bundleName: 'fixture-v1', instanceLock: { heartbeatMs: 300, missedBeats: 3 }, logger: log.logger });
    const lost: string[] = [];
    a.instanceClaim.onLost((why) => lost.push(why));
    await a.instanceClaim.claim();
    // a server elsewhere that claimed the name a minute ago and beats: two holders, a is the newer
    const older = foreignMarker(instance, Date.now() + 2_000, 300, Date.now() - 60_000);
    try {
      await waitFor(() => lost.length > 0, 10_000, 'the newer holder to notice');
      expect(lost[0]).toMatch(new RegExp(`instance "${instance}" is held by an older server \\(host some-other-host, pid 4242`));
      expect(log.text()).toMatch(/stops serving/);
    } finally {
      await a.close();
      docker(['volume', 'rm', '-f', older]);
    }
  });

  it('a holder on another host: taken over once its heartbeat is stale, refused while it beats', async () => {
    const instance = instanceName('lock-foreign');
    const opts = { instance, bundleName: 'fixture-v1', instanceLock: { heartbeatMs: 300, missedBeats: 3 } };

    // long dead: taken over at once, its marker removed
    const old = foreignMarker(instance, Date.now() - 60_000, 300);
    const a = new DockerSandbox(opts);
    await a.instanceClaim.claim();
    expect(lockMarkers(instance)).not.toContain(old);
    expect(lockMarkers(instance).length).toBeGreaterThanOrEqual(1);

    // a live holder (it beats every 300 ms): refused, naming it
    const b = new DockerSandbox(opts);
    const refused = await b.instanceClaim.claim().then(
      () => null,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(InstanceInUseError);
    expect((refused as InstanceInUseError).holder.pid).toBe(process.pid);

    // released: the name is free at once
    await a.close();
    await b.instanceClaim.claim();
    await b.close();
    expect(lockMarkers(instance)).toEqual([]);

    // a holder elsewhere that just beat and then died: the newcomer waits it out, then takes over
    const recent = foreignMarker(instance, Date.now(), 300);
    const c = new DockerSandbox(opts);
    await c.instanceClaim.claim();
    expect(lockMarkers(instance)).not.toContain(recent);
    await c.close();
    expect(lockMarkers(instance)).toEqual([]);
  });
});
