/**
 * How the server is deployed on a swarm, for real, on the lab (one node is enough: what is proved
 * is the deployment, not placement). deploy/swarm-manager.sh runs the server as a plain container
 * on the manager: /health answers through the published port, an episode is played over HTTP with
 * the token from a mounted file, and `down` drains and leaves nothing. Run as a swarm service (what
 * `docker stack deploy` makes) the server cannot join episode overlays (Docker never connects a
 * swarm-managed container to an attachable overlay), so it refuses to start, saying why.
 */
import { execFile } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { LOCAL_NODE_IMAGE, uniqueInstance, waitFor } from '../../support/docker.js';
import {
  dk,
  footprint,
  lab,
  LAB_DIR,
  MANAGER_IP,
  prepareServerImage,
  REGISTRY,
  REPO,
  runningContainers,
  SERVER_IMAGE,
  sock,
} from '../../../scripts/lib/swarm-lab.js';
import { describeSwarm } from '../../support/swarm-lab.js';

const run = promisify(execFile);
const NAME = 'oe-swarm-manager-test';
const PORT = 18400;
const URL = `http://${MANAGER_IP}:${PORT}`;

describeSwarm('deploying the server on a swarm', () => {
  let secrets: string;

  beforeAll(async () => {
    secrets = mkdtempSync(join(tmpdir(), 'openenv-swarm-token-'));
    await lab('down', 1);
    await lab('up', 1);
    await prepareServerImage();
  }, 600_000);

  afterAll(async () => {
    await dk(1, ['rm', '-f', NAME]).catch(() => '');
    await lab('down', 1);
    rmSync(secrets, { recursive: true, force: true });
  }, 300_000);

  it('deploy/swarm-manager.sh: /health through the published port, an episode played with the token, down drains and leaves nothing', async () => {
    const instance = uniqueInstance('swarm-deploy');
    const token = `tok-${instance}`;
    const tokenFile = join(secrets, 'token');
    writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
    // readable by the server alone: it runs as uid 1000 in its image
    chownSync(tokenFile, 1000, 1000);
    const env = {
      ...process.env,
      DOCKER_HOST: sock(1),
      DOCKER_SOCKET: `${LAB_DIR}/n1/docker.sock`,
      OPENENV_NAME: NAME,
      OPENENV_IMAGE: SERVER_IMAGE,
      OPENENV_REGISTRY: REGISTRY,
      OPENENV_BUNDLES_DIR: join(REPO, 'test/fixtures'),
      OPENENV_BUNDLE: '/bundles/fixture-v1',
      OPENENV_TOKEN_FILE: tokenFile,
      OPENENV_PORT: String(PORT),
      OPENENV_PUBLISH_IP: MANAGER_IP,
      OPENENV_MAX_CONCURRENT_ENVS: '2',
      OPENENV_INSTANCE: instance,
      OPENENV_BUILD_ARG: `NODE_IMAGE=${LOCAL_NODE_IMAGE}`,
    };
    const script = join(REPO, 'deploy/swarm-manager.sh');
    await run('bash', [script, 'up'], { env });
    await waitFor(async () => (await fetch(`${URL}/health`).catch(() => null))?.status === 200, 240_000, 'the server answering /health on the manager');
    const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    expect((await fetch(`${URL}/episodes`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status).toBe(401);
    const reset = await fetch(`${URL}/episodes`, { method: 'POST', headers: auth, body: JSON.stringify({ task_id: 'fx-echo-0' }) });
    const body = (await reset.json()) as { episode_id: string };
    expect(reset.status, JSON.stringify(body)).toBe(201);
    const step = async (tool: string, args: unknown) =>
      (
        await fetch(`${URL}/episodes/${body.episode_id}/step`, {
          method: 'POST',
          headers: auth,
          body: JSON.stringify({ type: 'call_tool', tool_name: tool, arguments: args }),
        })
      ).json() as Promise<any>;
    expect((await step('echo', { text: 'through the manager' })).observation.result.content[0].text).toBe('through the manager');
    // an episode left live: `down` must drain it
    const live = await fetch(`${URL}/episodes`, { method: 'POST', headers: auth, body: JSON.stringify({ task_id: 'fx-echo-0' }) });
    expect(live.status).toBe(201);
    expect(await step('finish_now', { score: 0.5 })).toMatchObject({ done: true, reward: 0.5 });
    const { stdout } = await run('bash', [script, 'down'], { env });
    expect(stdout).toMatch(/exit code 0/);
    // drained means every service removed; their task containers stop, and the overlays go, within a bound
    await waitFor(
      async () => {
        const f = await footprint(instance, 1);
        return f.services.length + f.networks.length + f.tasks.length + runningContainers(f) === 0;
      },
      60_000,
      'no service, overlay, task or container of the instance left',
    );
    expect((await dk(1, ['ps', '-aq', '--filter', `name=^${NAME}$`])).trim()).toBe('');
  });

  it('refuses to run as a swarm service (what docker stack deploy makes), saying why', async () => {
    const instance = uniqueInstance('swarm-as-service');
    const service = 'oe-swarm-as-service';
    await dk(1, [
      'service',
      'create',
      '-d',
      '--name',
      service,
      '--restart-condition',
      'none',
      // where the server image is (the manager), as a stack placed on a manager would run it
      '--constraint',
      'node.role==manager',
      // the image runs as uid 1000: it reaches the manager's socket through the socket's group
      '--group',
      String(statSync(`${LAB_DIR}/n1/docker.sock`).gid),
      '--mount',
      `type=bind,source=${LAB_DIR}/n1/docker.sock,target=/var/run/docker.sock`,
      '--mount',
      `type=bind,source=${join(REPO, 'test/fixtures/fixture-v1')},target=/bundle,readonly`,
      '-e',
      `AGENTENV_TOKEN=tok-${instance}`,
      SERVER_IMAGE,
      '/bundle',
      '--host',
      '0.0.0.0',
      '--sandbox',
      'swarm',
      '--registry',
      REGISTRY,
      '--instance',
      instance,
      '--build-arg',
      `NODE_IMAGE=${LOCAL_NODE_IMAGE}`,
    ]);
    try {
      await waitFor(
        async () => /failed|complete|rejected/i.test(await dk(1, ['service', 'ps', '--format', '{{.CurrentState}}', service])),
        90_000,
        'the service task to end',
      );
      const { stdout, stderr } = await run('docker', ['-H', sock(1), 'service', 'logs', '--raw', service]);
      expect(stdout + stderr).toMatch(/runs as task \w+ of the swarm service oe-swarm-as-service.*plain container on a manager node/);
      expect(await dk(1, ['service', 'ps', '--format', '{{.CurrentState}}', service])).toMatch(/^Failed/);
    } finally {
      await dk(1, ['service', 'rm', service]).catch(() => '');
    }
    await waitFor(
      async () => (await dk(1, ['ps', '-aq', '--filter', `label=com.docker.swarm.service.name=${service}`])).trim() === '',
      60_000,
      'the task container gone',
    );
    const f = await footprint(instance, 1);
    expect([f.services, f.networks, f.tasks, runningContainers(f)]).toEqual([[], [], [], 0]);
  });
});
