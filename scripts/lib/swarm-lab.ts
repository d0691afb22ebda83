/**
 * Driving the swarm lab (scripts/swarm-lab.sh), for the swarm tests and the swarm bench: dockerds
 * of their own in network namespaces, forming a real swarm, and the bundle server running as a
 * container on the manager n1, reached at n1's address. The lab's engines are separate from the
 * main engine, whose state the lab never touches. What only the tests need (a `describe` that
 * skips or fails without the lab, exact container counts) is in test/support/swarm-lab.ts.
 */
import { execFile, execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { LABELS } from '../../src/sandbox/sandbox.js';
import { STOCK_KEY_PREFIX } from '../../src/sandbox/engine/network-stock.js';
import { LOCAL_NODE_IMAGE } from './local-node-image.js';
import { waitFor } from './wait.js';

const run = promisify(execFile);

export const REPO = resolve(import.meta.dirname, '../..');
export const LAB_DIR = process.env.SWARM_LAB_DIR ?? '/var/lib/openenv-swarm-lab';
export const REGISTRY = '10.77.0.1:5000';
export const SERVER_IMAGE = 'openenv-bundle-server:swarm-lab';
export const MANAGER_IP = '10.77.0.11';

function canRunLab(): string | null {
  if (process.getuid?.() !== 0) return 'not root';
  for (const cmd of ['ip', 'iptables', 'nsenter', 'dockerd', 'docker', 'docker-registry']) {
    try {
      execFileSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'pipe' });
    } catch {
      return `${cmd} is missing (apt-get install -y iproute2 iptables util-linux docker.io docker-registry)`;
    }
  }
  return null;
}

/** why the lab cannot run on this machine (null: it can) */
export const LAB_PROBLEM = canRunLab();

export function sock(node: number): string {
  return `unix://${LAB_DIR}/n${node}/docker.sock`;
}

/** the docker CLI against a lab node */
export async function dk(node: number, args: string[]): Promise<string> {
  const { stdout } = await run('docker', ['-H', sock(node), ...args], { maxBuffer: 64 * 1024 * 1024 });
  return stdout;
}

function lines(s: string): string[] {
  return s
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
}

/**
 * `scripts/swarm-lab.sh up|down`. `down` keeps every node's dockerd log (SWARM_LAB_LOGS) and says
 * when a node's engine had died on its own: that is printed here, so a test run shows it.
 */
export async function lab(action: 'up' | 'down', nodes: number, opts: { noNewPrivileges?: boolean } = {}): Promise<void> {
  const { stderr } = await run('bash', [join(REPO, 'scripts/swarm-lab.sh'), action], {
    env: { ...process.env, SWARM_LAB_NODES: String(nodes), SWARM_LAB_NO_NEW_PRIVILEGES: opts.noNewPrivileges === false ? '0' : '1' },
    maxBuffer: 16 * 1024 * 1024,
  });
  if (stderr.includes('had died before down')) console.error(stderr);
}

/** kills a node's dockerd hard (SIGKILL), as a machine that fails would */
export function killNode(node: number): void {
  const pid = Number(readFileSync(`${LAB_DIR}/n${node}/dockerd.pid`, 'utf8').trim());
  process.kill(pid, 'SIGKILL');
}

/**
 * The server image on n1, built there from this checkout (offline target: host-compiled dist/ and
 * production node_modules on the local Node base), and both images pushed to the lab registry.
 */
export async function prepareServerImage(): Promise<void> {
  await run('bash', [join(REPO, 'docker/prepare-prebuilt.sh')], { cwd: REPO });
  await run('sh', ['-c', `docker save ${LOCAL_NODE_IMAGE} | docker -H ${sock(1)} load -q`]);
  await dk(1, ['build', '-q', '--target', 'runtime-prebuilt', '--build-arg', `NODE_IMAGE=${LOCAL_NODE_IMAGE}`, '-t', SERVER_IMAGE, REPO]);
  for (const image of [LOCAL_NODE_IMAGE, SERVER_IMAGE]) {
    await dk(1, ['tag', image, `${REGISTRY}/${image}`]);
    await dk(1, ['push', `${REGISTRY}/${image}`]);
  }
}

