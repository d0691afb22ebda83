/**
 * The env lock-down's engine settings (src/sandbox/engine/hardening.ts), for both backends: the
 * defaults, what a bundle may ask for by name and what it may never get, gVisor's pids scaling,
 * what an older swarm engine cannot enforce, and the bounds of an env's writable layer (its
 * bundle's, else the server's defaults). test/security/lockdown.docker.test.ts proves the same
 * settings on a real engine.
 */
import { describe, expect, it } from 'vitest';
import { ENV_LAYER_DEFAULTS, ENV_LOCKDOWN } from '../../src/defaults.js';
import { dockerLockdown, swarmLockdown } from '../../src/sandbox/engine/hardening.js';
import {
  DEFAULT_CAPABILITIES,
  EnvSecuritySchema,
  enginePidsLimit,
  granted,
  REFUSED_CAPABILITIES,
  withLayerDefaults,
  type LockdownInput,
} from '../../src/sandbox/lockdown.js';
import { DockerSandbox } from '../../src/sandbox/docker/index.js';
import { echoSpec } from '../sandbox/contract.js';

const resources = { memoryMb: 128, cpus: 0.5, pids: 64 };
const MB = 1024 * 1024;

describe('the Docker backend', () => {
  it('every env by default: all capabilities dropped but the short set, no-new-privileges, an init, ulimits, the resources, the image root and user', () => {
    const { hostConfig, user } = dockerLockdown({ resources });
    expect(hostConfig).toEqual({
      CapDrop: ['ALL'],
      CapAdd: ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'SETGID', 'SETUID'],
      SecurityOpt: ['no-new-privileges:true'],
      Init: true,
      Ulimits: [
        { Name: 'nofile', Soft: ENV_LOCKDOWN.nofile, Hard: ENV_LOCKDOWN.nofile },
        { Name: 'core', Soft: 0, Hard: 0 },
      ],
      Memory: 128 * MB,
      MemorySwap: 128 * MB,
      NanoCpus: 500_000_000,
      PidsLimit: 64,
      ReadonlyRootfs: false,
      // said even for runc: an engine whose default runtime is another does not apply it
      Runtime: 'runc',
    });
    expect(user).toBeUndefined();
    // what a shell needs and nothing of Docker's own defaults that it does not
    for (const c of ['NET_RAW', 'MKNOD', 'AUDIT_WRITE', 'SETFCAP', 'SETPCAP', 'NET_BIND_SERVICE', 'SYS_CHROOT']) expect(hostConfig.CapAdd).not.toContain(c);
  });

  it('a bundle asks by name: more capabilities (any spelling, once each), a read-only root with a sized /tmp, a user', () => {
    const security = EnvSecuritySchema.parse({
      capabilities: ['net_raw', 'CAP_SYS_PTRACE', 'NET_RAW', 'CHOWN'],
      root: 'read-only',
      tmp_mb: 32,
      user: '1000:1000',
    });
    const { hostConfig, user } = dockerLockdown({ resources, security });
    expect(hostConfig.CapAdd).toEqual([...DEFAULT_CAPABILITIES, 'NET_RAW', 'SYS_PTRACE'].sort());
    expect(hostConfig).toMatchObject({ ReadonlyRootfs: true, Tmpfs: { '/tmp': 'rw,nosuid,nodev,mode=1777,size=32m' } });
    expect(user).toBe('1000:1000');
    expect(dockerLockdown({ resources, security: EnvSecuritySchema.parse({ root: 'read-only' }) }).hostConfig.Tmpfs).toEqual({
      '/tmp': `rw,nosuid,nodev,mode=1777,size=${ENV_LOCKDOWN.readOnlyTmpMb}m`,
    });
    expect(granted({ resources, security })).toMatchObject({ added: ['NET_RAW', 'SYS_PTRACE'], root: 'read-only', tmp_mb: 32, user: '1000:1000' });
  });

  it('never grants a capability that reaches the host, and says why; unknown names and users are refused', () => {
    for (const c of REFUSED_CAPABILITIES) {
      const r = EnvSecuritySchema.safeParse({ capabilities: [c] });
      expect(r.success, c).toBe(false);
      expect(JSON.stringify(r.error?.issues), c).toContain('never granted');
    }
    expect(EnvSecuritySchema.safeParse({ capabilities: ['cap_sys_admin'] }).success).toBe(false);
    expect(JSON.stringify(EnvSecuritySchema.safeParse({ capabilities: ['FLY'] }).error?.issues)).toContain('expected a Linux capability name');
    for (const u of ['root; rm -rf /', '', 'a:b:c', 'User']) expect(EnvSecuritySchema.safeParse({ user: u }).success, u).toBe(false);
    for (const u of ['agent', '1000', '1000:1000', 'agent:staff', '_apt']) expect(EnvSecuritySchema.safeParse({ user: u }).success, u).toBe(true);
    expect(EnvSecuritySchema.safeParse({ privileged: true }).success).toBe(false);
  });

  it('under gVisor: the runtime named, the pids limit scaled to leave the env its own', () => {
    const { hostConfig } = dockerLockdown({ resources, runtime: 'runsc' });
    expect(hostConfig.Runtime).toBe('runsc');
    expect(hostConfig.PidsLimit).toBe(ENV_LOCKDOWN.runscPidsBase + ENV_LOCKDOWN.runscPidsPerProcess * 64);
    expect(enginePidsLimit(64, 'runc')).toBe(64);
    expect(enginePidsLimit(64, undefined)).toBe(64);
    expect(granted({ resources, runtime: 'runsc' })).toMatchObject({ runtime: 'runsc', pids: 64 });
  });
});

