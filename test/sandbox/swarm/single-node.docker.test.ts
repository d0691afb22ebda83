/**
 * --sandbox swarm on a one-node swarm (the lab with its manager only): the same backend where a
 * multi-node lab is not wanted. Deploy on the overlay, a tool call, a crash reported as such, and
 * nothing left behind; a server that finds an older holder of its instance name stops serving.
 * The node's dockerd runs without --no-new-privileges here (the three-node lab's run with it), so
 * the server's probe of it must find that out and say it.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { uniqueInstance, waitFor } from '../../support/docker.js';
import { LOCK_LABELS } from '../../../src/sandbox/engine/instance-lock.js';
import { dk, footprint, lab, placements, prepareServerImage, removeServers, REPO, runningContainers, startServer } from '../../../scripts/lib/swarm-lab.js';
import { describeSwarm } from '../../support/swarm-lab.js';
import { LABELS } from '../../../src/sandbox/sandbox.js';

/** no service, overlay, task or running container of the instance on the node */
async function nothingLeft(instance: string): Promise<boolean> {
  const f = await footprint(instance, 1);
  return f.services.length + f.networks.length + f.tasks.length + runningContainers(f) === 0;
}

describeSwarm('swarm sandbox on a one-node swarm', () => {
  beforeAll(async () => {
    await lab('down', 3);
    await lab('up', 1, { noNewPrivileges: false });
    await prepareServerImage();
  }, 600_000);

  afterAll(async () => {
    await removeServers().catch(() => {});
    await lab('down', 1);
  }, 300_000);

  it('deploys on an overlay, plays, reports a crash as env_crashed, and leaves nothing', async () => {
    const server = await startServer({ instance: uniqueInstance('swarm-one'), port: 18400, bundleDir: join(REPO, 'test/fixtures/fixture-v1') });
    const r = await server.call('POST', '/episodes', { task_id: 'fx-echo-0' });
    expect(r.status).toBe(201);
    const e = r.body.episode_id as string;
    expect((await placements(server.instance)).map((p) => p.episode)).toEqual([e]);
    // this engine (API 1.41) cannot put no-new-privileges in a service, and the node's dockerd does
    // not set it: the server's probe container found NoNewPrivs 0, and the grant says so, as the env shows
    const grant = (await server.call('GET', '/bundle')).body.envs.echo;
    expect(grant.no_new_privileges).toBe(false);
    expect(grant.not_enforced).toEqual([
      expect.stringMatching(/^no-new-privileges: .*: the engine of node \S+ \(10\.77\.0\.11\) runs without dockerd --no-new-privileges$/),
    ]);
    const container = (await dk(1, ['ps', '-q', '--filter', `label=${LABELS.episode}=${e}`])).trim();
    // (the image has node and nothing else)
    const status = await dk(1, ['exec', container, 'node', '-e', 'process.stdout.write(require("fs").readFileSync("/proc/1/status", "utf8"))']);
    expect(status).toMatch(/^NoNewPrivs:\s+0$/m);
    const echo = await server.call('POST', `/episodes/${e}/step`, { type: 'call_tool', tool_name: 'echo', arguments: { text: 'over the overlay' } });
    expect(echo.body.observation.result.content[0].text).toBe('over the overlay');
    const crash = await server.call('POST', `/episodes/${e}/step`, { type: 'call_tool', tool_name: 'crash', arguments: { code: 7 } });
    expect(crash.body).toMatchObject({ done: true, reward: null, observation: { end_reason: 'env_failed', failure: { reason: 'env_crashed', exit_code: 7 } } });
    await waitFor(() => nothingLeft(server.instance), 60_000, 'nothing of the episode left');
    await dk(1, ['stop', '--time', '120', server.name]);
    expect((await dk(1, ['inspect', '--format', '{{.State.ExitCode}}', server.name])).trim()).toBe('0');
  });

  it('a swarm server that finds an older live holder of its instance name stops serving, saying so on /health', async () => {
    const server = await startServer({ instance: uniqueInstance('swarm-lost'), port: 18401, bundleDir: join(REPO, 'test/fixtures/fixture-v1') });
    expect((await server.call('POST', '/episodes', { task_id: 'fx-echo-0' })).status).toBe(201);
    // a server elsewhere that has held the name for a minute and beats every 20 s: the older holder
    const marker = `openenv-lock-test-${server.instance}`;
    const labels = {
      [LOCK_LABELS.lock]: server.instance,
      [LOCK_LABELS.holder]: 'an-older-server',
      [LOCK_LABELS.host]: 'some-other-host',
      [LOCK_LABELS.pid]: '4242',
      [LOCK_LABELS.pidns]: 'pid:[1]',
      [LOCK_LABELS.heartbeat]: String(Date.now()),
      [LOCK_LABELS.interval]: '20000',
      [LOCK_LABELS.since]: String(Date.now() - 60_000),
    };
    await dk(1, ['volume', 'create', ...Object.entries(labels).flatMap(([k, v]) => ['--label', `${k}=${v}`]), marker]);
    try {
      // the server's next heartbeat (every 5 s) finds the older holder
      await waitFor(
        async () => {
          const r = await fetch(`${server.url}/health`);
          const why = ((await r.json()) as { reason?: string }).reason ?? '';
          return r.status === 503 && /^lost the instance name: instance ".*" is held by an older server \(host some-other-host, pid 4242/.test(why);
        },
        30_000,
        '/health saying the server lost its instance name',
      );
      expect(await server.logs()).toMatch(/"event":"instance_lost"/);
      // it serves no new episode, and its own are torn down
      expect((await server.call('POST', '/episodes', { task_id: 'fx-echo-0' })).status).toBe(503);
      await waitFor(() => nothingLeft(server.instance), 60_000, 'its episode torn down: nothing of it left');
    } finally {
      await dk(1, ['volume', 'rm', '-f', marker]).catch(() => '');
      await dk(1, ['rm', '-f', server.name]).catch(() => '');
    }
  });
});
