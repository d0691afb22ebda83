/** What a killed server leaves behind is found by label and removed; other instances are left alone; foreign subnets are skipped. */
import { execFileSync } from 'node:child_process';
import Dockerode from 'dockerode';
import { afterAll, beforeAll, expect, it, onTestFinished } from 'vitest';
import { LABELS, SandboxError, type EnvHandle } from '../../../src/sandbox/sandbox.js';
import { DockerSandbox } from '../../../src/sandbox/docker/index.js';
import { describeDocker, labelledResources, uniqueInstance } from '../../support/docker.js';
import { buildEcho, echoSpec } from './fixture.js';

function subnetOf(networkId: string): string {
  return execFileSync('docker', ['network', 'inspect', '--format', '{{(index .IPAM.Config 0).Subnet}}', networkId], { encoding: 'utf8' }).trim();
}

describeDocker('DockerSandbox sweep', () => {
  const docker = new Dockerode();
  const instance = uniqueInstance('sweep');
  const otherInstance = uniqueInstance('bystander');
  const sweeperInstance = uniqueInstance('sweeper');
  // The killed and the restarted instance share a range of their own: a network another server on
  // this engine holds in the default pool (or a run that was killed before its sweep) cannot be
  // among the subnets the restarted instance must skip.
  const killedPool = { subnetPool: '10.214.32.0/24', subnetPrefix: 28 };
  const foreignLabel = `io.openenv.test.foreign=${instance}`;
  const sandboxes: DockerSandbox[] = [];
  const make = (inst: string, extra: Partial<ConstructorParameters<typeof DockerSandbox>[0]> = {}) => {
    const s = new DockerSandbox({ instance: inst, bundleName: 'fixture-v1', ...extra });
    sandboxes.push(s);
    return s;
  };
  let image = '';

  beforeAll(async () => {
    image = await buildEcho(make(instance));
  });

  afterAll(async () => {
    for (const inst of [instance, otherInstance, sweeperInstance]) {
      const s = new DockerSandbox({ instance: inst, bundleName: 'fixture-v1' });
      await s.sweep();
      await s.close();
    }
    execFileSync('docker', ['network', 'prune', '-f', '--filter', `label=${foreignLabel}`], { stdio: 'ignore' });
    for (const s of sandboxes) await s.close();
  });

  const sweepAfterward = (inst: string) =>
    onTestFinished(async () => {
      // what a failed assertion left must not fail the next test
      const s = new DockerSandbox({ instance: inst, bundleName: 'fixture-v1' });
      await s.sweep();
      await s.close();
    });

  it('removes what a killed instance left, a half-created episode included', async () => {
    sweepAfterward(instance);
    const killed = make(instance, killedPool);
    const left: EnvHandle[] = await Promise.all([0, 1, 2].map((i) => killed.deploy({ envId: `left-${i}`, env: echoSpec(image) })));
    // an episode whose deploy was cut off after its network was created
    const half = await docker.createNetwork({
      Name: `${instance}-half`,
      Internal: true,
      Labels: { [LABELS.managed]: '1', [LABELS.instance]: instance, [LABELS.bundle]: 'fixture-v1', [LABELS.episode]: 'left-half', [LABELS.env]: 'echo' },
    });
    // the server is "killed": no teardown, no close; a new process starts with the same instance id
    const skipped: string[] = [];
    const noop = () => {};
    const logger = {
      info: noop,
      warn: noop,
      error: noop,
      debug: (o: object, msg?: string) => msg?.includes('another network') && skipped.push((o as { subnet: string }).subnet),
    };
    const restarted = make(instance, { ...killedPool, logger });
    expect((await restarted.listEnvIds()).sort()).toEqual(['left-0', 'left-1', 'left-2', 'left-half']);

    // Its subnet pool starts empty, but the killed instance's networks still hold their subnets:
    // the engine refuses those ("pool overlaps") and the deploy moves on to a free one.
    const fresh = await restarted.deploy({ envId: 'fresh-0', env: echoSpec(image) });
    const leftSubnets = left.map((h) => subnetOf(h.networkId));
    expect(leftSubnets).not.toContain(subnetOf(fresh.networkId));
    expect(skipped.length).toBeGreaterThan(0);
    for (const s of skipped) expect(leftSubnets).toContain(s);
    expect((await fetch(`${fresh.baseUrl}/health`)).status).toBe(200);

    const swept = await restarted.sweep();
    expect(swept.containers.sort()).toEqual([...left.map((h) => h.containerId), fresh.containerId].sort());
    expect(swept.networks.sort()).toEqual([...left.map((h) => h.networkId), half.id, fresh.networkId].sort());
    expect(labelledResources(`${LABELS.instance}=${instance}`)).toEqual({ containers: [], networks: [] });
    expect(restarted.networksInUse()).toBe(0);
    expect(await restarted.listEnvIds()).toEqual([]);
    expect(await restarted.sweep()).toEqual({ containers: [], networks: [] });
  });

  it('leaves other instances alone', async () => {
    const bystander = make(otherInstance);
    const h = await bystander.deploy({ envId: 'b-0', env: echoSpec(image) });
    // a sweep by an instance of its own, so that what the first test may have left cannot count
    const sweeper = make(sweeperInstance);
    expect(await sweeper.sweep()).toEqual({ containers: [], networks: [] });
    expect((await fetch(`${h.baseUrl}/health`)).status).toBe(200);
    expect(await bystander.listEnvIds()).toEqual(['b-0']);
    await bystander.teardown('b-0');
    expect(labelledResources(`${LABELS.instance}=${otherInstance}`)).toEqual({ containers: [], networks: [] });
  });

  it('skips a subnet of its pool that another network uses, and fails cleanly when none is left', async () => {
    execFileSync('docker', ['network', 'create', '--internal', '--subnet', '10.214.7.0/28', '--label', foreignLabel, `${instance}-foreign`], {
      stdio: 'ignore',
    });
    const sb = make(instance, { subnetPool: '10.214.7.0/26', subnetPrefix: 28 });
    const h = await sb.deploy({ envId: 'skip-0', env: echoSpec(image) });
    expect(subnetOf(h.networkId)).toBe('10.214.7.16/28');
    expect(h.baseUrl).toMatch(/^http:\/\/10\.214\.7\.(1[89]|2\d|30):8000$/);
    await sb.teardown('skip-0');

    const tiny = make(instance, { subnetPool: '10.214.7.0/28', subnetPrefix: 28 });
    const err = await tiny.deploy({ envId: 'no-room', env: echoSpec(image) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxError);
    expect((err as SandboxError).reason).toBe('engine_error');
    expect((err as SandboxError).message).toMatch(/no free subnet/);
    expect(tiny.networksInUse()).toBe(0);
    expect(labelledResources(`${LABELS.instance}=${instance}`)).toEqual({ containers: [], networks: [] });
  });
});