/** the node ids of the lab, by lab node number */
export async function nodeIds(count: number): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (let i = 1; i <= count; i++) out.set((await dk(i, ['info', '--format', '{{.Swarm.NodeID}}'])).trim(), i);
  return out;
}

/** An HTTP call to a server with its bearer token: the body sent and read as JSON (as text when it is not JSON). */
export function bearerJsonCall(url: string, token: string): LabServer['call'] {
  return async (method, path, body) => {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body !== undefined ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    try {
      return { status: res.status, body: JSON.parse(text) as unknown };
    } catch {
      return { status: res.status, body: text };
    }
  };
}

export interface LabServer {
  name: string;
  url: string;
  token: string;
  instance: string;
  /** GET/POST/DELETE with the token; JSON body */
  call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  logs(): Promise<string>;
}

export interface ServerSpec {
  instance: string;
  port: number;
  /** host folder holding the bundle (mounted read-only at /bundle) */
  bundleDir: string;
  args?: string[];
  name?: string;
  /**
   * the other nodes' engine sockets mounted into the server's container and named with
   * --swarm-node-engine (default true): what only a node can tell (cost, storage bound, OOM,
   * no-new-privileges) is then read for envs on every node
   */
  nodeEngines?: boolean;
}

/** where the server's container finds the other nodes' engine sockets */
const NODE_SOCKETS_IN_SERVER = '/var/run/openenv-nodes';

/** the lab's nodes other than the manager n1 whose engine socket exists, by number */
function workerNodes(): number[] {
  if (!existsSync(LAB_DIR)) return [];
  return readdirSync(LAB_DIR)
    .map((d) => /^n(\d+)$/.exec(d)?.[1])
    .filter((n): n is string => n !== undefined && n !== '1' && existsSync(`${LAB_DIR}/n${n}/docker.sock`))
    .map(Number)
    .sort((a, b) => a - b);
}

/** runs the server as a container on n1 (n1's socket mounted, a port published on n1's address) and waits for /health */
export async function startServer(spec: ServerSpec): Promise<LabServer> {
  const token = `tok-${spec.instance}`;
  const name = spec.name ?? `oe-swarm-${spec.instance}`;
  const workers = spec.nodeEngines === false ? [] : workerNodes();
  const nodeMounts = workers.flatMap((n) => [
    '-v',
    `${LAB_DIR}/n${n}/docker.sock:${NODE_SOCKETS_IN_SERVER}/n${n}.sock`,
    '--group-add',
    String(statSync(`${LAB_DIR}/n${n}/docker.sock`).gid),
  ]);
  const nodeArgs = workers.flatMap((n) => ['--swarm-node-engine', `unix://${NODE_SOCKETS_IN_SERVER}/n${n}.sock`]);
  await dk(1, [
    'run',
    '-d',
    '--name',
    name,
    '--label',
    'openenv-swarm-lab.test=1',
    '-v',
    `${LAB_DIR}/n1/docker.sock:/var/run/docker.sock`,
    // the image runs as uid 1000: it reaches the manager's socket through the socket's group
    '--group-add',
    String(statSync(`${LAB_DIR}/n1/docker.sock`).gid),
    ...nodeMounts,
    '-v',
    `${spec.bundleDir}:/bundle:ro`,
    '-p',
    `${MANAGER_IP}:${spec.port}:8200`,
    '-e',
    `AGENTENV_TOKEN=${token}`,
    SERVER_IMAGE,
    '/bundle',
    '--host',
    '0.0.0.0',
    '--sandbox',
    'swarm',
    '--registry',
    REGISTRY,
    '--instance',
    spec.instance,
    '--build-arg',
    `NODE_IMAGE=${LOCAL_NODE_IMAGE}`,
    '--shutdown-timeout',
    '120',
    ...nodeArgs,
    ...(spec.args ?? []),
  ]);
  const url = `http://${MANAGER_IP}:${spec.port}`;
  const server: LabServer = {
    name,
    url,
    token,
    instance: spec.instance,
    call: bearerJsonCall(url, token),
    logs: async () => {
      const { stdout, stderr } = await run('docker', ['-H', sock(1), 'logs', name], { maxBuffer: 64 * 1024 * 1024 });
      return stdout + stderr;
    },
  };
  await waitFor(
    async () => {
      const state = (await dk(1, ['inspect', '--format', '{{.State.Status}}', name]).catch(() => '')).trim();
      if (state === 'exited') throw new Error(`the server container exited:\n${(await server.logs()).slice(-4000)}`);
      const r = await fetch(`${url}/health`).catch(() => null);
      return r?.status === 200;
    },
    240_000,
    'the server on n1 answering /health',
  );
  return server;
}

