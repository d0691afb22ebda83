/**
 * The env lock-down as the server deploys it (test/security/lockdown.docker.test.ts proves each
 * setting on raw containers): episodes of the fixture bundle on real Docker, their env containers
 * inspected and probed from inside.
 *
 * - by default: every env is locked down (the Docker backend's container is what dockerLockdown
 *   says: capabilities, no-new-privileges, docker-init, ulimits, limits, runc named), the env
 *   still plays, and /bundle says what it was granted;
 * - a bundle env's asks by name (a capability, a read-only root, a user) are what it runs with;
 * - a shell-style container (Debian) does what a shell toolset needs, locked down: users, su,
 *   chown, tar keeping owners, signals, no raw sockets;
 * - the storage bound: an env that writes until stopped ends its episode with storage_exceeded;
 * - gVisor: --runtime runsc (and an env's own `security.runtime`) runs the env contract under it:
 *   deploy, tool calls, the end and its reward, the tool timeout and the memory limit.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Dockerode from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENV_LAYER_DEFAULTS, ENV_LOCKDOWN } from '../../src/defaults.js';
import { dockerLockdown } from '../../src/sandbox/engine/hardening.js';
import { DEFAULT_CAPABILITIES, enginePidsLimit } from '../../src/sandbox/lockdown.js';
import { LABELS } from '../../src/sandbox/sandbox.js';
import { http as call } from '../routes/http.js';
import { describeDocker, IN_CI, labelledResources, waitFor } from '../support/docker.js';
import { FIXTURE_BUNDLE, INSTANCE_LABEL, startServer as startAppServer, suiteServer, type TestServer } from '../support/docker-server.js';

const docker = new Dockerode();
const dirs: string[] = [];
/** every server this file starts: none may leave anything labelled with its instance */
const instances: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  for (const i of instances) expect(labelledResources(`${INSTANCE_LABEL}=${i}`), i).toEqual({ containers: [], networks: [] });
  expect(labelledResources('io.openenv.security-served-test').containers).toEqual([]);
});

async function startServer(...args: Parameters<typeof startAppServer>): Promise<TestServer> {
  const s = await startAppServer(...args);
  instances.push(s.instance);
  return s;
}

/** Linux capability numbers, for reading CapEff */
const CAP_BITS: Record<string, number> = { CHOWN: 0, DAC_OVERRIDE: 1, FOWNER: 3, FSETID: 4, KILL: 5, SETGID: 6, SETUID: 7, NET_RAW: 13 };
const mask = (caps: readonly string[]) => caps.reduce((m, c) => m | (1n << BigInt(CAP_BITS[c]!)), 0n);

/** a copy of the fixture bundle whose echo env is changed by `edit` */
function variant(edit: (echo: Record<string, any>) => void): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'openenv-lockdown-'));
  dirs.push(dir);
  cpSync(FIXTURE_BUNDLE, dir, { recursive: true });
  const file = path.join(dir, 'bundle.json');
  const manifest = JSON.parse(readFileSync(file, 'utf8'));
  edit(manifest.envs.echo);
  writeFileSync(file, JSON.stringify(manifest, null, 2));
  return dir;
}

/** the env container of an episode */
async function containerOf(episodeId: string): Promise<Dockerode.ContainerInspectInfo> {
  const [c] = await docker.listContainers({ all: true, filters: { label: [`${LABELS.episode}=${episodeId}`] } });
  if (!c) throw new Error(`no container of episode ${episodeId}`);
  return docker.getContainer(c.Id).inspect();
}

/** runs `cmd` in the container, as its user; its stdout (stderr with `both`) */
async function exec(containerId: string, cmd: string[], both = false): Promise<string> {
  const x = await docker.getContainer(containerId).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
  const stream = await x.start({});
  const chunks: Buffer[] = [];
  await new Promise<void>((resolve, reject) => {
    stream.on('data', (d: Buffer) => chunks.push(d));
    stream.on('end', () => resolve());
    stream.on('error', reject);
  });
  const buf = Buffer.concat(chunks);
  let out = '';
  for (let i = 0; i + 8 <= buf.length;) {
    const len = buf.readUInt32BE(i + 4);
    if (buf[i] === 1 || both) out += buf.subarray(i + 8, i + 8 + len).toString('utf8');
    i += 8 + len;
  }
  return out;
}

