/**
 * The egress allowlist, proven from inside sandboxes created by the real SDK: the destination
 * --egress-allow names answers (a listener of this host, as slime's adapter on the trainer's
 * head), and everything else is closed, each refused at once by the server's rules (not left
 * to time out): another port of the same host, the server's own API, another host (a container
 * on Docker's default bridge), the internet, another sandbox; E2B's allow_internet_access and
 * network.allowOut/denyOut choose within the list; the rules go with the sandbox. A server that
 * cannot set the rules (not in the engine host's network namespace) refuses to start, saying
 * what it needs.
 */
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { connect, createServer, type Server } from 'node:net';
import { networkInterfaces } from 'node:os';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Sandbox } from 'e2b';
import { describeDocker, labelledResources, uniqueInstance, waitFor } from '../support/docker.js';
import { E2B_BUNDLE, INSTANCE_LABEL, LOCAL_DEBIAN_IMAGE, startE2bServer, TEMPLATE, type E2bServer } from './helpers.js';
import { SERVE_JS } from '../support/serve-process.js';

/** an IPv4 address of this host that is not a Docker bridge's: where a trainer's adapter would listen */
function hostAddress(): string {
  for (const [name, addrs] of Object.entries(networkInterfaces())) {
    if (/^(docker|br-|veth|lo)/.test(name)) continue;
    const a = addrs?.find((x) => x.family === 'IPv4' && !x.internal);
    if (a) return a.address;
  }
  throw new Error('no IPv4 address of this host outside Docker');
}

/** a TCP listener on every address that greets each connection with `hello <name>` */
async function greeter(name: string): Promise<{ server: Server; port: number }> {
  const server = createServer((s) => s.end(`hello ${name}\n`));
  await new Promise<void>((r) => server.listen(0, '0.0.0.0', r));
  return { server, port: (server.address() as { port: number }).port };
}

/** from inside the sandbox: what a TCP connection to ip:port reads, or why it failed, and how long it took */
async function reach(sb: Sandbox, ip: string, port: number): Promise<{ ok: boolean; said: string; ms: number }> {
  const started = Date.now();
  const r = await sb.commands
    .run(`timeout 10 bash -c 'exec 3<>/dev/tcp/${ip}/${port}; head -n1 <&3' 2>&1`, { user: 'root', timeoutMs: 30_000 })
    .then((x) => ({ ok: true, said: x.stdout.trim() }))
    .catch((e: { stdout?: string; stderr?: string }) => ({ ok: false, said: `${e.stdout ?? ''}${e.stderr ?? ''}`.trim() }));
  return { ...r, ms: Date.now() - started };
}

const HOST = hostAddress();

describeDocker('the egress allowlist', () => {
  let allowed: { server: Server; port: number };
  let other: { server: Server; port: number };
  let otherHost: { id: string; ip: string };
  let s: E2bServer;
  const sdk = () => ({ apiKey: s.token, apiUrl: s.env.E2B_API_URL, sandboxUrl: s.env.E2B_SANDBOX_URL });

  beforeAll(async () => {
    allowed = await greeter('allowed');
    other = await greeter('other');
    // another host: a container on Docker's default bridge, listening
    const id = execFileSync(
      'docker',
      ['run', '-d', '--rm', '--label', `e2b-egress-test=${process.pid}`, LOCAL_DEBIAN_IMAGE, 'python3', '-m', 'http.server', '8000'],
      {
        encoding: 'utf8',
      },
    ).trim();
    otherHost = { id, ip: execFileSync('docker', ['inspect', '-f', '{{.NetworkSettings.IPAddress}}', id], { encoding: 'utf8' }).trim() };
    // the server listens on every address: its API is on the host address the sandboxes could try
    s = await startE2bServer(['--host', '0.0.0.0', '--egress-allow', `${HOST}:${allowed.port}`]);
  });
  afterAll(async () => {
    allowed?.server.close();
    other?.server.close();
    if (otherHost) execFileSync('docker', ['rm', '-f', otherHost.id], { stdio: 'ignore' });
    if (s) {
      s.proc.child.kill('SIGTERM');
      expect((await s.proc.exited).code).toBe(0);
      expect(labelledResources(`${INSTANCE_LABEL}=${s.instance}`)).toEqual({ containers: [], networks: [] });
      expect(ourChains(s.instance)).toEqual([]);
    }
  });

  it('the allowed destination answers; another port of this host, the server API, another host, the internet and another sandbox are refused at once', async () => {
    const a = await Sandbox.create(TEMPLATE, { ...sdk(), timeoutMs: 300_000 });
    const b = await Sandbox.create(TEMPLATE, { ...sdk(), timeoutMs: 300_000 });
    try {
      expect(await reach(a, HOST, allowed.port)).toMatchObject({ ok: true, said: 'hello allowed' });
      // b listens; its address on its own network
      await b.commands.run('python3 -m http.server 9000 >/dev/null 2>&1', { user: 'root', background: true, timeoutMs: 0 });
      const bIp = (await b.commands.run("hostname -I | cut -d' ' -f1", { user: 'root' })).stdout.trim();
      await waitFor(
        async () =>
          await b.commands.run('bash -c "exec 3<>/dev/tcp/127.0.0.1/9000"', { user: 'root' }).then(
            () => true,
            () => false,
          ),
        10_000,
        'b listens',
      );
      const apiPort = Number(new URL(s.url).port);
      const closed = {
        'another port of this host': await reach(a, HOST, other.port),
        "the server's API": await reach(a, HOST, apiPort),
        "the server's API at the bridge's gateway": await reach(a, await gatewayOf(a), apiPort),
        'another host': await reach(a, otherHost.ip, 8000),
        'the internet': await reach(a, '1.1.1.1', 443),
        'another sandbox': await reach(a, bIp, 9000),
      };
      for (const [what, r] of Object.entries(closed)) {
        expect(r.ok, `${what}: ${r.said}`).toBe(false);
        // refused by the rules, not left to time out
        expect(r.ms, `${what} is refused at once`).toBeLessThan(5000);
      }
      // the same from this host: they do answer, so what closed them is the sandbox's rules
      expect(await readFrom(HOST, other.port)).toBe('hello other');
      expect(
        await a.commands.run('test -S /var/run/docker.sock', { user: 'root' }).then(
          () => true,
          () => false,
        ),
      ).toBe(false);
    } finally {
      await a.kill();
      await b.kill();
    }
  });

  it("a sandbox's allow_internet_access and network.allowOut/denyOut choose within the list", async () => {
    const off = await Sandbox.create(TEMPLATE, { ...sdk(), allowInternetAccess: false });
    const onlyHost = await Sandbox.create(TEMPLATE, { ...sdk(), network: { denyOut: ['0.0.0.0/0'], allowOut: [HOST] } });
    const denied = await Sandbox.create(TEMPLATE, { ...sdk(), network: { denyOut: [`${HOST}/32`] } });
    try {
      expect((await reach(off, HOST, allowed.port)).ok).toBe(false);
      expect(await reach(onlyHost, HOST, allowed.port)).toMatchObject({ ok: true, said: 'hello allowed' });
      expect((await reach(denied, HOST, allowed.port)).ok).toBe(false);
      await expect(Sandbox.create(TEMPLATE, { ...sdk(), network: { denyOut: ['example.com'] } })).rejects.toThrow(/denies no host names/);
    } finally {
      await Promise.all([off.kill(), onlyHost.kill(), denied.kill()]);
    }
  });

  it("a sandbox's rules go with it", async () => {
    const sb = await Sandbox.create(TEMPLATE, sdk());
    expect(ourChains(s.instance).length).toBe(2);
    await sb.kill();
    expect(ourChains(s.instance)).toEqual([]);
  });
});

