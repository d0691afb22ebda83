/**
 * Sidecars (bundle.json's envs.<env>.sidecars) on real Docker. As users run it: the built CLI
 * imports a Harbor task whose compose file puts a key-value store (`db`, built FROM python:3) beside
 * main (test/fixtures/harbor-tasks/compose-sidecar), and `check --json` plays its golden at the max
 * (it stores the greeting in `db`; the verifier reads it back by that name) and the empty solution
 * at the floor. On the sandbox itself: the sidecar is on the episode's network only (main reaches
 * it as `db`; another episode's env does not; the sidecar reaches neither another episode's
 * sidecar nor anything outside), it carries the env's lock-down and the episode's labels, its
 * usage counts in the env's, and teardown leaves no container or network; a sidecar that exits at
 * once fails the deploy naming it, with its log, and leaves nothing.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DockerSandbox } from '../../src/sandbox/docker/index.js';
import { readContainerUsage } from '../../src/sandbox/engine/usage.js';
import { LABELS, SandboxError, type EnvHandle, type EnvSpec, type SidecarSpec } from '../../src/sandbox/sandbox.js';
import { describeDocker, labelledResources, uniqueInstance } from '../support/docker.js';
import { rejection } from '../sandbox/contract.js';
import { BASE_IMAGE_RULE, ensureDebianBase, LOCAL_DEBIAN_IMAGE } from './helpers.js';

const CLI = path.resolve(import.meta.dirname, '../../dist/cli/openenv-bundle.js');
const TASK = path.resolve(import.meta.dirname, '../fixtures/harbor-tasks/compose-sidecar');
const PYTHON_RULE = 'python:3=openenv-local/python:3';

function run(args: string[]) {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 600_000, env: { ...process.env, NO_COLOR: '1' } });
}

function docker(args: string[]): { status: number | null; out: string } {
  const r = spawnSync('docker', args, { encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, out: (r.stdout + r.stderr).trim() };
}

describeDocker('a Harbor task with a sidecar service, imported and checked with the built CLI', () => {
  let tmp: string;
  const nonce = `side${process.pid}${Date.now().toString(36)}`;
  beforeAll(() => {
    ensureDebianBase();
    tmp = mkdtempSync(path.join(tmpdir(), 'harbor-sidecar-'));
  });
  afterAll(() => {
    const ours = docker(['image', 'ls', '--format', '{{.Repository}}:{{.Tag}}', '--filter', `reference=openenv-bundle/${nonce}-*`])
      .out.split('\n')
      .filter(Boolean);
    if (ours.length) docker(['image', 'rm', ...ours]);
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it('imports db as the env sidecar; check plays the golden at the max and the empty solution at the floor', () => {
    const out = path.join(tmp, 'bundle');
    const imp = run(['import', 'harbor', TASK, '--out', out, '--name', nonce, '--base-image', BASE_IMAGE_RULE, '--base-image', PYTHON_RULE, '--json']);
    expect(imp.status, imp.stdout + imp.stderr).toBe(0);
    const manifest = JSON.parse(readFileSync(path.join(out, 'bundle.json'), 'utf8')) as {
      envs: Record<string, { environment: Record<string, string>; sidecars: Record<string, unknown> }>;
    };
    expect(manifest.envs['compose-sidecar']!.sidecars).toEqual({
      db: {
        build: 'sidecars/compose-sidecar/db',
        build_network: 'none',
        environment: { KV_PORT: '7000' },
        healthcheck: { command: ['python3', '/kv.py', 'check'], interval_s: 1, timeout_s: 5, retries: 30 },
      },
    });
    const r = run(['check', out, '--tasks', 'all', '--json']);
    expect(r.status, r.stdout + r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as {
      ok: boolean;
      problems: unknown[];
      played: { golden: { passed: number; played: number; reward: number }; empty: { passed: number; played: number; reward: number } };
    };
    expect(report.problems).toEqual([]);
    expect(report.played.golden).toMatchObject({ passed: 1, played: 1, reward: 1 });
    expect(report.played.empty).toMatchObject({ passed: 1, played: 1, reward: 0 });
  }, 900_000);
});

describeDocker('DockerSandbox: sidecars on the episode network, locked down, torn down with the env', () => {
  const instance = uniqueInstance('sidecar');
  const sandbox = new DockerSandbox({ instance, bundleName: 'sidecars-v1' });
  const kvImage = `openenv-test/sidecar-kv:${instance}`;
  const nothingLeft = () => expect(labelledResources(`${LABELS.instance}=${instance}`)).toEqual({ containers: [], networks: [] });

  const kv = (over: Partial<SidecarSpec> = {}): SidecarSpec => ({
    name: 'db',
    image: kvImage,
    environment: { KV_PORT: '7000' },
    healthcheck: { command: ['python3', '/kv.py', 'check'], intervalS: 0.3, timeoutS: 5, retries: 20, startPeriodS: 0 },
    resources: { memoryMb: 256, cpus: 0.5, pids: 128 },
    ...over,
  });
  const envSpec = (sidecars: SidecarSpec[]): EnvSpec => ({
    name: 'main',
    image: LOCAL_DEBIAN_IMAGE,
    kind: 'shell',
    port: 0,
    readyPath: '/',
    deployTimeoutMs: 30_000,
    resources: { memoryMb: 256, cpus: 0.5, pids: 128 },
    environment: {},
    ...(sidecars.length ? { sidecars } : {}),
  });
  /** a bash line in the env's container: its exit status and output */
  const inEnv = (h: EnvHandle, script: string) => docker(['exec', h.containerId, 'bash', '-c', script]);
  /** a python line in a sidecar (its image has no shell) */
  const inSidecar = (id: string, code: string) => docker(['exec', id, 'python3', '-c', code]);
  const ipOf = (id: string) => docker(['inspect', '--format', '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}', id]).out;

  beforeAll(() => {
    ensureDebianBase();
    // the fixture's Dockerfile, FROM the local python base (as the import's --base-image maps it)
    const dockerfile = readFileSync(path.join(TASK, 'environment/db/Dockerfile'), 'utf8').replace(/^FROM python:3$/m, 'FROM openenv-local/python:3');
    execFileSync('docker', ['build', '--network', 'none', '-q', '-t', kvImage, '-f', '-', path.join(TASK, 'environment/db')], {
      input: dockerfile,
      stdio: 'pipe',
      timeout: 120_000,
    });
  }, 180_000);
  afterAll(async () => {
    await sandbox.sweep();
    await sandbox.close();
    docker(['image', 'rm', kvImage]);
  });

  it('main reaches db by name; another episode does not; the sidecar reaches nothing outside; lock-down, labels, usage; teardown leaves nothing', async () => {
    const a = await sandbox.deploy({ envId: 'ep-a', env: envSpec([kv()]) });
    const b = await sandbox.deploy({ envId: 'ep-b', env: envSpec([kv()]) });
    try {
      expect(a.sidecars).toHaveLength(1);
      // the deploy's time: the sidecars' stage (made, started, healthy) before the env's container was made
      expect(Object.keys(a.stagesMs!)).toEqual(['network', 'sidecars', 'create', 'start', 'ready']);
      console.log(`[measure] deploy stages of an env with one healthchecked sidecar (ms): ${JSON.stringify(a.stagesMs)}`);
      const [dbA] = a.sidecars!;
      const [dbB] = b.sidecars!;
      // main reaches its own db by name, and it answers
      const set = inEnv(
        a,
        'exec 3<>/dev/tcp/db/7000 && echo "SET k from-a" >&3 && read -r -t 5 r <&3 && echo "$r" && echo "GET k" >&3 && read -r -t 5 v <&3 && echo "$v"',
      );
      expect(set).toEqual({ status: 0, out: 'OK\nfrom-a' });
      // episode b's db is another store: it never saw a's key
      expect(inEnv(b, 'exec 3<>/dev/tcp/db/7000 && echo "GET k" >&3 && read -r -t 5 v <&3 && echo "$v"')).toEqual({ status: 0, out: 'NONE' });
      // a's db, by its address, is out of b's reach (another network), and so is b's db from a's sidecar
      const ipA = ipOf(dbA!);
      const ipB = ipOf(dbB!);
      expect(ipA).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
      expect(inEnv(b, `timeout 4 bash -c 'exec 3<>/dev/tcp/${ipA}/7000' && echo reached`).out).not.toContain('reached');
      const reach = (ip: string, port: number) =>
        `import socket\ntry:\n  socket.create_connection(('${ip}', ${port}), 3); print('reached')\nexcept OSError as e: print('no', e)`;
      expect(inSidecar(dbA!, reach(ipB, 7000)).out).toMatch(/^no /);
      // nothing outside the episode network: a public address, and the name of one
      expect(inSidecar(dbA!, reach('1.1.1.1', 53)).out).toMatch(/^no /);
      expect(inSidecar(dbA!, reach('example.com', 80)).out).toMatch(/^no /);
      // the sidecar itself reaches its env's network name space: a positive control of the probe
      expect(inSidecar(dbA!, reach('127.0.0.1', 7000)).out).toBe('reached');

      // the env's lock-down, under the episode's labels
      const inspect = (id: string) =>
        JSON.parse(docker(['inspect', id]).out)[0] as {
          HostConfig: {
            CapDrop: string[];
            CapAdd: string[];
            SecurityOpt: string[];
            Init: boolean;
            Memory: number;
            NanoCpus: number;
            PidsLimit: number;
            PortBindings: unknown;
          };
          Config: { Labels: Record<string, string> };
          NetworkSettings: { Networks: Record<string, { Aliases: string[] | null; NetworkID: string }> };
        };
      const side = inspect(dbA!);
      const main = inspect(a.containerId);
      expect(side.HostConfig.CapDrop).toEqual(['ALL']);
      expect(side.HostConfig.CapAdd).toEqual(main.HostConfig.CapAdd);
      expect(side.HostConfig.SecurityOpt).toEqual(main.HostConfig.SecurityOpt);
      expect(side.HostConfig.SecurityOpt).toContain('no-new-privileges:true');
      expect(side.HostConfig.Init).toBe(true);
      expect(side.HostConfig.Memory).toBe(256 * 1024 * 1024);
      expect(side.HostConfig.NanoCpus).toBe(0.5e9);
      expect(side.HostConfig.PidsLimit).toBeGreaterThan(0);
      expect(side.Config.Labels).toMatchObject({ [LABELS.instance]: instance, [LABELS.episode]: 'ep-a', [LABELS.env]: 'main.sidecars.db' });
      const nets = Object.values(side.NetworkSettings.Networks);
      expect(nets).toHaveLength(1);
      expect(nets[0]!.NetworkID).toBe(a.networkId);
      expect(nets[0]!.Aliases).toContain('db');

      // the env's usage counts its sidecar's: more memory than its own container held
      const ac = new AbortController();
      const own = await readContainerUsage(new (await import('dockerode')).default(), a.containerId, ac.signal);
      const all = await sandbox.usage.read(a, ac.signal);
      expect(own.peakMemoryBytes).not.toBeNull();
      expect(all.peakMemoryBytes!).toBeGreaterThan(own.peakMemoryBytes!);
      expect(all.cpuS!).toBeGreaterThanOrEqual(own.cpuS!);
    } finally {
      await sandbox.teardown('ep-a');
      await sandbox.teardown('ep-b');
    }
    nothingLeft();
  }, 180_000);

  it('a sidecar that exits at once fails the deploy naming it, with its log; nothing is left', async () => {
    // no healthcheck: seen exited once the env is up; with one: seen while waiting for it
    for (const sc of [kv({ environment: { KV_PORT: 'not-a-port' }, healthcheck: undefined }), kv({ environment: { KV_PORT: 'not-a-port' } })]) {
      const { healthcheck: _unused, ...noCheck } = sc;
      const err = await rejection(sandbox.deploy({ envId: 'ep-fail', env: envSpec([sc.healthcheck ? sc : noCheck]) }));
      expect(err).toBeInstanceOf(SandboxError);
      expect((err as SandboxError).reason, err.message).toBe('env_crashed');
      expect(err.message).toMatch(
        /^sidecar `db` of env `main` exited with code 1 before the env was deployed; its log ends:\n[\s\S]*ValueError: invalid literal for int\(\)/,
      );
      nothingLeft();
    }
  }, 120_000);
});
