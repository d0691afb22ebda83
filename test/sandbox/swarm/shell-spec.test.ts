/**
 * What the swarm backend's shell part puts in an env's service (services.ts with shell.ts's
 * toolbox mount and placement), captured from a fake engine: a shell env's keeper as process 1,
 * the toolbox read-only, no PORT or secret, and the nodes without the toolbox left out. The lab
 * (shell.docker.test.ts) runs such services on real nodes.
 */
import type Dockerode from 'dockerode';
import { describe, expect, it } from 'vitest';
import { createEnvService } from '../../../src/sandbox/swarm/services.js';
import { SwarmToolboxes } from '../../../src/sandbox/swarm/shell.js';
import type { SwarmNode } from '../../../src/sandbox/swarm/tasks.js';
import type { EnvSpec } from '../../../src/sandbox/sandbox.js';
import { echoSpec } from '../contract.js';

const owner = { instance: 'i', bundle: 'b', episode: 'e1', env: 'box' };
const network = { id: 'net1', name: 'openenv-box-e1' };
const engine = { apiVersion: '1.41', defaultRuntime: 'runc' };

async function sent(env: EnvSpec, parts: Parameters<typeof createEnvService>[7], secret?: string): Promise<any> {
  let captured: any = null;
  const docker = {
    createService: async (o: unknown) => {
      captured = o;
      return { id: 'svc1' };
    },
  } as unknown as Dockerode;
  await createEnvService(docker, owner, env, network, env.image, secret, engine, parts);
  return captured;
}

const node = (id: string, state = 'ready'): SwarmNode => ({
  id,
  state,
  availability: 'active',
  addr: '10.0.0.1',
  role: 'worker',
  memoryBytes: 2 ** 30,
  nanoCpus: 2e9,
});

describe("the swarm backend's shell part in a service spec", () => {
  const toolbox = { volume: 'openenv-toolbox-i', dir: '/.openenv-toolbox-0123456789ab' };

  it('a shell env: the keeper as process 1 (no init), its workdir, the toolbox read-only, no PORT or secret, kept off nodes without it', async () => {
    const env = echoSpec('img:1', { kind: 'shell', workdir: '/app', environment: { A: '1' }, security: { capabilities: [], root: 'read-only', tmp_mb: 16 } });
    const s = await sent(env, { toolbox, constraints: ['node.id!=n3'] });
    const c = s.TaskTemplate.ContainerSpec;
    expect(c.Args).toEqual([
      '/.openenv-toolbox-0123456789ab/busybox',
      'sh',
      '-c',
      expect.stringContaining('sleep 2147483647'),
      'openenv-keeper',
      '/.openenv-toolbox-0123456789ab/busybox',
    ]);
    expect(c.Command).toBeUndefined();
    expect(c).toMatchObject({ Init: false, Dir: '/app', Env: ['A=1'] });
    // the read-only root's own tmpfs stays beside the toolbox
    expect(c.Mounts).toEqual([
      expect.objectContaining({ Type: 'tmpfs', Target: '/tmp' }),
      { Type: 'volume', Source: 'openenv-toolbox-i', Target: toolbox.dir, ReadOnly: true, VolumeOptions: { NoCopy: true } },
    ]);
    expect(s.TaskTemplate.Placement).toEqual({ Constraints: ['node.id!=n3'] });
  });

  it('an http env with the toolbox keeps its command, init, PORT and secret; without it, nothing changes', async () => {
    const env = echoSpec('img:1', { environment: { A: '1' } });
    const withToolbox = (await sent(env, { toolbox, constraints: [] }, 'sec')).TaskTemplate;
    expect(withToolbox.ContainerSpec).toMatchObject({ Init: true, Mounts: [expect.objectContaining({ Source: 'openenv-toolbox-i', ReadOnly: true })] });
    expect(withToolbox.ContainerSpec.Args).toBeUndefined();
    expect(withToolbox.ContainerSpec.Env).toEqual(expect.arrayContaining(['A=1', `PORT=${env.port}`, expect.stringMatching(/^OPENENV_ENV_SECRET=sec$/)]));
    expect(withToolbox.Placement).toBeUndefined();
    const plain = (await sent(env, {}, 'sec')).TaskTemplate.ContainerSpec;
    expect(plain.Mounts).toBeUndefined();
  });

  it('refuses a shell env without the toolbox', async () => {
    await expect(sent(echoSpec('img:1', { kind: 'shell' }), {})).rejects.toThrow(/a shell env's service needs the toolbox/);
  });

  it('placement: every node without the toolbox left out; none ready with it is unplaceable, saying so', () => {
    expect(SwarmToolboxes.placement([node('n1'), node('n2'), node('n3')], new Set(['n1', 'n2']), 'box')).toEqual(['node.id!=n3']);
    expect(SwarmToolboxes.placement([node('n1'), node('n2')], new Set(['n1', 'n2']), 'box')).toEqual([]);
    expect(() => SwarmToolboxes.placement([node('n1', 'down'), node('n2')], new Set(['n1']), 'box')).toThrow(
      expect.objectContaining({ reason: 'unschedulable', message: expect.stringMatching(/env `box` needs a node whose engine the server reaches.*node n2/) }),
    );
  });
});