describe('the swarm backend', () => {
  const input: LockdownInput = { resources, security: EnvSecuritySchema.parse({ capabilities: ['NET_RAW'], root: 'read-only', user: 'agent' }) };

  it('the same defaults as a service spec: CAP_ names, init, ulimits, read-only root with a tmpfs mount, the user, the limits', () => {
    const s = swarmLockdown(input, { apiVersion: '1.44', defaultRuntime: 'runc' });
    expect(s.containerSpec).toEqual({
      CapabilityDrop: ['ALL'],
      CapabilityAdd: ['CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FOWNER', 'CAP_FSETID', 'CAP_KILL', 'CAP_NET_RAW', 'CAP_SETGID', 'CAP_SETUID'],
      Init: true,
      Ulimits: [
        { Name: 'nofile', Soft: ENV_LOCKDOWN.nofile, Hard: ENV_LOCKDOWN.nofile },
        { Name: 'core', Soft: 0, Hard: 0 },
      ],
      ReadOnly: true,
      Mounts: [{ Type: 'tmpfs', Source: '', Target: '/tmp', TmpfsOptions: { SizeBytes: ENV_LOCKDOWN.readOnlyTmpMb * MB, Mode: 0o1777 } }],
      User: 'agent',
      Privileges: { NoNewPrivileges: true },
    });
    expect(s.limits).toEqual({ MemoryBytes: 128 * MB, NanoCPUs: 500_000_000, Pids: 64 });
    expect(s.not_enforced).toEqual([]);
    expect(granted(input, s.not_enforced).no_new_privileges).toBe(true);
  });

  it('an engine older than API 1.44 cannot take no-new-privileges for a service: not sent (it would be ignored), said instead', () => {
    const s = swarmLockdown(input, { apiVersion: '1.41', defaultRuntime: 'runc' });
    expect(s.containerSpec.Privileges).toBeUndefined();
    expect(s.not_enforced).toEqual([expect.stringContaining('no-new-privileges: swarm services take it from engine API 1.44')]);
    expect(granted(input, s.not_enforced).no_new_privileges).toBe(false);
    expect(swarmLockdown(input, { apiVersion: '2.0', defaultRuntime: 'runc' }).not_enforced).toEqual([]);
  });

  it("gVisor cannot be chosen per service: the nodes' default runtime runs it (pids scaled), else said, not silently dropped", () => {
    const s = swarmLockdown({ ...input, runtime: 'runsc' }, { apiVersion: '1.45', defaultRuntime: 'runc' });
    expect(s.not_enforced).toEqual([expect.stringContaining('runtime runsc: a swarm service cannot choose its runtime')]);
    expect(s).toMatchObject({ runtime: 'runc', limits: { Pids: 64 } });
    // a manager whose default-runtime is runsc runs every task under it, asked or not
    for (const runtime of ['runsc', undefined] as const) {
      const g = swarmLockdown({ ...input, runtime }, { apiVersion: '1.45', defaultRuntime: 'runsc' });
      expect(g).toMatchObject({ runtime: 'runsc', not_enforced: [], limits: { Pids: enginePidsLimit(64, 'runsc') } });
    }
  });

  it('granted names the storage bound (null: none)', () => {
    expect(granted({ resources }).storage_mb).toBeNull();
    expect(granted({ resources: { ...resources, storageMb: 64 } }).storage_mb).toBe(64);
    expect(granted({ resources }).max_files).toBeNull();
    expect(granted({ resources: { ...resources, maxFiles: 5000 } }).max_files).toBe(5000);
  });

  it("the bounds of an env's writable layer: its bundle's, else the server's defaults (named as such), none where a default is off", () => {
    const both = { storageMb: 2048, maxFiles: 100_000 };
    expect(withLayerDefaults(resources, both)).toEqual({ ...resources, storageMb: 2048, maxFiles: 100_000, defaulted: ['storageMb', 'maxFiles'] });
    expect(withLayerDefaults({ ...resources, storageMb: 64, maxFiles: 10 }, both)).toEqual({ ...resources, storageMb: 64, maxFiles: 10 });
    expect(withLayerDefaults({ ...resources, storageMb: 64 }, both)).toEqual({ ...resources, storageMb: 64, maxFiles: 100_000, defaulted: ['maxFiles'] });
    expect(withLayerDefaults(resources, { storageMb: null, maxFiles: null })).toEqual(resources);
  });

  it("a sandbox grants an env its bundle's bounds, else its own defaults (ENV_LAYER_DEFAULTS unless told)", async () => {
    const spec = echoSpec('i', { resources });
    const byDefault = new DockerSandbox({ instance: 'layer-a', bundleName: 'b' });
    expect(await byDefault.lockdown.granted(spec)).toMatchObject({ storage_mb: ENV_LAYER_DEFAULTS.storageMb, max_files: ENV_LAYER_DEFAULTS.maxFiles });
    const told = new DockerSandbox({ instance: 'layer-b', bundleName: 'b', layerDefaults: { storageMb: 512, maxFiles: null } });
    expect(await told.lockdown.granted(spec)).toMatchObject({ storage_mb: 512, max_files: null });
    expect(await told.lockdown.granted(echoSpec('i', { resources: { ...resources, storageMb: 32, maxFiles: 7 } }))).toMatchObject({
      storage_mb: 32,
      max_files: 7,
    });
  });
});
