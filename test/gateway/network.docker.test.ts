/**
 * The gateway's network design on a real engine (docs/gateway.md), in both placements of the
 * server: on the host, and in a container attached to every episode network (compose). The test
 * makes its own internal episode networks, an env on one of them, a container outside, and the
 * gateway's side (test/gateway/support/door-server.mjs, the built gateway) in each placement; then
 * an env container (CAP_NET_RAW dropped, as the design asks) probes everything it could try:
 * its own door answers with its key only; another episode's door and env, the server's API port,
 * the host, the outside network and the engine do not. The shipped harness runs in the env
 * against its door.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, expect, it } from 'vitest';
import { LOCAL_PYTHON_IMAGE, LOCAL_NODE_IMAGE, describeDocker, labelledResources, waitFor } from '../support/docker.js';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '../..');
const RUN = `gwnet-${randomBytes(3).toString('hex')}`;
const LABEL = `openenv.test.gateway=${RUN}`;
const R = Math.floor(Math.random() * 250);
/** the episode subnet pool: A and B; the outside network and the compose network are not in it */
const POOL = `10.219.${R}.0/27`;
const NET = { a: `10.219.${R}.0/28`, b: `10.219.${R}.16/28`, outside: `10.219.${R}.32/28`, compose: `10.219.${R}.48/28` };
const hostAddr = (cidr: string) => cidr.replace(/\.(\d+)\/28$/, (_m, last: string) => `.${Number(last) + 1}`);

async function docker(...args: string[]): Promise<string> {
  return (await run('docker', args, { maxBuffer: 16 * 1024 * 1024 })).stdout.trim();
}

async function network(name: string, subnet: string, opts: { internal: boolean; hostless?: boolean }): Promise<string> {
  const args = ['network', 'create', '--label', LABEL, '--subnet', subnet, '--gateway', hostAddr(subnet)];
  if (opts.internal) args.push('--internal');
  if (opts.hostless) args.push('-o', 'com.docker.network.bridge.inhibit_ipv4=true');
  await docker(...args, `${RUN}-${name}`);
  return `${RUN}-${name}`;
}

/** a container serving HTTP on :8000 of its network, once it answers */
async function httpContainer(name: string, net: string): Promise<string> {
  await docker(
    'run',
    '-d',
    '--label',
    LABEL,
    '--name',
    `${RUN}-${name}`,
    '--network',
    net,
    '--cap-drop',
    'NET_RAW',
    LOCAL_PYTHON_IMAGE,
    'python3',
    '-m',
    'http.server',
    '8000',
  );
  const probe = "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8000/', timeout=2).status)";
  await waitFor(async () => (await docker('exec', `${RUN}-${name}`, 'python3', '-c', probe).catch(() => '')) === '200', 20_000, `${name} to serve`);
  return docker('inspect', '-f', `{{(index .NetworkSettings.Networks "${net}").IPAddress}}`, `${RUN}-${name}`);
}

interface Target {
  name: string;
  host: string;
  port: number;
  path?: string;
  method?: string;
  headers?: Record<string, string>;
  body?: unknown;
}

interface Probe {
  targets: Record<string, { outcome: string; body?: string; detail?: string }>;
  default_route: boolean;
  raw_socket: string;
  engine_socket: boolean;
  harness: { code: number; stdout: string; stderr: string } | null;
}

/** an env on `net` (no CAP_NET_RAW, no new privileges), with the episode's variables, trying every target */
async function probeFrom(net: string, env: Record<string, string>, targets: Target[], withHarness = true): Promise<Probe> {
  const args = ['run', '--rm', '--label', LABEL, '--network', net, '--cap-drop', 'NET_RAW', '--security-opt', 'no-new-privileges:true'];
  for (const [k, v] of Object.entries(env)) args.push('-e', `${k}=${v}`);
  args.push('-v', `${join(ROOT, 'test/gateway/support/probe.py')}:/probe.py:ro`);
  if (withHarness) args.push('-v', `${join(ROOT, 'harness')}:/harness:ro`);
  args.push(LOCAL_PYTHON_IMAGE, 'python3', '/probe.py', JSON.stringify(targets));
  return JSON.parse(await docker(...args)) as Probe;
}

