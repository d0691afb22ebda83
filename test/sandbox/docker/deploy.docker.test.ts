/**
 * What only the Docker backend has, on a real engine: the container's limits, labels and ports, its
 * internal network on our subnet pool, isolation, a missing image, and removals racing the engine.
 * Readiness, failure reasons, abort and teardown are the Sandbox contract's (contract.docker.test.ts).
 */
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LABELS, SandboxError, type EnvHandle } from '../../../src/sandbox/sandbox.js';
import { DockerSandbox } from '../../../src/sandbox/docker/index.js';
import { describeDocker, labelledResources, uniqueInstance } from '../../support/docker.js';
import { rejection } from '../contract.js';
import { buildEcho, echoSpec, post } from './fixture.js';

interface ContainerInfo {
  Config: { Env: string[]; Labels: Record<string, string> };
  HostConfig: {
    SecurityOpt: string[] | null;
    DnsOptions: string[] | null;
    Memory: number;
    MemorySwap: number;
    NanoCpus: number;
    PidsLimit: number;
    NetworkMode: string;
    AutoRemove: boolean;
    PortBindings: Record<string, unknown> | null;
    PublishAllPorts: boolean;
  };
  NetworkSettings: { Ports: Record<string, unknown[] | null> | null; Networks: Record<string, { NetworkID: string; IPAddress: string }> };
}
interface NetworkInfo {
  Name: string;
  Internal: boolean;
  Labels: Record<string, string>;
  IPAM: { Config: Array<{ Subnet: string; Gateway: string }> };
  Containers: Record<string, unknown>;
}

function inspect<T>(kind: 'container' | 'network', id: string): T {
  return (JSON.parse(execFileSync('docker', [kind, 'inspect', id], { encoding: 'utf8' })) as T[])[0]!;
}

/** runs a node one-liner inside a running container (the image has no shell) */
function execNode(containerId: string, script: string): string {
  return execFileSync('docker', ['exec', containerId, 'node', '-e', script], { encoding: 'utf8', timeout: 30_000 }).trim();
}

