/**
 * A server running in a container (engine socket mounted) reaches envs by joining each episode
 * network. A long-running container stands in for that server here.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Dockerode from 'dockerode';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { LABELS, type EnvHandle } from '../../../src/sandbox/sandbox.js';
import { DockerSandbox, detectOwnContainerId } from '../../../src/sandbox/docker/index.js';
import { describeDocker, labelledResources, LOCAL_NODE_IMAGE, uniqueInstance } from '../../support/docker.js';
import { buildEcho, echoSpec } from './fixture.js';

function execNode(containerId: string, script: string): string {
  return execFileSync('docker', ['exec', containerId, 'node', '-e', script], { encoding: 'utf8', timeout: 30_000 }).trim();
}

const connectScript = (host: string, port: number) => `
  const s = require('net').connect({ host: '${host}', port: ${port}, timeout: 2000 });
  s.on('connect', () => { console.log('connected'); process.exit(0); });
  s.on('timeout', () => { console.log('timeout'); process.exit(0); });
  s.on('error', (e) => { console.log(e.code); process.exit(0); });`;

function networksOf(containerId: string): string[] {
  const json = execFileSync('docker', ['inspect', '--format', '{{json .NetworkSettings.Networks}}', containerId], { encoding: 'utf8' });
  return Object.values(JSON.parse(json) as Record<string, { NetworkID: string }>).map((n) => n.NetworkID);
}

function gatewayOf(networkId: string): string {
  return execFileSync('docker', ['network', 'inspect', '--format', '{{(index .IPAM.Config 0).Gateway}}', networkId], { encoding: 'utf8' }).trim();
}

const REPO = fileURLToPath(new URL('../../../', import.meta.url)).replace(/\/$/, '');
const SCRIPT = fileURLToPath(new URL('./in-container.ts', import.meta.url));

describeDocker('DockerSandbox attached to the server container', () => {
  const docker = new Dockerode();
  const instance = uniqueInstance('attach');
  const instanceLabel = `${LABELS.instance}=${instance}`;
  const helperLabel = `io.openenv.test.server-stand-in=${instance}`;
  let server = '';
  let sandbox: DockerSandbox;
  let image = '';
  let work = '';

  beforeAll(async () => {
    work = await mkdtemp(path.join(tmpdir(), 'attach-'));
    // this checkout and the engine socket mounted, as a containerised server would have them
    server = execFileSync(
      'docker',
      [
        'run',
        '-d',
        '--label',
        helperLabel,
        '-v',
        `${REPO}:${REPO}:ro`,
        '-v',
        '/var/run/docker.sock:/var/run/docker.sock',
        '-w',
        REPO,
        LOCAL_NODE_IMAGE,
        'node',
        '-e',
        'setInterval(() => {}, 1 << 30)',
      ],
      { encoding: 'utf8' },
    ).trim();
    sandbox = new DockerSandbox({ instance, bundleName: 'fixture-v1', attachContainer: server });
    image = await buildEcho(sandbox);
  });

  afterAll(async () => {
    await sandbox?.sweep();
    await sandbox?.close();
    const helpers = execFileSync('docker', ['ps', '-aq', '--filter', `label=${helperLabel}`], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean);
    if (helpers.length > 0) execFileSync('docker', ['rm', '-f', ...helpers], { stdio: 'ignore' });
    await rm(work, { recursive: true, force: true });
  });

  /** runs in-container.ts inside the server stand-in; its JSON output */
  function inContainer(cmd: string, episode = ''): Record<string, unknown> {
    const stdout = execFileSync('docker', ['exec', '-e', 'TSX_DISABLE_CACHE=1', server, 'node', '--import', 'tsx', SCRIPT, cmd, instance, episode, image], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    return JSON.parse(stdout.trim().split('\n').pop()!) as Record<string, unknown>;
  }

  it('finds no own container for a process on the host', async () => {
    if (existsSync('/.dockerenv')) return; // this suite itself runs in a container: nothing to assert
    expect(await detectOwnContainerId(docker)).toBeNull();
  });

  it("finds a container's own id from what it sees in /proc and its hostname", async () => {
    const mountinfo = path.join(work, 'mountinfo');
    const cgroup = path.join(work, 'cgroup');
    await writeFile(mountinfo, execNode(server, "process.stdout.write(require('fs').readFileSync('/proc/self/mountinfo', 'utf8'))"));
    await writeFile(cgroup, execNode(server, "process.stdout.write(require('fs').readFileSync('/proc/self/cgroup', 'utf8'))"));
    const hostname = execNode(server, "console.log(require('os').hostname())");
    expect(await detectOwnContainerId(docker, { mountinfo, cgroup, hostname })).toBe(server);
    // the short-id hostname alone is enough
    expect(await detectOwnContainerId(docker, { mountinfo: '/nonexistent', cgroup: '/nonexistent', hostname })).toBe(server);
    // a hostname that is not a container's id is not taken for one
    expect(await detectOwnContainerId(docker, { mountinfo: '/nonexistent', cgroup: '/nonexistent', hostname: 'abcdefabcdef' })).toBeNull();
  });

  it('joins each episode network, reaches the env from inside the container, and leaves on teardown', () => {
    const out = inContainer('deploy', 'att-0') as { own: string; handle: EnvHandle; health: number; echo: unknown };
    // detectOwnContainerId, run where a containerised server runs, finds that container
    expect(out.own).toBe(server);
    expect(out.health).toBe(200);
    expect(out.echo).toMatchObject({ text: 'from inside', is_error: false });
    const h = out.handle;
    expect(networksOf(server)).toContain(h.networkId);

    // the bridge has no host address: the env reaches nothing on the host through its gateway
    const gw = gatewayOf(h.networkId);
    expect(['ENETUNREACH', 'EHOSTUNREACH', 'timeout']).toContain(execNode(h.containerId, connectScript(gw, 80)));

    expect(inContainer('teardown', 'att-0')).toMatchObject({ ok: true });
    expect(networksOf(server)).not.toContain(h.networkId);
    expect(labelledResources(instanceLabel)).toEqual({ containers: [], networks: [] });
    // the server's container itself is left running
    expect(execFileSync('docker', ['inspect', '--format', '{{.State.Running}}', server], { encoding: 'utf8' }).trim()).toBe('true');
  });

  it('for comparison: without attachment the host keeps an address on the bridge, which the env reaches', async () => {
    const hostMode = new DockerSandbox({ instance, bundleName: 'fixture-v1' });
    try {
      const h = await hostMode.deploy({ envId: 'host-0', env: echoSpec(image) });
      // nothing listens on port 1 of the host: refused, i.e. the packet got there
      expect(execNode(h.containerId, connectScript(gatewayOf(h.networkId), 1))).toBe('ECONNREFUSED');
      await hostMode.teardown('host-0');
    } finally {
      await hostMode.close();
    }
  });

  it('disconnects before removing the network when a deploy fails, and on sweep', () => {
    expect(inContainer('crash', 'att-crash')).toMatchObject({ reason: 'env_crashed', networksInUse: 0 });
    expect(labelledResources(instanceLabel)).toEqual({ containers: [], networks: [] });

    const hs = [1, 2].map((i) => (inContainer('deploy', `att-${i}`) as { handle: EnvHandle }).handle);
    for (const h of hs) expect(networksOf(server)).toContain(h.networkId);
    const { swept } = inContainer('sweep') as { swept: { networks: string[] } };
    expect(swept.networks.sort()).toEqual(hs.map((h) => h.networkId).sort());
    expect(labelledResources(instanceLabel)).toEqual({ containers: [], networks: [] });
    expect(networksOf(server).filter((n) => hs.some((h) => h.networkId === n))).toEqual([]);
  });
});