/** removes the test's server containers on n1 (the lab's own engine) */
export async function removeServers(): Promise<void> {
  const ids = lines(await dk(1, ['ps', '-aq', '--filter', 'label=openenv-swarm-lab.test=1']).catch(() => ''));
  if (ids.length) await dk(1, ['rm', '-f', ...ids]).catch(() => '');
}

/**
 * What the instance has on the swarm: services and networks (manager), running containers on every
 * node. `networks` are the episodes' overlays; `stocked` those labelled with a network-stock key
 * (made ahead of demand, or taken by an episode: the labels cannot tell, so a test compares their
 * number with the stock's size while the server runs, and expects none once it has stopped).
 */
export async function footprint(
  instance: string,
  nodes: number,
): Promise<{ services: string[]; networks: string[]; stocked: string[]; containers: Record<string, string[]>; tasks: string[] }> {
  const label = `${LABELS.instance}=${instance}`;
  const services = lines(await dk(1, ['service', 'ls', '-q', '--filter', `label=${label}`]));
  const networks: string[] = [];
  const stocked: string[] = [];
  for (const l of lines(await dk(1, ['network', 'ls', '--filter', `label=${label}`, '--format', `{{.ID}} {{.Label "${LABELS.episode}"}}`]))) {
    const [id, episode] = l.split(' ');
    (episode?.startsWith(STOCK_KEY_PREFIX) ? stocked : networks).push(id!);
  }
  const containers: Record<string, string[]> = {};
  for (let i = 1; i <= nodes; i++) containers[`n${i}`] = lines(await dk(i, ['ps', '-q', '--filter', `label=${label}`]).catch(() => ''));
  const tasks: string[] = [];
  // a service may go between the listing and this (its task then went with it)
  for (const s of services) tasks.push(...lines(await dk(1, ['service', 'ps', '-q', '--filter', 'desired-state=running', s]).catch(() => '')));
  return { services, networks, stocked, containers, tasks };
}

export function runningContainers(f: { containers: Record<string, string[]> }): number {
  return Object.values(f.containers).reduce((n, c) => n + c.length, 0);
}

/** the node each live service of the instance has its task on */
export async function placements(instance: string): Promise<Array<{ episode: string; node: string }>> {
  const services = lines(await dk(1, ['service', 'ls', '-q', '--filter', `label=${LABELS.instance}=${instance}`]));
  const out: Array<{ episode: string; node: string }> = [];
  for (const s of services) {
    const episode = (await dk(1, ['service', 'inspect', '--format', `{{index .Spec.Labels "${LABELS.episode}"}}`, s]).catch(() => '')).trim();
    if (!episode) continue;
    for (const t of lines(await dk(1, ['service', 'ps', '-q', '--filter', 'desired-state=running', s]).catch(() => ''))) {
      out.push({ episode, node: (await dk(1, ['inspect', '--format', '{{.NodeID}}', t])).trim() });
    }
  }
  return out;
}

/** a copy of the fixture bundle in a temporary folder, its manifest changed by `edit` (the echo env's resources, say) */
export function fixtureCopy(edit: (manifest: any) => void): { dir: string; cleanup: () => void } {
  const root = mkdtempSync(join(tmpdir(), 'openenv-swarm-fixture-'));
  const dir = join(root, 'fixture-v1');
  cpSync(join(REPO, 'test/fixtures/fixture-v1'), dir, { recursive: true });
  const manifest = JSON.parse(readFileSync(join(dir, 'bundle.json'), 'utf8'));
  edit(manifest);
  writeFileSync(join(dir, 'bundle.json'), JSON.stringify(manifest, null, 2));
  return { dir, cleanup: () => rmSync(root, { recursive: true, force: true }) };
}
