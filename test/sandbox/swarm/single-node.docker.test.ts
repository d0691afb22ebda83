/**
 * --sandbox swarm on a one-node swarm (the lab with its manager only): the same backend where a
 * multi-node lab is not wanted. Deploy on the overlay, a tool call, a crash reported as such, and
 * nothing left behind.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { uniqueInstance, waitFor } from '../../support/docker.js';
import { dk, footprint, lab, placements, prepareServerImage, removeServers, REPO, runningContainers, startServer } from '../../../scripts/lib/swarm-lab.js';
import { describeSwarm } from '../../support/swarm-lab.js';

describeSwarm('swarm sandbox on a one-node swarm', () => {
  beforeAll(async () => {
    await lab('down', 3);
    await lab('up', 1);
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
    const echo = await server.call('POST', `/episodes/${e}/step`, { type: 'call_tool', tool_name: 'echo', arguments: { text: 'over the overlay' } });
    expect(echo.body.observation.result.content[0].text).toBe('over the overlay');
    const crash = await server.call('POST', `/episodes/${e}/step`, { type: 'call_tool', tool_name: 'crash', arguments: { code: 7 } });
    expect(crash.body).toMatchObject({ done: true, reward: null, observation: { end_reason: 'env_failed', failure: { reason: 'env_crashed', exit_code: 7 } } });
    await waitFor(
      async () => {
        const f = await footprint(server.instance, 1);
        return f.services.length + f.networks.length + f.tasks.length + runningContainers(f) === 0;
      },
      60_000,
      'nothing of the episode left',
    );
    await dk(1, ['stop', '--time', '120', server.name]);
    expect((await dk(1, ['inspect', '--format', '{{.State.ExitCode}}', server.name])).trim()).toBe('0');
  });
});