describeDocker('DockerSandbox deploy', () => {
  const instance = uniqueInstance('deploy');
  const instanceLabel = `${LABELS.instance}=${instance}`;
  const sandbox = new DockerSandbox({ instance, bundleName: 'fixture-v1' });
  let image = '';
  const nothingLeft = () => expect(labelledResources(instanceLabel)).toEqual({ containers: [], networks: [] });

  beforeAll(async () => {
    image = await buildEcho(sandbox);
  });

  afterAll(async () => {
    await sandbox.sweep();
    await sandbox.close();
  });

  describe('a healthy env', () => {
    let handle: EnvHandle;
    let deployMs = 0;

    beforeAll(async () => {
      const t0 = Date.now();
      handle = await sandbox.deploy({ envId: 'ep-ok', env: echoSpec(image, { environment: { LOG_LEVEL: 'debug' } }) });
      deployMs = Date.now() - t0;
      console.log(`[measure] deploy-to-ready of the echo env: ${deployMs} ms`);
    });

    it('is ready and answers the env contract at its base URL, from the host', async () => {
      expect(handle.envId).toBe('ep-ok');
      expect(handle.baseUrl).toMatch(/^http:\/\/10\.213\.\d+\.\d+:8000$/);
      expect(sandbox.networksInUse()).toBe(1);
      const health = await fetch(`${handle.baseUrl}/health`);
      expect(health.status).toBe(200);
      expect(await post(handle.baseUrl, '/reset', { task_id: 'fx-echo-0', data: { finish_score: 0.5 }, seed: 1 })).toMatchObject({ status: 200 });
      expect(await post(handle.baseUrl, '/tools/call', { name: 'echo', arguments: { text: 'hello' } })).toEqual({
        status: 200,
        json: { done: false, result: { text: 'hello' }, text: 'hello', is_error: false },
      });
      expect(await post(handle.baseUrl, '/tools/call', { name: 'nope', arguments: {} })).toMatchObject({ status: 404, json: { error: 'tool_not_found' } });
      expect(await post(handle.baseUrl, '/finish', {})).toEqual({ status: 200, json: { scores: { quality: 0.5 } } });
    });

    it("says where the deploy's time went, stage by stage, the stages adding up to no more than the whole", () => {
      const stages = handle.stagesMs!;
      expect(Object.keys(stages)).toEqual(['network', 'create', 'start', 'ready']);
      for (const ms of Object.values(stages)) expect(ms).toBeGreaterThanOrEqual(0);
      // a container is never created, started and ready in no time at all
      expect(stages.create! + stages.start! + stages.ready!).toBeGreaterThan(0);
      expect(Object.values(stages).reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(deployMs);
    });

    it('runs with the declared limits, its labels, its env vars and PORT, and no published port', () => {
      const c = inspect<ContainerInfo>('container', handle.containerId);
      expect(c.HostConfig.Memory).toBe(128 * 1024 * 1024);
      expect(c.HostConfig.MemorySwap).toBe(128 * 1024 * 1024);
      expect(c.HostConfig.NanoCpus).toBe(500_000_000);
      expect(c.HostConfig.PidsLimit).toBe(64);
      expect(c.HostConfig.SecurityOpt).toEqual(['no-new-privileges:true']);
      expect(c.HostConfig.AutoRemove).toBe(false);
      expect(c.Config.Labels).toMatchObject({
        [LABELS.managed]: '1',
        [LABELS.instance]: instance,
        [LABELS.bundle]: 'fixture-v1',
        [LABELS.episode]: 'ep-ok',
        [LABELS.env]: 'echo',
      });
      expect(c.Config.Env).toEqual(expect.arrayContaining(['PORT=8000', 'LOG_LEVEL=debug']));
      expect(c.HostConfig.PublishAllPorts).toBe(false);
      expect(Object.keys(c.HostConfig.PortBindings ?? {})).toEqual([]);
      // EXPOSE 8000 lists the port, but bound to nothing on the host
      for (const bindings of Object.values(c.NetworkSettings.Ports ?? {})) expect(bindings ?? []).toEqual([]);
      expect(execFileSync('docker', ['port', handle.containerId], { encoding: 'utf8' }).trim()).toBe('');
      // on its episode network only
      expect(Object.values(c.NetworkSettings.Networks).map((n) => n.NetworkID)).toEqual([handle.networkId]);
    });

    it('sits on an internal, labelled network whose subnet comes from our pool', () => {
      const n = inspect<NetworkInfo>('network', handle.networkId);
      expect(n.Internal).toBe(true);
      expect(n.Labels).toMatchObject({ [LABELS.managed]: '1', [LABELS.instance]: instance, [LABELS.episode]: 'ep-ok', [LABELS.env]: 'echo' });
      const [cfg] = n.IPAM.Config;
      expect(cfg!.Subnet).toMatch(/^10\.213\.\d+\.\d+\/28$/);
      const ip = new URL(handle.baseUrl).hostname;
      const [a, b, c] = cfg!.Subnet.split('/')[0]!.split('.');
      expect(ip.startsWith(`${a}.${b}.${c}.`)).toBe(true);
      expect(cfg!.Gateway).toBe(`${a}.${b}.${c}.${Number(cfg!.Subnet.split('/')[0]!.split('.')[3]) + 1}`);
      expect(Object.keys(n.Containers)).toEqual([handle.containerId]);
    });

    it("reaches neither the outside nor another episode's env", async () => {
      const other = await sandbox.deploy({ envId: 'ep-other', env: echoSpec(image) });
      try {
        const connect = (host: string, port: number) =>
          execNode(
            handle.containerId,
            `const s = require('net').connect({ host: '${host}', port: ${port}, timeout: 2000 });
             s.on('connect', () => { console.log('connected'); process.exit(0); });
             s.on('timeout', () => { console.log('timeout'); process.exit(0); });
             s.on('error', (e) => { console.log(e.code); process.exit(0); });`,
          );
        const blocked = ['ENETUNREACH', 'EHOSTUNREACH', 'timeout'];
        const otherIp = new URL(other.baseUrl).hostname;
        // the host reaches both envs ...
        expect((await fetch(`${other.baseUrl}/health`)).status).toBe(200);
        // ... but one env does not reach the other, nor an address outside
        expect(blocked).toContain(connect(otherIp, 8000));
        expect(blocked).toContain(connect('198.51.100.1', 80));
      } finally {
        await sandbox.teardown('ep-other');
      }
    });

    it('resolves no name from outside, and tries once for a second: the engine asked for one try (a name lookup on a network with no route out used to wait ~20 s)', () => {
      const c = inspect<ContainerInfo>('container', handle.containerId);
      expect(c.HostConfig.DnsOptions).toEqual(['timeout:1', 'attempts:1']);
      const said = execNode(
        handle.containerId,
        `require('dns').lookup('deb.debian.org', (e, a) => { console.log(e ? e.code : 'resolved ' + a); process.exit(0); });`,
      );
      expect(said).not.toMatch(/^resolved/);
    });

    it('is diagnosed as running, with its log', async () => {
      const d = await sandbox.diagnose(handle);
      expect(d).toMatchObject({ running: true, exitCode: null, oomKilled: false });
      expect(d.logTail).toMatch(/POST \/tools\/call -> 200/);
      expect(d.logTail.split('\n').length).toBeLessThanOrEqual(20);
    });

    it('is gone after teardown, network and subnet included', async () => {
      await sandbox.teardown('ep-ok');
      nothingLeft();
      expect(sandbox.networksInUse()).toBe(0);
      await expect(sandbox.diagnose(handle)).resolves.toMatchObject({ running: false, exitCode: null });
    });
  });

  it('reports a missing image as image_unavailable and leaves nothing', async () => {
    const err = (await rejection(sandbox.deploy({ envId: 'ep-noimage', env: echoSpec('openenv-bundle/not-built:000000000000') }))) as SandboxError;
    expect(err.reason).toBe('image_unavailable');
    expect(err.message).toContain('openenv-bundle/not-built:000000000000');
    nothingLeft();
    expect(sandbox.networksInUse()).toBe(0);
  });

  describe('teardown', () => {
    it('succeeds when the engine already lost the container and network', async () => {
      const h = await sandbox.deploy({ envId: 'ep-gone', env: echoSpec(image) });
      execFileSync('docker', ['rm', '-f', h.containerId], { stdio: 'ignore' });
      execFileSync('docker', ['network', 'rm', h.networkId], { stdio: 'ignore' });
      expect(sandbox.networksInUse()).toBe(1);
      await sandbox.teardown('ep-gone');
      expect(sandbox.networksInUse()).toBe(0);
      nothingLeft();
    });

    it('succeeds while the engine is already removing the container', async () => {
      const h = await sandbox.deploy({ envId: 'ep-racing', env: echoSpec(image) });
      const external = new Promise<void>((resolve) => {
        // `docker rm -f` runs beside our removal: one of the two gets 404 or 409
        import('node:child_process').then(({ execFile }) => execFile('docker', ['rm', '-f', h.containerId], () => resolve()));
      });
      await Promise.all([sandbox.teardown('ep-racing'), external]);
      nothingLeft();
      expect(sandbox.networksInUse()).toBe(0);
    });
  });
});
