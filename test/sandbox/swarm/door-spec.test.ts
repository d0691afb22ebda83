/**
 * What the swarm backend needs of an env's model door (services.ts), against a fake engine and
 * fake interfaces: the overlay's subnet read from the engine, the server container's own address
 * on it once up, and the door's names in the service's hosts ("IP name"). The lab
 * (harness.docker.test.ts) runs harness episodes through such doors on real nodes.
 */
import type Dockerode from 'dockerode';
import type { NetworkInterfaceInfo } from 'node:os';
import { describe, expect, it } from 'vitest';
import { createEnvService, overlaySubnet, ownAddressUp } from '../../../src/sandbox/swarm/services.js';
import { SandboxError } from '../../../src/sandbox/sandbox.js';
import { echoSpec } from '../contract.js';

const owner = { instance: 'i', bundle: 'b', episode: 'e1', env: 'echo' };
const network = { id: 'net1', name: 'openenv-echo-e1' };
const engine = { apiVersion: '1.41', defaultRuntime: 'runc' };

const inspecting = (info: unknown) => ({ getNetwork: () => ({ inspect: async () => info }) }) as unknown as Dockerode;
const iface = (address: string, family: 'IPv4' | 'IPv6' = 'IPv4') => ({ address, family }) as NetworkInterfaceInfo;

describe("the swarm backend's model door", () => {
  it("reads the overlay's IPv4 subnet from the engine; an overlay without one is an engine failure", async () => {
    expect(await overlaySubnet(inspecting({ IPAM: { Config: [{ Subnet: 'fd00::/64' }, { Subnet: '10.78.3.0/24' }] } }), 'net1')).toBe('10.78.3.0/24');
    await expect(overlaySubnet(inspecting({ IPAM: { Config: [] } }), 'net1')).rejects.toMatchObject({ fact: 'engine_failed' });
  });

  it("finds the server container's own address inside the subnet, not one of another network", async () => {
    const interfaces = () => ({ eth0: [iface('172.18.0.5')], eth1: [iface('fe80::1', 'IPv6'), iface('10.78.3.7')], eth2: [iface('10.78.4.2')] });
    expect(await ownAddressUp('10.78.3.0/24', new AbortController().signal, interfaces)).toBe('10.78.3.7');
  });

  it('waits for the address to come up, and stops waiting when the deploy is aborted', async () => {
    let polls = 0;
    const later = () => (++polls < 3 ? { eth0: [iface('172.18.0.5')] } : { eth0: [iface('172.18.0.5')], eth1: [iface('10.78.3.9')] });
    expect(await ownAddressUp('10.78.3.0/24', new AbortController().signal, later)).toBe('10.78.3.9');
    expect(polls).toBe(3);
    const ac = new AbortController();
    const never = ownAddressUp('10.78.5.0/24', ac.signal, () => ({ eth0: [iface('172.18.0.5')] }));
    ac.abort();
    await expect(never).rejects.toMatchObject({ name: 'AbortError' });
    await expect(ownAddressUp('nonsense', ac.signal)).rejects.toBeInstanceOf(SandboxError);
  });

  it("puts the env's hosts in its service as hosts-file lines, and none when it has none", async () => {
    let captured: any = null;
    const docker = { createService: async (o: unknown) => ((captured = o), { id: 'svc1' }) } as unknown as Dockerode;
    const env = echoSpec('img:1', { hosts: { 'api.openai.com': '10.78.3.7', 'model.door': '10.78.3.7' } });
    await createEnvService(docker, owner, env, network, env.image, 'sec', engine);
    expect(captured.TaskTemplate.ContainerSpec.Hosts).toEqual(['10.78.3.7 api.openai.com', '10.78.3.7 model.door']);
    await createEnvService(docker, owner, echoSpec('img:1'), network, 'img:1', 'sec', engine);
    expect(captured.TaskTemplate.ContainerSpec.Hosts).toBeUndefined();
  });
});