interface Ready {
  issued: Record<string, { credential: string; origin: string; env: Record<string, string> }>;
  apis: Record<string, { host: string; port: number }>;
  ip_forward: boolean | null;
  wildcard_ports: number[];
}

/**
 * The door server's config. On the host, each door's address is the bridge's (the sandbox knows
 * it: the subnet's gateway); in a container, the door finds its own address in the subnet.
 */
function configOf(placement: 'host' | 'container', apis: { name: string; host: string; guarded?: boolean }[]): string {
  const episode = (id: string, subnet: string) => ({ id, subnet, ...(placement === 'host' ? { address: hostAddr(subnet) } : {}) });
  return JSON.stringify({ episodes: [episode('a', NET.a), episode('b', NET.b)], pool: POOL, apis, port: 0, stopOnStdinEnd: placement === 'host' });
}

function readyOf(lines: string): Ready | null {
  for (const l of lines.split('\n')) if (l.startsWith('{"ready"')) return (JSON.parse(l) as { ready: Ready }).ready;
  return null;
}

const origin = (o: string) => {
  const u = new URL(o);
  return { host: u.hostname, port: Number(u.port) };
};

/** what one env tries: its own door (with its key, another's, none), and everything that must stay closed */
function targetsFor(ready: Ready, extra: Target[]): Target[] {
  const a = ready.issued.a!;
  const b = ready.issued.b!;
  const door = origin(a.origin);
  const chat = { model: 'x', messages: [{ role: 'user', content: 'ping' }] };
  return [
    { name: 'door_models', ...door, path: '/v1/models', headers: { authorization: `Bearer ${a.credential}` } },
    { name: 'door_chat', ...door, path: '/v1/chat/completions', method: 'POST', headers: { authorization: `Bearer ${a.credential}` }, body: chat },
    {
      name: 'door_stream',
      ...door,
      path: '/v1/chat/completions',
      method: 'POST',
      headers: { authorization: `Bearer ${a.credential}` },
      body: { ...chat, stream: true },
    },
    { name: 'door_with_b_key', ...door, path: '/v1/models', headers: { authorization: `Bearer ${b.credential}` } },
    { name: 'door_without_key', ...door, path: '/v1/models' },
    { name: 'door_of_b', ...origin(b.origin), path: '/v1/models', headers: { authorization: `Bearer ${b.credential}` } },
    ...extra,
  ];
}

function expectClosed(p: Probe, names: string[]): void {
  for (const n of names) {
    expect(p.targets[n], n).toBeDefined();
    expect(p.targets[n]!.outcome, `${n} must not answer from inside the episode network (${JSON.stringify(p.targets[n])})`).not.toMatch(/^http/);
  }
}

function expectOwnDoor(p: Probe): void {
  expect(p.targets.door_models!.outcome).toBe('http 200');
  expect(JSON.parse(p.targets.door_models!.body!).data[0].id).toBe('pong-model');
  expect(p.targets.door_chat!.outcome).toBe('http 200');
  expect(JSON.parse(p.targets.door_chat!.body!).choices[0].message.content).toBe('pong');
  expect(p.targets.door_stream!.outcome).toBe('http 200');
  expect(p.targets.door_stream!.body).toContain('data: [DONE]');
  expect(p.targets.door_with_b_key!.outcome).toBe('http 401');
  expect(p.targets.door_without_key!.outcome).toBe('http 401');
  expect(p.raw_socket).toBe('denied');
  expect(p.engine_socket).toBe(false);
  expect(p.harness, 'the harness ran').not.toBeNull();
  expect(p.harness!.code, p.harness!.stderr).toBe(0);
  expect(p.harness!.stdout).toBe('pong');
}

