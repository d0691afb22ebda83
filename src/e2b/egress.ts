/**
 * The egress allowlist (docs/e2b.md, "The way back to the trainer"): the operator's
 * `--egress-allow HOST:PORT…` is all any sandbox may reach (each host resolved to its IPv4
 * addresses at start), and within it a sandbox's own E2B settings choose, as E2B reads them:
 * everything allowed by default; `allow_internet_access: false` denies all (as `denyOut:
 * ["0.0.0.0/0"]`); `denyOut` denies addresses and CIDRs; `allowOut` (addresses, CIDRs, host
 * names, `*.name`) allows back what a deny took, and wins over it. The result is the
 * destinations (address, TCP port) the sandbox's deploy opens; nothing else is reachable.
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { parseIPv4 } from '../util/cidr.js';
import type { EgressDestination } from '../sandbox/sandbox.js';
import { E2bApiError } from './errors.js';

/** one entry of --egress-allow, its host resolved */
export interface AllowedEntry {
  host: string;
  port: number;
  ips: string[];
}

/** `HOST:PORT` as --egress-allow takes it */
export const EGRESS_ENTRY = /^([A-Za-z0-9.-]{1,253}):(\d{1,5})$/;

/** resolves each entry's host to its IPv4 addresses; rejects naming one that has none */
export async function resolveEgressAllow(list: readonly string[]): Promise<AllowedEntry[]> {
  const out: AllowedEntry[] = [];
  for (const item of list) {
    const m = EGRESS_ENTRY.exec(item)!;
    const host = m[1]!.toLowerCase();
    const port = Number(m[2]);
    if (isIP(host) === 4) {
      out.push({ host, port, ips: [host] });
      continue;
    }
    let ips: string[];
    try {
      ips = (await lookup(host, { all: true, family: 4 })).map((a) => a.address);
    } catch (e) {
      throw new Error(`--egress-allow ${item}: ${host} does not resolve to an IPv4 address here (${(e as Error).message})`, { cause: e });
    }
    if (ips.length === 0) throw new Error(`--egress-allow ${item}: ${host} does not resolve to an IPv4 address here`);
    out.push({ host, port, ips: [...new Set(ips)] });
  }
  return out;
}

/** an address or CIDR of E2B's network settings as a range, or null when it is a host name */
function rangeOf(entry: string): { base: number; size: number } | null {
  const [addr, bits] = entry.split('/');
  const ip = parseIPv4(addr!);
  if (ip === null) return null;
  const prefix = bits === undefined ? 32 : Number(bits);
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > 32)
    throw new E2bApiError(400, `network: ${JSON.stringify(entry)} is no CIDR (the prefix is 0 to 32)`);
  const size = 2 ** (32 - prefix);
  return { base: ip - (ip % size), size };
}

function inRange(ip: string, r: { base: number; size: number }): boolean {
  const n = parseIPv4(ip);
  return n !== null && n >= r.base && n < r.base + r.size;
}

const HOST_NAME = /^(\*\.)?[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

/** whether an `allowOut` entry names this entry (its address, a CIDR holding it, its host name, or `*.` a name above it) */
function names(entry: string, allowed: AllowedEntry, ip: string): boolean {
  const range = rangeOf(entry);
  if (range) return inRange(ip, range);
  const e = entry.toLowerCase();
  if (!HOST_NAME.test(e)) throw new E2bApiError(400, `network.allowOut: ${JSON.stringify(entry.slice(0, 100))} is no address, CIDR or host name`);
  return e.startsWith('*.') ? allowed.host.endsWith(e.slice(1)) : allowed.host === e;
}

/** The destinations a sandbox's deploy opens: its settings within the operator's list. */
export function egressFor(
  allow: readonly AllowedEntry[],
  sandbox: { allowInternetAccess: boolean | null; network: { allowOut?: string[]; denyOut?: string[] } | null },
): EgressDestination[] {
  const denyOut = sandbox.network?.denyOut ?? [];
  const allowOut = sandbox.network?.allowOut ?? [];
  const denies = denyOut.map((d) => {
    const r = rangeOf(d);
    if (!r) throw new E2bApiError(400, `network.denyOut: ${JSON.stringify(d.slice(0, 100))} is no address or CIDR (E2B denies no host names)`);
    return r;
  });
  const out: EgressDestination[] = [];
  for (const a of allow) {
    for (const ip of a.ips) {
      const denied = sandbox.allowInternetAccess === false || denies.some((r) => inRange(ip, r));
      const allowedBack = allowOut.some((e) => names(e, a, ip));
      if (denied && !allowedBack) continue;
      if (!out.some((d) => d.ip === ip && d.port === a.port)) out.push({ ip, port: a.port });
    }
  }
  // every allowOut entry is checked, even where the operator's list is empty
  for (const e of allowOut)
    if (!rangeOf(e) && !HOST_NAME.test(e.toLowerCase()))
      throw new E2bApiError(400, `network.allowOut: ${JSON.stringify(e.slice(0, 100))} is no address, CIDR or host name`);
  return out;
}
