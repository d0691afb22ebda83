/**
 * The pieces of the network design that need no engine (network.docker.test.ts proves the design
 * itself): the API's guard against episode sources, the door's own address in a subnet, and what
 * the server's namespace exposes (wildcard listeners, IPv4 forwarding).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, get, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ipv4Forwarding, localAddressIn, refuseEpisodeSources, wildcardListenPorts } from '../../src/gateway/index.js';

const servers: Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

async function served(host: string, guardPool?: string): Promise<{ port: number; dropped: () => number }> {
  const s = createServer((_q, r) => r.end('api'));
  servers.push(s);
  const dropped = guardPool ? refuseEpisodeSources(s, guardPool) : () => 0;
  await new Promise<void>((r) => s.listen(0, host, r));
  return { port: (s.address() as AddressInfo).port, dropped };
}

const fetchFrom = (port: number): Promise<string> =>
  new Promise((resolve) => {
    get({ host: '127.0.0.1', port, path: '/health' }, (res) => {
      let t = '';
      res.on('data', (c: Buffer) => (t += c.toString()));
      res.on('end', () => resolve(`http ${res.statusCode} ${t}`));
    }).on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
  });

describe('refuseEpisodeSources', () => {
  it('drops a connection from the pool before answering anything (even /health), and serves every other source', async () => {
    const guarded = await served('127.0.0.1', '127.0.0.0/8');
    expect(await fetchFrom(guarded.port)).toBe('ECONNRESET');
    expect(guarded.dropped()).toBe(1);
    const other = await served('127.0.0.1', '10.213.0.0/16');
    expect(await fetchFrom(other.port)).toBe('http 200 api');
    expect(other.dropped()).toBe(0);
    expect(() => refuseEpisodeSources(createServer(), 'nonsense')).toThrow(/subnet pool/);
  });
});

describe('localAddressIn', () => {
  const ifaces = {
    lo: [{ address: '127.0.0.1', family: 'IPv4', internal: true, netmask: '255.0.0.0', mac: '', cidr: '127.0.0.1/8' }],
    eth1: [
      { address: 'fe80::1', family: 'IPv6', internal: false, netmask: 'ffff::', mac: '', cidr: 'fe80::1/64', scopeid: 1 },
      { address: '10.213.0.18', family: 'IPv4', internal: false, netmask: '255.255.255.240', mac: '', cidr: '10.213.0.18/28' },
    ],
  } as unknown as ReturnType<typeof import('node:os').networkInterfaces>;

  it('the address of this namespace inside the subnet, or null', () => {
    expect(localAddressIn('10.213.0.16/28', ifaces)).toBe('10.213.0.18');
    expect(localAddressIn('10.213.0.32/28', ifaces)).toBeNull();
    expect(localAddressIn('not a cidr', ifaces)).toBeNull();
    expect(localAddressIn('127.0.0.0/8')).toBe('127.0.0.1');
  });
});

describe('exposure', () => {
  it('wildcard listeners from /proc/net/tcp and tcp6: LISTEN on 0.0.0.0 or ::, not on one address, not other states', () => {
    const tcp = [
      '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode',
      '   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1',
      '   1: 0100007F:2008 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1',
      '   2: 00000000:1F90 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 3 1',
    ].join('\n');
    const tcp6 = [
      '  sl  local_address                         remote_address                        st',
      '   0: 00000000000000000000000000000000:1538 00000000000000000000000000000000:0000 0A 0',
    ].join('\n');
    expect(wildcardListenPorts([tcp, tcp6])).toEqual([22, 5432]);
  });

  it('on this machine: a listener of ours on 0.0.0.0 is seen, one on 127.0.0.1 is not', async () => {
    const wild = await served('0.0.0.0');
    const local = await served('127.0.0.1');
    const ports = wildcardListenPorts();
    expect(ports).toContain(wild.port);
    expect(ports).not.toContain(local.port);
  });

  it('IPv4 forwarding, read from its sysctl file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fwd-'));
    try {
      writeFileSync(join(dir, 'on'), '1\n');
      writeFileSync(join(dir, 'off'), '0\n');
      expect(ipv4Forwarding(join(dir, 'on'))).toBe(true);
      expect(ipv4Forwarding(join(dir, 'off'))).toBe(false);
      expect(ipv4Forwarding(join(dir, 'missing'))).toBeNull();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
