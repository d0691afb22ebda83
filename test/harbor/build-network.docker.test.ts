/**
 * An imported task's image builds without network (docs/security.md, "Image builds and the
 * network"), as a user runs it: the built `import harbor` then `check`, child processes, on real
 * Docker, with a service listening on the engine's bridge gateway (what a build's RUN reaches on
 * the engine's default network: the host's own services). A RUN that dials it reaches nothing,
 * and an ADD of its URL is refused before the engine fetches it; imported with
 * --build-with-network, both reach it (which is what shows the probes can reach it at all).
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os, { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeDocker } from '../support/docker.js';
import { BASE_IMAGE_RULE, DATASET, ensureDebianBase } from './helpers.js';

const CLI = path.resolve(import.meta.dirname, '../../dist/cli/openenv-bundle.js');
/** this run's bundles, so its images are its own to remove */
const RUN = `build-net-${randomBytes(4).toString('hex')}`;

/** the built CLI as a child process; never spawnSync: the service the builds dial lives in this process */
function cli(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill('SIGINT'), 540_000);
    child.on('error', reject);
    child.on('exit', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

/**
 * the host's address on the engine's default bridge: its gateway, as the engine says it, else the
 * first address of its subnet (where Docker puts the gateway when it says none; docker0 holds it
 * even while no container is on the bridge and the interface is down, which Node does not list)
 */
function bridgeGateway(): string {
  const config = JSON.parse(execFileSync('docker', ['network', 'inspect', 'bridge', '--format', '{{json .IPAM.Config}}'], { encoding: 'utf8' })) as {
    Subnet?: string;
    Gateway?: string;
  }[];
  const said = config.map((c) => c.Gateway).find((a) => a && /^\d+\.\d+\.\d+\.\d+$/.test(a));
  const subnet = config.map((c) => c.Subnet).find((s) => s && /^\d+\.\d+\.\d+\.\d+\/\d+$/.test(s));
  const first = subnet ? subnet.replace(/\.\d+\/\d+$/, '.1') : undefined;
  const docker0 = os.networkInterfaces().docker0?.find((a) => a.family === 'IPv4')?.address;
  const gw = said ?? docker0 ?? first;
  if (!gw) throw new Error("no address of the engine's default bridge on this host (docker network inspect bridge, docker0)");
  return gw;
}

describeDocker("an imported task's image build and the host's services", () => {
  let tmp: string;
  let gateway: string;
  const server = http.createServer((_req, res) => res.end('the host service answered\n'));
  /** connections the service took, by the probe that made them */
  const hits: Record<string, number> = {};
  let current = '';
  server.on('connection', () => (hits[current] = (hits[current] ?? 0) + 1));

  beforeAll(async () => {
    ensureDebianBase();
    gateway = bridgeGateway();
    await new Promise<void>((r) => server.listen(0, gateway, r));
    tmp = await mkdtemp(path.join(tmpdir(), 'openenv-build-net-'));
  }, 120_000);
  afterAll(async () => {
    server.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
    const ours = execFileSync('docker', ['images', '-q', '--filter', `reference=openenv-bundle/${RUN}-*`], { encoding: 'utf8' }).trim();
    if (ours) execFileSync('docker', ['rmi', '-f', ...new Set(ours.split('\n'))], { stdio: 'pipe' });
  });

  /** a copy of a shipped task whose Dockerfile ends with `extra`, imported (with `flags`) and checked */
  async function importAndCheck(name: string, extra: string, flags: string[] = []) {
    const src = path.join(tmp, `${name}-src`);
    const task = path.join(src, 'word-frequency');
    await cp(path.join(DATASET, 'word-frequency'), task, { recursive: true });
    const dockerfile = path.join(task, 'environment/Dockerfile');
    await writeFile(dockerfile, `${await readFile(dockerfile, 'utf8')}${extra}\n`);
    const out = path.join(tmp, name);
    const imported = await cli(['import', 'harbor', src, '--out', out, '--name', `${RUN}-${name}`, '--base-image', BASE_IMAGE_RULE, ...flags]);
    expect(imported.status, imported.stdout + imported.stderr).toBe(0);
    current = name;
    const checked = await cli(['check', out, '--tasks', 'all']);
    return { imported, checked, manifest: JSON.parse(await readFile(path.join(out, 'bundle.json'), 'utf8')) };
  }

  const port = () => (server.address() as AddressInfo).port;
  /**
   * a RUN that dials the service (bash's /dev/tcp: the image's sh is dash) and goes on either way;
   * its text names the case, since the engine's layer cache does not tell builds with and without
   * network apart and would reuse one case's layer for another
   */
  const dial = (name: string) =>
    `RUN bash -c 'exec 3<>/dev/tcp/${gateway}/${port()} && echo reached ${name} >&3' 2>/dev/null || echo "the host's service is out of reach"`;

  it('a RUN reaches no host service: the build has no network, and the task still checks ok', async () => {
    const { checked, manifest } = await importAndCheck('run-offline', dial('run-offline'));
    expect(manifest.envs['word-frequency'].build_network).toBe('none');
    expect(checked.status, checked.stdout + checked.stderr).toBe(0);
    expect(checked.stdout).toMatch(/^ok: no problem/m);
    expect(hits['run-offline'] ?? 0).toBe(0);
  }, 600_000);

  it('an ADD of a host URL is refused by name before the engine fetches it', async () => {
    const { imported, checked } = await importAndCheck('add-offline', `ADD http://${gateway}:${port()}/secret /app/secret`);
    expect(imported.stdout).toContain('it ADDs a URL (or a variable)');
    expect(checked.status).toBe(1);
    expect(checked.stdout).toContain(`its Dockerfile ADDs http://${gateway}:${port()}/secret: the engine fetches an ADD's URL itself, on the host's network`);
    expect(hits['add-offline'] ?? 0).toBe(0);
  }, 600_000);

  it('with --build-with-network the same RUN and ADD reach the service (the probes work; the flag is a trust decision)', async () => {
    const { imported, checked, manifest } = await importAndCheck('trusted', `${dial('trusted')}\nADD http://${gateway}:${port()}/secret /app/secret`, [
      '--build-with-network',
    ]);
    expect(manifest.envs['word-frequency'].build_network).toBeUndefined();
    expect(imported.stdout).toContain("built with the engine's network (--build-with-network)");
    expect(checked.status, checked.stdout + checked.stderr).toBe(0);
    // one connection from the RUN, one from the engine fetching the ADD
    expect(hits.trusted).toBeGreaterThanOrEqual(2);
  }, 600_000);
});
