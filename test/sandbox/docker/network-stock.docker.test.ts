/**
 * The Docker sandbox's network stock on a real engine: networks made ahead of demand, each taken by
 * exactly one deploy and removed with its episode; never counted as an episode's; removed at close;
 * what a killed server's stock left is found by label.
 */
import Dockerode from 'dockerode';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { LABELS, SandboxError, type EnvSpec } from '../../../src/sandbox/sandbox.js';
import { probeExec } from '../../../src/sandbox/container-exec.js';
import { DockerSandbox } from '../../../src/sandbox/docker/index.js';
import { STOCK_KEY_PREFIX } from '../../../src/sandbox/engine/network-stock.js';
import { describeDocker, labelledResources, uniqueInstance, waitFor } from '../../support/docker.js';
import { buildEcho, echoSpec } from './fixture.js';
import { rejection } from '../contract.js';
import { ensureDebianBase, LOCAL_DEBIAN_IMAGE } from '../../harbor/helpers.js';

describeDocker('DockerSandbox network stock', () => {
  const docker = new Dockerode();
  const instance = uniqueInstance('stock');
  const sandboxes: DockerSandbox[] = [];
  const make = (networkStock: number, recycleNetworks = true, stockForShell = false) => {
    const s = new DockerSandbox({ instance, bundleName: 'fixture-v1', networkStock, recycleNetworks, stockForShell });
    sandboxes.push(s);
    return s;
  };
  let image = '';

  /** this instance's networks on the engine: full id → episode label */
  const networks = async () =>
    new Map(
      (await docker.listNetworks({ filters: JSON.stringify({ label: [`${LABELS.instance}=${instance}`] }) })).map((n) => [
        n.Id,
        n.Labels?.[LABELS.episode] ?? '',
      ]),
    );
  const stockedIds = async () => [...(await networks())].filter(([, ep]) => ep.startsWith(STOCK_KEY_PREFIX)).map(([id]) => id);

  beforeAll(async () => {
    image = await buildEcho(make(0));
  });

  afterAll(async () => {
    for (const s of sandboxes) await s.close();
    const s = new DockerSandbox({ instance, bundleName: 'fixture-v1' });
    await s.sweep();
    await s.close();
  });

  it('without recycling: a deploy takes a stocked network, the stock refills with fresh ones, the teardown removes it', async () => {
    const sandbox = make(2, false);
    sandbox.stock.start();
    await waitFor(() => sandbox.stock.stats().ready === 2, 30_000, 'the stock full');
    const before = await stockedIds();
    expect(before).toHaveLength(2);
    // the stock is nobody's episode and no network in use
    expect(await sandbox.listEnvIds()).toEqual([]);
    expect(sandbox.networksInUse()).toBe(0);

    const handle = await sandbox.deploy({ envId: 'ep-a', env: echoSpec(image) });
    expect(before).toContain(handle.networkId);
    expect((await fetch(`${handle.baseUrl}/health`)).status).toBe(200);
    expect(await sandbox.listEnvIds()).toEqual(['ep-a']);
    expect(sandbox.networksInUse()).toBe(1);

    await waitFor(() => sandbox.stock.stats().ready === 2, 30_000, 'the stock refilled');
    const after = await stockedIds();
    // labelled with its key still, but the episode's now: never handed out again
    expect(after).toHaveLength(3);
    const b = await sandbox.deploy({ envId: 'ep-b', env: echoSpec(image) });
    expect(b.networkId).not.toBe(handle.networkId);
    expect(after).toContain(b.networkId);

    await sandbox.teardown('ep-a');
    expect((await networks()).has(handle.networkId)).toBe(false);
    expect(labelledResources(`${LABELS.episode}=ep-a`)).toEqual({ containers: [], networks: [] });
    expect(await sandbox.listEnvIds()).toEqual(['ep-b']);
    await sandbox.teardown('ep-b');
    expect((await networks()).has(b.networkId)).toBe(false);
    expect(sandbox.networksInUse()).toBe(0);
    expect(sandbox.stock.stats()).toMatchObject({ size: 2, taken: 2 });

    await sandbox.close();
    // close removes the stock: nothing of the instance is left
    expect(labelledResources(`${LABELS.instance}=${instance}`)).toEqual({ containers: [], networks: [] });
  });

  it('recycling: an ended episode gives its network back empty, the next deploy gets it, and never while another episode is on it', async () => {
    const sandbox = make(1);
    sandbox.stock.start();
    await waitFor(() => sandbox.stock.stats().ready === 1, 30_000, 'the stock full');
    const [stocked] = await stockedIds();
    const endpoints = async (id: string) => Object.keys(((await docker.getNetwork(id).inspect()) as { Containers?: object }).Containers ?? {});

    const a = await sandbox.deploy({ envId: 'ep-a', env: echoSpec(image) });
    expect(a.networkId).toBe(stocked);
    // the one network is out with ep-a: nothing is made behind it, and a second deploy makes its own
    const other = await sandbox.deploy({ envId: 'ep-other', env: echoSpec(image) });
    expect(other.networkId).not.toBe(stocked);
    expect(await stockedIds()).toEqual([stocked]);
    expect(await endpoints(stocked!)).toEqual([a.containerId]);

    await sandbox.teardown('ep-a');
    // back in the stock, empty: no container, no endpoint of ep-a's env left on it
    expect((await networks()).has(stocked!)).toBe(true);
    expect(await endpoints(stocked!)).toEqual([]);
    expect(labelledResources(`${LABELS.episode}=ep-a`)).toEqual({ containers: [], networks: [] });
    expect(sandbox.stock.stats()).toMatchObject({ ready: 1, recycled: 1, made: 1 });
    expect(await sandbox.listEnvIds()).toEqual(['ep-other']);
    expect(sandbox.networksInUse()).toBe(1);

    const b = await sandbox.deploy({ envId: 'ep-b', env: echoSpec(image) });
    expect(b.networkId).toBe(stocked);
    expect(await endpoints(stocked!)).toEqual([b.containerId]);
    expect((await fetch(`${b.baseUrl}/health`)).status).toBe(200);
    // the other episode's network is its own: removed with it, never recycled (it is no stocked one)
    await sandbox.teardown('ep-other');
    expect((await networks()).has(other.networkId)).toBe(false);
    await sandbox.teardown('ep-b');
    expect(sandbox.stock.stats()).toMatchObject({ ready: 1, recycled: 2, made: 1 });
    expect(await sandbox.listEnvIds()).toEqual([]);
    await sandbox.close();
    expect(labelledResources(`${LABELS.instance}=${instance}`)).toEqual({ containers: [], networks: [] });
  });

  it('a failed deploy on a stocked network removes that network too', async () => {
    const sandbox = make(1);
    sandbox.stock.start();
    await waitFor(() => sandbox.stock.stats().ready === 1, 30_000, 'the stock full');
    const [stocked] = await stockedIds();
    // its ready path never answers 200: the deploy times out and cleans up
    const err = await rejection(sandbox.deploy({ envId: 'ep-bad', env: echoSpec(image, { readyPath: '/never-ready', deployTimeoutMs: 1500 }) }));
    expect(err).toBeInstanceOf(SandboxError);
    expect((err as SandboxError).reason).toBe('deploy_timeout');
    expect((await networks()).has(stocked!)).toBe(false);
    expect(labelledResources(`${LABELS.episode}=ep-bad`)).toEqual({ containers: [], networks: [] });
    expect(sandbox.networksInUse()).toBe(0);
    await sandbox.close();
    expect(labelledResources(`${LABELS.instance}=${instance}`)).toEqual({ containers: [], networks: [] });
  });

  it("for a bundle of shell envs (stockForShell): the stock's networks are a shell env's (no host address, not joined), a shell deploy takes one and gives it back; an http env makes its own", async () => {
    ensureDebianBase();
    const shell: EnvSpec = {
      name: 'sh',
      image: LOCAL_DEBIAN_IMAGE,
      kind: 'shell',
      port: 0,
      readyPath: '/',
      deployTimeoutMs: 30_000,
      resources: { memoryMb: 128, cpus: 0.5, pids: 64 },
      environment: {},
    };
    const inspect = async (id: string) =>
      (await docker.getNetwork(id).inspect()) as { Options?: Record<string, string>; Internal?: boolean; Containers?: Record<string, unknown> };
    const sandbox = make(1, true, true);
    sandbox.stock.start();
    await waitFor(() => sandbox.stock.stats().ready === 1, 30_000, 'the stock full');
    const [stocked] = await stockedIds();
    // made as a shell env's own network is: internal, the host given no address on it
    const made = await inspect(stocked!);
    expect(made.Internal).toBe(true);
    expect(made.Options?.['com.docker.network.bridge.inhibit_ipv4']).toBe('true');

    const a = await sandbox.deploy({ envId: 'ep-sh', env: shell });
    expect(a.networkId).toBe(stocked);
    expect(Object.keys((await inspect(stocked!)).Containers ?? {})).toEqual([a.containerId]);
    // the server's steps reach it through the engine
    expect((await probeExec(sandbox.shell.exec(a), 10_000, new AbortController().signal)).ok).toBe(true);
    // an http env takes no shell network: it makes its own
    const web = await sandbox.deploy({ envId: 'ep-web', env: echoSpec(image) });
    expect(web.networkId).not.toBe(stocked);
    expect((await fetch(`${web.baseUrl}/health`)).status).toBe(200);

    await sandbox.teardown('ep-sh');
    expect((await networks()).has(stocked!)).toBe(true);
    expect(sandbox.stock.stats()).toMatchObject({ ready: 1, recycled: 1, made: 1 });
    const b = await sandbox.deploy({ envId: 'ep-sh2', env: shell });
    expect(b.networkId).toBe(stocked);
    await sandbox.teardown('ep-sh2');
    await sandbox.teardown('ep-web');
    expect((await networks()).has(web.networkId)).toBe(false);
    await sandbox.close();
    expect(labelledResources(`${LABELS.instance}=${instance}`)).toEqual({ containers: [], networks: [] });
  });

  it("a killed server's stock is found by label: reported as strays, and swept", async () => {
    const killed = make(2);
    killed.stock.start();
    await waitFor(() => killed.stock.stats().ready === 2, 30_000, 'the stock full');
    const left = await stockedIds();
    // a new process with the same instance id and no memory of that stock
    const restarted = make(0);
    const ids = await restarted.listEnvIds();
    expect(ids).toHaveLength(2);
    for (const id of ids) expect(id.startsWith(STOCK_KEY_PREFIX)).toBe(true);
    // the reconciler tears a stray down by its id
    await restarted.teardown(ids[0]!);
    expect((await stockedIds()).length).toBe(1);
    const swept = await restarted.sweep();
    expect(swept.networks.length + 1).toBe(left.length);
    expect(labelledResources(`${LABELS.instance}=${instance}`)).toEqual({ containers: [], networks: [] });
    // the killed one's close finds nothing left to remove, and says nothing failed
    await killed.close();
  });
});
