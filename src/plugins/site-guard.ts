/**
 * No cross-site door: a browser page of another site must not reach the server, though the
 * browser runs on the machine the server listens on. Two checks, before auth, on every route and
 * WebSocket upgrade (`/ws`, `/mcp`, `/episodes`, `/console/*`, the page, `/health`):
 *
 * - `Host` (DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1 sends
 *   `Host: evil.example`): a loopback name (`localhost`, `*.localhost`), an IP address (no page
 *   can rebind one: its origin is that address), or a name of `--allowed-hosts` (the TLS proxy's
 *   public name...). `*` turns the check off.
 * - `Origin` (cross-site requests: a page of evil.example opening `ws://127.0.0.1:8200/ws` or
 *   posting to `/episodes`): none (not a browser, or a same-origin GET), the server's own page
 *   (the Origin names the Host the request was sent to), a loopback page, or one of
 *   `--allowed-origins`. `*` allows any.
 *
 * A page of a listed origin (not the server's own, nor a loopback one) also gets the CORS headers
 * that let it read the answers (`Access-Control-Allow-Origin` naming it), and its preflight
 * `OPTIONS` is answered here, before auth (a preflight carries no token).
 *
 * A refusal is a 403 saying what to allow (a JSON-RPC error on `/mcp`, as the MCP spec asks),
 * logged once per peer and check; the request's own line names it (`forbidden_host`,
 * `forbidden_origin`). The body of a refused request is never read.
 */
import { isIP } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { isLoopback, normalOrigin } from '../config.js';
import { RpcCode, rpcError } from '../protocol/jsonrpc.js';
import { closeUnreadBody } from './auth.js';
import { noteRefusal } from './request-log.js';

export interface SiteGuardOptions {
  /** --allowed-hosts: names (lower case), `.name` for a name and everything under it, or `*` */
  allowedHosts: readonly string[];
  /** --allowed-origins: normalised origins (`https://host[:port]`), or `*` */
  allowedOrigins: readonly string[];
}

/** peers whose refusal was logged; past this many the oldest are forgotten (and may be logged again) */
const LOGGED_PEERS_KEPT = 1024;

/** `[::1]:8200` → `::1`, `Example.COM.:443` → `example.com`; null when it is no host */
export function hostName(hostHeader: string): string | null {
  let u: URL;
  try {
    u = new URL(`http://${hostHeader}`);
  } catch {
    return null;
  }
  if (u.username || u.password || u.pathname !== '/' || u.search || u.hash) return null;
  return u.hostname.replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
}

function isLoopbackName(name: string): boolean {
  return isLoopback(name) || name.endsWith('.localhost');
}

/** Whether a request naming this host may be answered. */
export function hostAllowed(hostHeader: string | undefined, allowed: readonly string[]): boolean {
  // HTTP/1.0 without Host: not a browser
  if (hostHeader === undefined) return true;
  if (allowed.includes('*')) return true;
  const name = hostName(hostHeader);
  if (name === null) return false;
  if (isIP(name) !== 0 || isLoopbackName(name)) return true;
  return allowed.some((a) => (a.startsWith('.') ? name === a.slice(1) || name.endsWith(a) : name === a));
}

/** an origin's host and port (the scheme's default when it names none) */
function authority(u: URL): string {
  return `${u.hostname.replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '')}:${u.port || (u.protocol === 'https:' ? '443' : '80')}`;
}

/**
 * Whether a request with this `Origin` may be answered: none (not a browser), the server's own
 * page (the origin names the host and port the request was sent to, whatever the scheme: a TLS
 * proxy in front speaks https to the browser and http to the server), a loopback page, or a listed
 * origin.
 */
export function originAllowed(origin: string | undefined, hostHeader: string | undefined, allowed: readonly string[]): boolean {
  if (origin === undefined) return true;
  if (allowed.includes('*')) return true;
  const normal = normalOrigin(origin);
  if (normal === null) return false;
  const u = new URL(normal);
  if (isLoopbackName(u.hostname.replace(/^\[(.*)\]$/, '$1'))) return true;
  if (allowed.includes(normal)) return true;
  if (hostHeader === undefined) return false;
  let sent: URL;
  try {
    sent = new URL(`${u.protocol}//${hostHeader}`);
  } catch {
    return false;
  }
  return authority(sent) === authority(u);
}

/** what a listed origin's page may send and read across origins */
const CORS = {
  methods: 'GET, POST, DELETE',
  headers: 'authorization, content-type, accept, mcp-session-id, mcp-protocol-version, last-event-id',
  expose: 'mcp-session-id, retry-after, www-authenticate',
  maxAgeS: 600,
};

/** whether a page of `origin` is allowed because it is listed (or `*`), not because it is this server's or loopback */
function listedOrigin(origin: string, allowed: readonly string[]): boolean {
  return allowed.includes('*') || allowed.includes(normalOrigin(origin) ?? '');
}

function first(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

type Refusal = { code: 'forbidden_host' | 'forbidden_origin'; message: string };

/** what to answer a request the guard refuses, or null to let it through */
export function refusalOf(req: { headers: FastifyRequest['headers'] }, o: SiteGuardOptions): Refusal | null {
  const host = first(req.headers.host);
  if (!hostAllowed(host, o.allowedHosts)) {
    return {
      code: 'forbidden_host',
      message: `this server does not answer to the host name in "Host: ${String(host).slice(0, 200)}" (a page of another site whose name now points here?); if it is this server's name, allow it with --allowed-hosts`,
    };
  }
  const origin = first(req.headers.origin);
  if (!originAllowed(origin, host, o.allowedOrigins)) {
    return {
      code: 'forbidden_origin',
      message: `a browser page of ${String(origin).slice(0, 200)} may not use this server; if it should, allow its origin with --allowed-origins`,
    };
  }
  return null;
}

async function siteGuard(app: FastifyInstance, opts: SiteGuardOptions): Promise<void> {
  const logged = new Set<string>();
  const logOnce = (req: FastifyRequest, r: Refusal) => {
    const key = `${req.ip} ${r.code}`;
    if (logged.has(key)) return;
    if (logged.size >= LOGGED_PEERS_KEPT) logged.delete(logged.values().next().value!);
    logged.add(key);
    req.log.warn(
      { event: r.code, peer: req.ip, host: first(req.headers.host)?.slice(0, 200), origin: first(req.headers.origin)?.slice(0, 200) },
      `refused a request: ${r.message} (further refusals of this peer are not logged)`,
    );
  };
  app.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
    const r = refusalOf(req, opts);
    if (r === null) {
      const origin = first(req.headers.origin);
      if (origin === undefined || !listedOrigin(origin, opts.allowedOrigins)) return;
      reply.header('access-control-allow-origin', origin).header('vary', 'Origin').header('access-control-expose-headers', CORS.expose);
      if (req.method !== 'OPTIONS' || req.headers['access-control-request-method'] === undefined) return;
      return reply
        .code(204)
        .header('access-control-allow-methods', CORS.methods)
        .header('access-control-allow-headers', CORS.headers)
        .header('access-control-max-age', String(CORS.maxAgeS))
        .send();
    }
    noteRefusal(req, r.code);
    logOnce(req, r);
    closeUnreadBody(reply).code(403);
    if (req.url.split('?')[0] === '/mcp') return reply.send(rpcError(null, RpcCode.INVALID_REQUEST, `Forbidden: ${r.message}`));
    return reply.send({ error: r.code, message: r.message });
  });
}

export default fp(siteGuard, { name: 'site-guard' });
