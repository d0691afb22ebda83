/** IPv4 CIDR ranges (the subnet pool, episode subnets): parsed and checked in one place. */
import { networkInterfaces } from 'node:os';

export interface Cidr {
  /** the first address, as a 32-bit unsigned number */
  base: number;
  prefix: number;
}

export function parseIPv4(ip: string): number | null {
  const parts = ip.split('.');
  if (parts.length !== 4) return null;
  let n = 0;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || Number(p) > 255) return null;
    n = n * 256 + Number(p);
  }
  return n;
}

export function formatIPv4(n: number): string {
  return [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256).join('.');
}

/** The range, or what is wrong with it (a sentence for an error message). */
export function parseCidr(cidr: string): Cidr | { problem: string } {
  const m = /^([\d.]+)\/(\d{1,2})$/.exec(cidr.trim());
  const base = m ? parseIPv4(m[1]!) : null;
  if (!m || base === null) return { problem: `expected an IPv4 CIDR like 10.213.0.0/16, got ${JSON.stringify(cidr)}` };
  const prefix = Number(m[2]);
  if (prefix < 8 || prefix > 30) return { problem: `the prefix must be between /8 and /30, got /${prefix}` };
  if (base % 2 ** (32 - prefix) !== 0) return { problem: `${cidr} is not aligned: its host bits are not zero` };
  return { base, prefix };
}

/** whether the address `ip` (parseIPv4's number) is inside the range */
export function inSubnet(ip: number, c: Cidr): boolean {
  const size = 2 ** (32 - c.prefix);
  return ip >= c.base && ip < c.base + size;
}

/**
 * This namespace's own IPv4 address inside the subnet, among the interfaces up and running (what
 * Node lists): in a container attached to the network, the container's address there. On the host
 * the bridge has no carrier until a container joins it, so the host placement names its address.
 */
export function localAddressIn(subnet: string, interfaces = networkInterfaces()): string | null {
  const c = parseCidr(subnet);
  if ('problem' in c) return null;
  for (const addrs of Object.values(interfaces)) {
    for (const a of addrs ?? []) {
      const ip = a.family === 'IPv4' ? parseIPv4(a.address) : null;
      if (ip !== null && inSubnet(ip, c)) return a.address;
    }
  }
  return null;
}
