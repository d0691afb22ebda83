/**
 * The swarm backend's service spec is locked down as every env (src/sandbox/swarm/services.ts
 * spreading hardening.ts's swarmLockdown): what createEnvService sends the engine, captured from a
 * fake one. The swarm lab (test/sandbox/swarm/) runs these services on real nodes.
 */
import type Dockerode from 'dockerode';
import { describe, expect, it } from 'vitest';
import { ENV_LOCKDOWN } from '../../src/defaults.js';
import { DEFAULT_CAPABILITIES, EnvSecuritySchema, enginePidsLimit } from '../../src/sandbox/lockdown.js';
import { createEnvService } from '../../src/sandbox/swarm/services.js';
import type { EnvSpec } from '../../src/sandbox/sandbox.js';
import { echoSpec } from '../sandbox/contract.js';

const owner = { instance: 'i', bundle: 'b', episode: 'e1', env: 'echo' };
const network = { id: 'net1', name: 'openenv-echo-e1' };
const spec = (over: Partial<EnvSpec> = {}): EnvSpec => echoSpec('img:1', { deployTimeoutMs: 1000, environment: { A: '1' }, ...over });

async function sent(env: EnvSpec, engine = { apiVersion: '1.41', defaultRuntime: 'runc' }): Promise<any> {
  let captured: any = null;
  const docker = {
    createService: async (o: unknown) => {
      captured = o;
      return { id: 'svc1' };
    },
  } as unknown as Dockerode;
  expect(await createEnvService(docker, owner, env, network, env.image, 'secret', engine)).toBe('svc1');
  return captured;
}

describe("the swarm backend's service spec", () => {
  it('every env: capabilities dropped but the default set, an init, ulimits, the limits; its image, variables and secret kept', async () => {
    const s = await sent(spec());
    const c = s.TaskTemplate.ContainerSpec;
    expect(c).toMatchObject({
      Image: 'img:1',
      CapabilityDrop: ['ALL'],
      CapabilityAdd: DEFAULT_CAPABILITIES.map((x) => `CAP_${x}`).sort(),
      Init: true,
      Ulimits: [
        { Name: 'nofile', Soft: ENV_LOCKDOWN.nofile, Hard: ENV_LOCKDOWN.nofile },
        { Name: 'core', Soft: 0, Hard: 0 },
      ],
      ReadOnly: false,
    });
    expect(c.Env).toEqual(expect.arrayContaining(['A=1', 'PORT=8000', expect.stringMatching(/^OPENENV_ENV_SECRET=secret$/)]));
    // this engine's API (1.41) takes no no-new-privileges for a service: not sent (granted says so)
    expect(c.Privileges).toBeUndefined();
    expect(s.TaskTemplate.Resources).toEqual({
      Limits: { MemoryBytes: 128 * 1024 * 1024, NanoCPUs: 500_000_000, Pids: 64 },
      Reservations: { MemoryBytes: 128 * 1024 * 1024, NanoCPUs: 500_000_000 },
    });
  });

  it("a bundle's asks: a capability, a read-only root with its tmpfs, a user; no-new-privileges on an engine that takes it; runsc's pids", async () => {
    const security = EnvSecuritySchema.parse({ capabilities: ['NET_RAW'], root: 'read-only', tmp_mb: 8, user: 'agent' });
    const s = await sent(spec({ security }), { apiVersion: '1.44', defaultRuntime: 'runsc' });
    const c = s.TaskTemplate.ContainerSpec;
    expect(c.CapabilityAdd).toContain('CAP_NET_RAW');
    expect(c).toMatchObject({
      ReadOnly: true,
      User: 'agent',
      Mounts: [{ Type: 'tmpfs', Target: '/tmp', TmpfsOptions: { SizeBytes: 8 * 1024 * 1024 } }],
      Privileges: { NoNewPrivileges: true },
    });
    expect(s.TaskTemplate.Resources.Limits.Pids).toBe(enginePidsLimit(64, 'runsc'));
  });
});