/** what the env's process sees of itself: capabilities, no-new-privileges, PID 1, its user, its open-file limit, its kernel */
const SELF_PROBE = [
  'node',
  '-e',
  `const fs = require('fs'), os = require('os');
const s = Object.fromEntries(fs.readFileSync('/proc/self/status', 'utf8').split('\\n').filter((l) => l.includes(':\\t')).map((l) => l.split(':\\t')));
let nofile = null; try { nofile = fs.readFileSync('/proc/self/limits', 'utf8').split('\\n').find((l) => l.startsWith('Max open files')).split(/\\s+/).slice(3, 5); } catch {}
let rootWritable = true; try { fs.writeFileSync('/probe-root', 'x'); fs.unlinkSync('/probe-root'); } catch { rootWritable = false; }
console.log(JSON.stringify({ eff: s.CapEff?.trim(), bnd: s.CapBnd?.trim(), nnp: s.NoNewPrivs?.trim() ?? null, pid1: fs.readFileSync('/proc/1/cmdline', 'utf8').split('\\0')[0],
  uid: process.getuid(), gid: process.getgid(), nofile, release: os.release(), rootWritable }));`,
];

async function probe(containerId: string): Promise<any> {
  const out = await exec(containerId, SELF_PROBE, true);
  try {
    return JSON.parse(out.trim().split('\n').pop()!);
  } catch {
    throw new Error(`the probe in the env's container printed no JSON: ${out.slice(0, 2000)}`);
  }
}

async function runscRegistered(): Promise<boolean> {
  const info = (await docker.info()) as { Runtimes?: Record<string, unknown> };
  return Boolean(info.Runtimes?.runsc);
}

