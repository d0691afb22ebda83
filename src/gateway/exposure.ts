/**
 * What, besides the gateway, an episode's env could reach through the server's own network
 * namespace, read from /proc (Linux), so the server can say so at start:
 * - on the host, every TCP listener bound to a wildcard address (0.0.0.0, ::) answers on each
 *   episode bridge's host address too, the env's default gateway (docs/gateway.md);
 * - in a container attached to every episode network, IPv4 forwarding on would route an env's
 *   hand-made packets (CAP_NET_RAW) on to the container's other networks.
 */
import { readFileSync } from 'node:fs';

/** the ports of TCP sockets listening on a wildcard address, from /proc/net/tcp and tcp6 ('' when unreadable) */
export function wildcardListenPorts(tables: string[] = readTables()): number[] {
  const ports = new Set<number>();
  for (const table of tables) {
    for (const line of table.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 4 || f[3] !== '0A') continue; // 0A: LISTEN
      const [addr, port] = f[1]!.split(':');
      if (addr !== undefined && port !== undefined && /^0+$/.test(addr)) ports.add(parseInt(port, 16));
    }
  }
  return [...ports].sort((a, b) => a - b);
}

function readTables(): string[] {
  return ['/proc/net/tcp', '/proc/net/tcp6'].map((f) => {
    try {
      return readFileSync(f, 'utf8');
    } catch {
      return '';
    }
  });
}

/** net.ipv4.ip_forward of this network namespace (null: unreadable, not Linux) */
export function ipv4Forwarding(file = '/proc/sys/net/ipv4/ip_forward'): boolean | null {
  try {
    return readFileSync(file, 'utf8').trim() === '1';
  } catch {
    return null;
  }
}