/** a host address that is neither loopback nor on a network this test made */
function someHostAddress(): string | null {
  for (const addrs of Object.values(networkInterfaces())) {
    for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal && !a.address.startsWith(`10.219.${R}.`)) return a.address;
  }
  return null;
}

async function removeAll(): Promise<void> {
  const { containers, networks } = labelledResources(LABEL);
  if (containers.length) await docker('rm', '-f', ...containers).catch(() => '');
  for (const n of networks) await docker('network', 'rm', n).catch(() => '');
}

describeDocker('the model gateway from inside an episode network', () => {
  const children: ChildProcess[] = [];
  const hostServers: Server[] = [];
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    for (const s of hostServers) s.close();
    await removeAll();
  });

  it('server on the host: the door on the bridge address answers its episode; other doors, envs, the API port, the outside and the engine do not', async () => {
    try {
      const a = await network('host-a', NET.a, { internal: true });
      const b = await network('host-b', NET.b, { internal: true });
      const outsideNet = await network('host-out', NET.outside, { internal: false });
      const child = spawn('node', [join(ROOT, 'test/gateway/support/door-server.mjs')], {
        env: {
          ...process.env,
          GATEWAY_TEST_CONFIG: configOf('host', [
            { name: 'loopback', host: '127.0.0.1' },
            { name: 'guarded', host: '0.0.0.0', guarded: true },
            { name: 'unguarded', host: '0.0.0.0' },
          ]),
        },
        stdio: ['pipe', 'pipe', 'inherit'],
      });
      children.push(child);
      let stdout = '';
      child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
      await waitFor(() => readyOf(stdout) !== null, 20_000, 'the gateway on the host to be ready');
      const ready = readyOf(stdout)!;
      // the doors are on the bridges' host addresses
      expect(ready.issued.a!.origin).toMatch(new RegExp(`^http://${hostAddr(NET.a).replace(/\./g, '\\.')}:\\d+$`));
      expect(ready.issued.b!.origin).toMatch(new RegExp(`^http://${hostAddr(NET.b).replace(/\./g, '\\.')}:\\d+$`));
      const [envB, outside] = await Promise.all([httpContainer('host-envb', b), httpContainer('host-outside', outsideNet)]);
      const gwA = hostAddr(NET.a);
      const p = await probeFrom(
        a,
        ready.issued.a!.env,
        targetsFor(ready, [
          { name: 'api_loopback', host: gwA, port: ready.apis.loopback!.port },
          { name: 'api_wildcard_guarded', host: gwA, port: ready.apis.guarded!.port },
          { name: 'api_wildcard_unguarded', host: gwA, port: ready.apis.unguarded!.port },
          { name: 'env_of_b', host: envB, port: 8000 },
          { name: 'outside', host: outside, port: 8000 },
          { name: 'engine_tcp', host: gwA, port: 2375 },
          { name: 'engine_tls', host: gwA, port: 2376 },
        ]),
      );
      expectOwnDoor(p);
      expectClosed(p, ['door_of_b', 'api_loopback', 'api_wildcard_guarded', 'env_of_b', 'outside', 'engine_tcp', 'engine_tls']);
      // the one thing host placement leaves to the host's firewall (docs/gateway.md): a service
      // bound to a wildcard address, without the API's guard, answers on the bridge address
      expect(p.targets.api_wildcard_unguarded!.outcome).toBe('http 200');
      // and from B, A's door is closed even with A's key
      const fromB = await probeFrom(
        b,
        {},
        [{ name: 'door_of_a', ...origin(ready.issued.a!.origin), path: '/v1/models', headers: { authorization: `Bearer ${ready.issued.a!.credential}` } }],
        false,
      );
      expectClosed(fromB, ['door_of_a']);
      expect(stdout).toContain('"episode_id":"a","api":"openai.chat","status":200,"outcome":"ok"');
      child.stdin!.end();
      await waitFor(() => child.exitCode !== null, 10_000, 'the gateway process to stop');
    } finally {
      await removeAll();
    }
  });

  it('server in a container on every episode network (compose): the door on its address there answers its episode; nothing else does, the host included', async () => {
    const hostListener = createServer((_q, s) => s.end('a host service answered'));
    hostServers.push(hostListener);
    await new Promise<void>((r) => hostListener.listen(0, '0.0.0.0', r));
    const hostPort = (hostListener.address() as AddressInfo).port;
    try {
      const a = await network('cmp-a', NET.a, { internal: true, hostless: true });
      const b = await network('cmp-b', NET.b, { internal: true, hostless: true });
      const composeNet = await network('cmp-default', NET.compose, { internal: false });
      const server = `${RUN}-server`;
      await docker(
        'create',
        '--label',
        LABEL,
        '--name',
        server,
        '--network',
        composeNet,
        '--sysctl',
        'net.ipv4.ip_forward=0',
        '-e',
        `GATEWAY_TEST_CONFIG=${configOf('container', [
          { name: 'api', host: '0.0.0.0', guarded: true },
          { name: 'unguarded', host: '0.0.0.0' },
        ])}`,
        '-v',
        `${ROOT}:/srv:ro`,
        '-w',
        '/srv',
        LOCAL_NODE_IMAGE,
        'node',
        'test/gateway/support/door-server.mjs',
      );
      await docker('network', 'connect', a, server);
      await docker('network', 'connect', b, server);
      await docker('start', server);
      let logs = '';
      await waitFor(
        async () => {
          logs = await docker('logs', server);
          return readyOf(logs) !== null;
        },
        20_000,
        'the gateway in its container to be ready',
      );
      const ready = readyOf(logs)!;
      expect(ready.ip_forward).toBe(false);
      const serverOnA = origin(ready.issued.a!.origin).host;
      expect(serverOnA.startsWith(`10.219.${R}.`)).toBe(true);
      const [envB, outside] = await Promise.all([httpContainer('cmp-envb', b), httpContainer('cmp-outside', composeNet)]);
      const elsewhere = someHostAddress();
      const p = await probeFrom(
        a,
        ready.issued.a!.env,
        targetsFor(ready, [
          { name: 'api_guarded', host: serverOnA, port: ready.apis.api!.port },
          { name: 'api_unguarded', host: serverOnA, port: ready.apis.unguarded!.port },
          { name: 'env_of_b', host: envB, port: 8000 },
          { name: 'compose_neighbour', host: outside, port: 8000 },
          { name: 'host_on_compose_bridge', host: hostAddr(NET.compose), port: hostPort },
          { name: 'host_on_episode_bridge_address', host: hostAddr(NET.a), port: hostPort },
          { name: 'engine_tcp', host: hostAddr(NET.compose), port: 2375 },
          { name: 'engine_tls', host: hostAddr(NET.compose), port: 2376 },
          ...(elsewhere ? [{ name: 'host_elsewhere', host: elsewhere, port: hostPort }] : []),
        ]),
      );
      expectOwnDoor(p);
      expectClosed(p, [
        'door_of_b',
        'api_guarded',
        'env_of_b',
        'compose_neighbour',
        'host_on_compose_bridge',
        'host_on_episode_bridge_address',
        'engine_tcp',
        'engine_tls',
        ...(elsewhere ? ['host_elsewhere'] : []),
      ]);
      // why the API needs refuseEpisodeSources in this placement: unguarded, it answers the env
      expect(p.targets.api_unguarded!.outcome).toBe('http 200');
      const fromB = await probeFrom(
        b,
        {},
        [{ name: 'door_of_a', ...origin(ready.issued.a!.origin), path: '/v1/models', headers: { authorization: `Bearer ${ready.issued.a!.credential}` } }],
        false,
      );
      expectClosed(fromB, ['door_of_a']);
      expect(await docker('logs', server)).toContain('"episode_id":"a","api":"openai.chat","status":200,"outcome":"ok"');
    } finally {
      await removeAll();
    }
  });

  it('leaves nothing of its own on the engine', () => {
    expect(labelledResources(LABEL)).toEqual({ containers: [], networks: [] });
  });
});