/** plays the fixture's echo task on `s`: reset, an echo call, finish_now; the episode id and its end */
async function play(s: TestServer, inspect?: (id: string) => Promise<void>): Promise<{ id: string; end: any }> {
  const started = await call(s.url, 'POST', '/episodes', { task_id: 'fx-echo-0' });
  expect(started.status, JSON.stringify(started.body)).toBe(201);
  const id = started.body.episode_id as string;
  const echo = await call(s.url, 'POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'echo', arguments: { text: 'locked' } });
  expect(echo.body.observation.result.structured_content).toEqual({ text: 'locked' });
  await inspect?.(id);
  const end = await call(s.url, 'POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'finish_now', arguments: { score: 0.75 } });
  expect(end.body).toMatchObject({ done: true, reward: 0.75 });
  return { id, end: end.body };
}

describeDocker('envs locked down as the server deploys them', () => {
  describe('by default', () => {
    const s = suiteServer({ maxConcurrentEnvs: 2 });

    it('the env container is what dockerLockdown says, the env sees exactly that from inside, and it plays', async () => {
      await play(s, async (id) => {
        const c = await containerOf(id);
        const want = dockerLockdown({ resources: { memoryMb: 128, cpus: 0.5, pids: 64 } }).hostConfig;
        for (const k of [
          'CapDrop',
          'CapAdd',
          'SecurityOpt',
          'Init',
          'Ulimits',
          'Memory',
          'MemorySwap',
          'NanoCpus',
          'PidsLimit',
          'ReadonlyRootfs',
          'Runtime',
        ] as const)
          expect(c.HostConfig[k as keyof typeof c.HostConfig], k).toEqual(want[k]);
        expect(c.Config.User).toBe('');
        const p = await probe(c.Id);
        expect(BigInt(`0x${p.eff}`)).toBe(mask(DEFAULT_CAPABILITIES));
        expect(BigInt(`0x${p.bnd}`)).toBe(mask(DEFAULT_CAPABILITIES));
        expect(p).toMatchObject({ nnp: '1', uid: 0, nofile: [String(ENV_LOCKDOWN.nofile), String(ENV_LOCKDOWN.nofile)], rootWritable: true });
        expect(p.pid1).toMatch(/docker-init/);
      });
    });

    it('/bundle says what each env was granted', async () => {
      const b = await call(s.url, 'GET', '/bundle');
      expect(b.body.settings.runtime).toBe('runc');
      expect(b.body.envs.echo).toEqual({
        capabilities: [...DEFAULT_CAPABILITIES].sort(),
        added: [],
        no_new_privileges: true,
        init: true,
        root: 'writable',
        tmp_mb: null,
        user: null,
        runtime: 'runc',
        memory_mb: 128,
        cpus: 0.5,
        pids: 64,
        nofile: ENV_LOCKDOWN.nofile,
        // the fixture's env sets no bound of its writable layer: a default server's
        storage_mb: ENV_LAYER_DEFAULTS.storageMb,
        max_files: ENV_LAYER_DEFAULTS.maxFiles,
        not_enforced: [],
      });
    });
  });

  describe("a bundle env's asks by name: a capability, a read-only root, a user", () => {
    let s: TestServer;
    beforeAll(async () => {
      const bundle = variant((echo) => {
        echo.security = { capabilities: ['cap_net_raw'], root: 'read-only', tmp_mb: 16, user: '1000:1000' };
      });
      s = await startServer({ maxConcurrentEnvs: 2 }, bundle);
    });
    afterAll(() => s?.stop());

    it('the env runs with them and still plays', async () => {
      await play(s, async (id) => {
        const c = await containerOf(id);
        expect(c.HostConfig).toMatchObject({ ReadonlyRootfs: true, Tmpfs: { '/tmp': 'rw,nosuid,nodev,mode=1777,size=16m' } });
        expect(c.Config.User).toBe('1000:1000');
        const p = await probe(c.Id);
        expect(p).toMatchObject({ uid: 1000, gid: 1000, rootWritable: false });
        // a non-root process keeps no effective capability; the bounding set is the default set plus the one asked for
        expect(BigInt(`0x${p.bnd}`)).toBe(mask([...DEFAULT_CAPABILITIES, 'NET_RAW']));
        expect(await exec(c.Id, ['node', '-e', "require('fs').writeFileSync('/tmp/x', 'y'); console.log('tmp ok')"])).toContain('tmp ok');
      });
      expect((await call(s.url, 'GET', '/bundle')).body.envs.echo).toMatchObject({
        added: ['NET_RAW'],
        root: 'read-only',
        tmp_mb: 16,
        user: '1000:1000',
      });
    });
  });

  it('a shell-style container (Debian) does what a shell toolset needs, locked down', async () => {
    const script = `set -e
useradd -m agent
echo hello > /root/f && chown agent:agent /root/f && chmod 640 /root/f
su agent -c 'echo "as $(id -un)" > /home/agent/mine && cat /home/agent/mine'
setpriv --reuid=agent --regid=agent --clear-groups id -u
mkdir -p /work/src && echo x > /work/src/a && chown agent /work/src/a
tar -C /work -cpf /tmp/src.tar src && mkdir /tmp/out && tar -C /tmp/out -xpf /tmp/src.tar && stat -c '%U' /tmp/out/src/a
setpriv --reuid=agent --regid=agent --clear-groups sleep 30 & pid=$!; sleep 0.3; kill $pid && echo killed; wait $pid || true
ls / > /dev/null && echo ls ok
tr '\\0' ' ' < /proc/1/cmdline; echo
grep CapEff /proc/self/status
echo done`;
    const name = `openenv-security-shell-${Date.now().toString(36)}`;
    const c = await docker.createContainer({
      name,
      Image: 'openenv-local/debian:bookworm',
      Cmd: ['bash', '-c', script],
      Labels: { 'io.openenv.security-served-test': name },
      HostConfig: { ...dockerLockdown({ resources: { memoryMb: 256, cpus: 1, pids: 128 } }).hostConfig, NetworkMode: 'none' },
    });
    try {
      await c.start();
      const { StatusCode } = (await c.wait()) as { StatusCode: number };
      const raw = (await c.logs({ stdout: true, stderr: true })) as Buffer;
      let out = '';
      for (let i = 0; i + 8 <= raw.length;) {
        const len = raw.readUInt32BE(i + 4);
        out += raw.subarray(i + 8, i + 8 + len).toString('utf8');
        i += 8 + len;
      }
      expect(StatusCode, out).toBe(0);
      expect(out).toContain('as agent');
      expect(out).toMatch(/^1000$/m);
      expect(out).toMatch(/^agent$/m);
      expect(out).toContain('ls ok');
      expect(out).toMatch(/^killed$/m);
      expect(out).toMatch(/docker-init/);
      expect(BigInt(`0x${/CapEff:\s*([0-9a-f]+)/.exec(out)![1]}`)).toBe(mask(DEFAULT_CAPABILITIES));
      expect(out).toContain('done');
    } finally {
      await c.remove({ force: true });
    }
  }, 60_000);

  describe('the storage bound: an env that writes until stopped', () => {
    let s: TestServer;
    beforeAll(async () => {
      const bundle = variant((echo) => {
        echo.resources.storage_mb = 32;
        echo.environment = { ECHO_FILL_DISK: '/fill' };
      });
      s = await startServer({ maxConcurrentEnvs: 2, toolTimeout: 60 }, bundle);
    });
    afterAll(() => s?.stop());

    it('ends its episode with storage_exceeded, its own reason, and is removed', async () => {
      // an env's grant is in /bundle once its image is ready (the images build after the server is up)
      await waitFor(async () => (await call(s.url, 'GET', '/bundle')).body.envs.echo !== undefined, 120_000, "the env's grant in /bundle");
      expect((await call(s.url, 'GET', '/bundle')).body.envs.echo).toMatchObject({ storage_mb: 32, not_enforced: [] });
      const t0 = Date.now();
      const started = await call(s.url, 'POST', '/episodes', { task_id: 'fx-echo-0' });
      expect(started.status, JSON.stringify(started.body)).toBe(201);
      const id = started.body.episode_id as string;
      // the env writes from its reset on; a long call is cut short when the sandbox stops it
      const r = await call(s.url, 'POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'sleep', arguments: { seconds: 40 } });
      const stoppedS = (Date.now() - t0) / 1000;
      expect(r.body).toMatchObject({
        done: true,
        observation: { end_reason: 'env_failed', failure: { reason: 'storage_exceeded', phase: 'tool', retryable: false } },
      });
      const message = r.body.observation.failure.message as string;
      const wrote = Number(/wrote (\d+) MB/.exec(message)?.[1]);
      expect(wrote).toBeGreaterThan(32);
      console.log(`[storage] an env writing without end (storage_mb 32) was stopped after ${stoppedS.toFixed(1)} s, at ${wrote} MB: ${message}`);
      expect(s.logs()).toContain('storage_mb');
      // nothing of it stays on the engine once the episode is gone
      await call(s.url, 'DELETE', `/episodes/${id}`);
      const left = await docker.listContainers({ all: true, filters: { label: [`${LABELS.episode}=${id}`] } });
      for (let i = 0; i < 50 && left.length > 0; i++) {
        await new Promise((res) => setTimeout(res, 200));
        left.splice(0, left.length, ...(await docker.listContainers({ all: true, filters: { label: [`${LABELS.episode}=${id}`] } })));
      }
      expect(left).toEqual([]);
    }, 120_000);
  });

  describe('gVisor: --runtime runsc', () => {
    let runsc = false;
    let s: TestServer | null = null;
    beforeAll(async () => {
      runsc = await runscRegistered();
      if (!runsc) {
        if (IN_CI) throw new Error('CI is set but the engine has no runsc runtime: .ci/run registers it with deploy/register-runsc.sh');
        console.warn('\n!!! skipping the gVisor checks: no runsc runtime (sudo bash deploy/register-runsc.sh) !!!\n');
        return;
      }
      s = await startServer({ maxConcurrentEnvs: 2, runtime: 'runsc', toolTimeout: 3 });
    }, 120_000);
    afterAll(() => s?.stop());

    it('the env contract under gVisor: deploy, tool calls, the end and its reward; its kernel; the lock-down; /bundle says runsc', async (ctx) => {
      if (!s) return ctx.skip();
      await play(s, async (id) => {
        const c = await containerOf(id);
        expect(c.HostConfig).toMatchObject({ Runtime: 'runsc', PidsLimit: enginePidsLimit(64, 'runsc'), CapDrop: ['ALL'], Init: true });
        const p = await probe(c.Id);
        expect(p.release).toBe('4.4.0');
        expect(BigInt(`0x${p.eff}`)).toBe(mask(DEFAULT_CAPABILITIES));
        // gVisor's /proc shows no NoNewPrivs line: the setting is the engine's (proven with prctl in lockdown.docker.test.ts)
        expect(c.HostConfig.SecurityOpt).toEqual(['no-new-privileges:true']);
      });
      expect((await call(s.url, 'GET', '/bundle')).body.envs.echo).toMatchObject({ runtime: 'runsc', pids: 64 });
    }, 120_000);

    it('limits under gVisor: a tool past --tool-timeout is tool_timeout; an env past its memory is killed at it (137)', async (ctx) => {
      if (!s) return ctx.skip();
      const started = await call(s.url, 'POST', '/episodes', { task_id: 'fx-echo-0' });
      const id = started.body.episode_id as string;
      const slow = await call(s.url, 'POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'sleep', arguments: { seconds: 30 } });
      expect(slow.body).toMatchObject({ done: true, observation: { failure: { reason: 'tool_timeout' } } });

      const bundle = variant((echo) => {
        echo.resources.memory_mb = 64;
        echo.environment = { ECHO_ALLOCATE_MB: '256' };
      });
      const big = await startServer({ maxConcurrentEnvs: 1, runtime: 'runsc' }, bundle);
      try {
        const r = await call(big.url, 'POST', '/episodes', { task_id: 'fx-echo-0' });
        expect(r.status).toBe(502);
        // killed at its limit (137); under gVisor the engine does not always see the kill as an OOM (docs/security.md)
        expect(r.body.failure).toMatchObject({ phase: 'deploy', exit_code: 137, reason: expect.stringMatching(/^(env_oom|env_crashed)$/) });
      } finally {
        await big.stop();
      }
    }, 180_000);

    it("an env's own ask for runsc runs it under gVisor on a runc server", async (ctx) => {
      if (!s) return ctx.skip();
      const bundle = variant((echo) => {
        echo.security = { runtime: 'runsc' };
      });
      const one = await startServer({ maxConcurrentEnvs: 1 }, bundle);
      try {
        await play(one, async (id) => {
          expect((await containerOf(id)).HostConfig.Runtime).toBe('runsc');
        });
      } finally {
        await one.stop();
      }
    }, 120_000);
  });
});