describeDocker('a server killed hard', () => {
  it("leaves no egress rules: its watcher removes them with its sandboxes' containers", async () => {
    const allowed = await greeter('allowed');
    try {
      const s = await startE2bServer(['--egress-allow', `${HOST}:${allowed.port}`]);
      await Sandbox.create(TEMPLATE, { apiKey: s.token, apiUrl: s.env.E2B_API_URL, sandboxUrl: s.env.E2B_SANDBOX_URL, timeoutMs: 300_000 });
      expect(ourChains(s.instance)).toHaveLength(2);
      s.proc.child.kill('SIGKILL');
      await s.proc.exited;
      await waitFor(
        () =>
          labelledResources(`${INSTANCE_LABEL}=${s.instance}`).containers.length === 0 &&
          ourChains(s.instance).length === 0 &&
          instanceVolumes(s.instance).length === 0,
        60_000,
        'the watcher removed the sandbox, its rules and its toolbox volume',
      );
    } finally {
      allowed.server.close();
    }
  });
});

describeDocker('--egress-allow where the rules cannot be set', () => {
  it('refuses to start, saying what the host needs', async () => {
    // a network namespace of its own: no Docker chains there, as in a container without the host's network
    const child = spawn(
      'unshare',
      [
        '--net',
        'sh',
        '-c',
        `ip link set lo up; exec "${process.execPath}" "${SERVE_JS}" "$@"`,
        'serve',
        E2B_BUNDLE,
        '--port',
        '0',
        '--instance',
        uniqueInstance('e2b-egress'),
        '--egress-allow',
        '192.0.2.1:80',
        '--insecure-no-token',
      ],
      {
        env: { ...process.env, LOG_LEVEL: 'info' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const code = await new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
    expect(code).not.toBe(0);
    expect(out).toMatch(/--egress-allow needs rules in Docker's DOCKER-USER chain/);
    expect(out).toMatch(/NET_ADMIN/);
  });
});

/** what a TCP connection from this host to ip:port reads first */
function readFrom(ip: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = connect(port, ip);
    let got = '';
    c.on('data', (d) => (got += d.toString()));
    c.on('end', () => resolve(got.trim()));
    c.on('error', reject);
  });
}

/** the sandbox's default gateway (its bridge's host address), from its routing table */
async function gatewayOf(sb: Sandbox): Promise<string> {
  const hex = (await sb.commands.run(`awk '$2 == "00000000" {print $3}' /proc/net/route`, { user: 'root' })).stdout.trim();
  return [0, 2, 4, 6]
    .map((i) => parseInt(hex.slice(i, i + 2), 16))
    .reverse()
    .join('.');
}

/** the volumes labelled with this instance (its toolbox's, its lock markers) */
function instanceVolumes(instance: string): string[] {
  return execFileSync('docker', ['volume', 'ls', '-q', '--filter', `label=${INSTANCE_LABEL}=${instance}`], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean);
}

/** this instance's egress chains on the host */
function ourChains(instance: string): string[] {
  const tag = createHash('sha256').update(instance).digest('hex').slice(0, 6);
  return execFileSync('iptables', ['-w', '-S'], { encoding: 'utf8' })
    .split('\n')
    .flatMap((l) => /^-N (\S+)$/.exec(l)?.[1] ?? [])
    .filter((c) => c.startsWith(`OEF${tag}-`) || c.startsWith(`OEI${tag}-`));
}
