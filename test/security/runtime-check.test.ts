/**
 * The runtime start check (docs/security.md, gVisor): the server asks the engine for every runtime
 * it is to run envs under before it serves, and refuses clearly when one is missing. Against a
 * fake engine here (the real one has runsc registered: test/security/lockdown-served.docker.test.ts
 * serves under it); and bundle.json's `security` field, validated with clear errors.
 */
import { mkdtempSync, readFileSync, rmSync, cpSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type Dockerode from 'dockerode';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { loadBundle } from '../../src/bundle/index.js';
import { DockerSandbox } from '../../src/sandbox/docker/index.js';
import { SwarmSandbox } from '../../src/sandbox/swarm/swarm-sandbox.js';
import { DelegatingSandbox } from '../support/delegating-sandbox.js';
import { FIXTURE_BUNDLE } from '../support/app.js';
import { ProcessSandbox } from '../support/process-sandbox.js';
import { echoSpec } from '../sandbox/contract.js';

/**
 * an engine answering `info`, `version`, (as the manager of a one-node swarm) `listNodes`, and the
 * no-new-privileges probe's container, whose exit says the engine does not set it (1)
 */
function fakeEngine(info: Record<string, unknown>, apiVersion = '1.41'): Dockerode {
  const swarm = { NodeID: 'manager-node-1', LocalNodeState: 'active', ControlAvailable: true };
  return {
    info: async () => ({ Swarm: swarm, ...info }),
    version: async () => ({ ApiVersion: apiVersion }),
    listNodes: async () => [{ ID: swarm.NodeID, Status: { State: 'ready', Addr: '10.0.0.1' }, Spec: { Role: 'manager', Availability: 'active' } }],
    getImage: () => ({ inspect: async () => ({}) }),
    createContainer: async () => ({ wait: async () => ({ StatusCode: 1 }), start: async () => undefined }),
  } as unknown as Dockerode;
}

const RUNC_ONLY = { Runtimes: { runc: { path: 'runc' } }, DefaultRuntime: 'runc' };
const WITH_RUNSC = { Runtimes: { runc: { path: 'runc' }, runsc: { path: '/usr/bin/runsc' } }, DefaultRuntime: 'runc' };

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('the runtime start check', () => {
  it('Docker: runc always passes; runsc passes when registered, else names what to do', async () => {
    const without = new DockerSandbox({ instance: 'rt-check-a', bundleName: 'b', docker: fakeEngine(RUNC_ONLY) });
    await expect(without.lockdown.checkRuntime('runc')).resolves.toBeUndefined();
    const err = await without.lockdown.checkRuntime('runsc').catch((e: Error) => e);
    expect(err).toMatchObject({ name: 'SandboxError', reason: 'engine_error' });
    expect((err as Error).message).toMatch(/has no runtime "runsc" \(it has runc\).*deploy\/register-runsc\.sh.*without --runtime runsc/);
    const withIt = new DockerSandbox({ instance: 'rt-check-b', bundleName: 'b', docker: fakeEngine(WITH_RUNSC), runtime: 'runsc' });
    await expect(withIt.lockdown.checkRuntime('runsc')).resolves.toBeUndefined();
    expect(withIt.lockdown.runtime).toBe('runsc');
  });

  it('warns once per check when runsc is registered without --file-access=shared (files written from outside stay unseen in gVisor)', async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) });
    const cached = new DockerSandbox({ instance: 'rt-check-w', bundleName: 'b', docker: fakeEngine(WITH_RUNSC), runtime: 'runsc', logger });
    await expect(cached.lockdown.checkRuntime('runsc')).resolves.toBeUndefined();
    const warned = lines.filter((l) => /without --file-access=shared/.test(String(l.msg)));
    expect(warned).toHaveLength(1);
    expect(warned[0]!.msg).toMatch(/deploy\/register-runsc\.sh/);
    lines.length = 0;
    const shared = {
      Runtimes: { runc: { path: 'runc' }, runsc: { path: '/usr/bin/runsc', runtimeArgs: ['--platform=ptrace', '--network=host', '--file-access=shared'] } },
    };
    const fine = new DockerSandbox({ instance: 'rt-check-x', bundleName: 'b', docker: fakeEngine(shared), runtime: 'runsc', logger });
    await expect(fine.lockdown.checkRuntime('runsc')).resolves.toBeUndefined();
    await expect(fine.lockdown.checkRuntime('runc')).resolves.toBeUndefined();
    expect(lines.filter((l) => /file-access/.test(String(l.msg)))).toEqual([]);
  });

  it("swarm: a service cannot choose its runtime, so runsc needs the manager's default-runtime", async () => {
    const registered = new SwarmSandbox({ instance: 'rt-check-c', bundleName: 'b', docker: fakeEngine(WITH_RUNSC), attachContainer: 'x' });
    const err = await registered.lockdown.checkRuntime('runsc').catch((e: Error) => e);
    expect((err as Error).message).toMatch(/cannot choose a service's runtime, and the manager's default-runtime is runc, not runsc/);
    const byDefault = new SwarmSandbox({
      instance: 'rt-check-d',
      bundleName: 'b',
      docker: fakeEngine({ ...WITH_RUNSC, DefaultRuntime: 'runsc' }),
      attachContainer: 'x',
    });
    await expect(byDefault.lockdown.checkRuntime('runsc')).resolves.toBeUndefined();
    // what the env is then granted: runsc, and the lock-down this engine's API cannot take said; the
    // storage bound is kept (the one node is the manager, whose engine the server asks)
    const g = await byDefault.lockdown.granted(echoSpec('i', { resources: { memoryMb: 64, cpus: 1, pids: 32, storageMb: 10 } }));
    expect(g).toMatchObject({ runtime: 'runsc', no_new_privileges: false, storage_mb: 10 });
    expect(g.not_enforced).toEqual([
      expect.stringMatching(/^no-new-privileges.*the engine of node manager-node \(10.0.0.1\) runs without dockerd --no-new-privileges$/),
    ]);
  });

  it('swarm on an engine older than API 1.44: no-new-privileges is kept when every node engine sets it for all its containers', async () => {
    const nnp = new SwarmSandbox({
      instance: 'rt-check-e',
      bundleName: 'b',
      docker: fakeEngine({ ...RUNC_ONLY, SecurityOptions: ['name=seccomp,profile=default', 'name=no-new-privileges'] }),
      attachContainer: 'x',
    });
    const g = await nnp.lockdown.granted(echoSpec('i', { resources: { memoryMb: 64, cpus: 1, pids: 32 } }));
    expect(g).toMatchObject({ no_new_privileges: true, not_enforced: [] });
  });

  it('the server does not get ready when the engine lacks a runtime it needs: --runtime runsc, or an env asking for it', async () => {
    // a process sandbox with the Docker backend's lock-down part over a fake engine without runsc
    const lockdown = new DockerSandbox({ instance: 'rt-check-e', bundleName: 'b', docker: fakeEngine(RUNC_ONLY) }).lockdown;
    for (const [options, bundle] of [
      [{ runtime: 'runsc' as const }, FIXTURE_BUNDLE],
      [{}, variant({ runtime: 'runsc' })],
    ] as const) {
      const inner = new ProcessSandbox();
      const sandbox = Object.assign(new DelegatingSandbox(inner), { lockdown });
      const app = await buildApp(bundle, { ...options, sandbox, pingInterval: 0, logger: pino({ level: 'silent' }), instance: 'rt-check' });
      try {
        await expect(app.openenv.ready).rejects.toThrow(/has no runtime "runsc"/);
        const health = await app.inject({ method: 'GET', url: '/health' });
        expect(health.json()).toMatchObject({ status: 'unhealthy', reason: expect.stringContaining('has no runtime "runsc"') });
        // nothing was deployed or built
        expect(inner.spawned).toBe(0);
      } finally {
        await app.close();
        await inner.close();
      }
    }
  });
});

/** a copy of the fixture bundle whose echo env asks for `security` */
function variant(security: unknown): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'openenv-security-field-'));
  dirs.push(dir);
  cpSync(FIXTURE_BUNDLE, dir, { recursive: true });
  const file = path.join(dir, 'bundle.json');
  const manifest = JSON.parse(readFileSync(file, 'utf8'));
  manifest.envs.echo.security = security;
  writeFileSync(file, JSON.stringify(manifest, null, 2));
  return dir;
}

describe("bundle.json's envs.<name>.security", () => {
  const issuesOf = async (security: unknown) =>
    loadBundle(variant(security)).then(
      () => [],
      (e: { issues?: { field: string; message: string }[] }) => (e.issues ?? []).map((i) => `${i.field}: ${i.message}`),
    );

  it('a refused capability is named, with why; unknown names, fields, users and runtimes are refused clearly', async () => {
    expect(await issuesOf({ capabilities: ['NET_RAW', 'sys_admin'] })).toEqual([
      'envs.echo.security.capabilities[1]: SYS_ADMIN is never granted to an env: it lets a container reach the host',
    ]);
    expect((await issuesOf({ capabilities: ['FLY'] }))[0]).toMatch(/^envs\.echo\.security\.capabilities\[0\]: expected a Linux capability name/);
    expect((await issuesOf({ privileged: true }))[0]).toMatch(
      /^envs\.echo\.security\.privileged: unknown field; the fields here are capabilities, root, tmp_mb, user, runtime/,
    );
    expect((await issuesOf({ user: 'root; rm -rf /' }))[0]).toMatch(/^envs\.echo\.security\.user: expected a user id, uid:gid, or a user name/);
    expect((await issuesOf({ runtime: 'runc' }))[0]).toMatch(/^envs\.echo\.security\.runtime: expected "runsc"/);
    expect((await issuesOf({ root: 'tmpfs' }))[0]).toMatch(/^envs\.echo\.security\.root: /);
  });

  it('a valid ask loads, normalised (CAP_ prefix, case), and reaches the env spec', async () => {
    const b = await loadBundle(variant({ capabilities: ['cap_net_raw'], root: 'read-only', user: 'agent', runtime: 'runsc' }));
    expect(b.manifest.envs.echo!.security).toEqual({ capabilities: ['NET_RAW'], root: 'read-only', user: 'agent', runtime: 'runsc' });
  });
});
