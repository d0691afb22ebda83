/**
 * One HTTP request over node:http (not fetch: in a warm burst of 256 resets, fetch's machinery was
 * the largest share of the server's CPU; docs/warm-pool.md) with a deadline and a bounded body:
 * whoever answers costs this process at most `max` bytes. The env client's transport, and the
 * warm pool's hand-out check.
 */
import http, { type IncomingHttpHeaders } from 'node:http';
import { ENV_CONNECTION_IDLE_MS } from '../defaults.js';

/** each env's own keep-alive connection, by its handle (collected with it) */
const keptConnections = new WeakMap<object, http.Agent>();

/**
 * The one keep-alive connection kept for `owner` (a deployed env's handle): whoever speaks to that
 * env first opens it (for a pooled env, the pool's hand-out check) and every later call reuses it
 * while it is idle less than ENV_CONNECTION_IDLE_MS (the episode's /reset and tool calls), so a
 * warm reset costs one TCP connection, not two. Never shared between owners: a recycled network
 * gives a later env the same address, and it has a handle of its own.
 */
export function keptConnection(owner: object): http.Agent {
  let agent = keptConnections.get(owner);
  if (!agent) {
    agent = new http.Agent({ keepAlive: true, timeout: ENV_CONNECTION_IDLE_MS });
    keptConnections.set(owner, agent);
  }
  return agent;
}

/** A call's deadline, joined with its caller's signal: what `signal` aborts, and whether the deadline passed. */
export interface Deadline {
  signal: AbortSignal;
  timedOut(): boolean;
  /** clears the timer and the caller's listener: call it once the call is over, however it ended */
  done(): void;
}

/**
 * `ms` from now, or sooner when `signal` aborts. One plain timer and controller per call, where
 * AbortSignal.timeout with AbortSignal.any costs a weakly held signal of each kind and their
 * finalization (measured in a warm burst of 256: about 2 % of the server's CPU, and garbage).
 */
export function deadline(ms: number, signal?: AbortSignal): Deadline {
  const ctl = new AbortController();
  let passed = false;
  const timer = setTimeout(() => {
    passed = true;
    ctl.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError'));
  }, ms);
  const onAbort = () => ctl.abort(signal!.reason);
  if (signal?.aborted) ctl.abort(signal.reason);
  else signal?.addEventListener('abort', onAbort, { once: true });
  return {
    signal: ctl.signal,
    timedOut: () => passed,
    done: () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    },
  };
}

/** An answer as read off the wire: its status, headers and body (or how far past the bound it went). */
export interface RawReply {
  status: number;
  headers: IncomingHttpHeaders;
  body: { text: string } | { over: number };
}

/**
 * One HTTP request, its body read up to `max` bytes (past it, or past a declared length over it,
 * the connection is dropped and `over` says how much). A redirect is an answer like any other:
 * node:http never follows one. Rejects with the request's error (an AbortError when `signal` aborts).
 */
export interface BoundedRequest {
  /** where: an http URL's parts (parsed once by whoever calls one place often) */
  hostname: string;
  port: string;
  path: string;
  method: string;
  headers?: Record<string, string>;
  body?: string;
  signal: AbortSignal;
  /** a keep-alive agent of the caller's, or false for a connection of its own */
  agent: http.Agent | false;
  /** bytes of body read at most */
  max: number;
}

export function requestBounded(r: BoundedRequest): Promise<RawReply> {
  const { max } = r;
  return new Promise<RawReply>((resolve, reject) => {
    const req = http.request(
      { hostname: r.hostname, port: r.port, path: r.path, method: r.method, headers: r.headers ?? {}, signal: r.signal, agent: r.agent },
      (res) => {
        const status = res.statusCode ?? 0;
        const declared = Number(res.headers['content-length'] ?? NaN);
        if (declared > max) {
          req.destroy();
          resolve({ status, headers: res.headers, body: { over: declared } });
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > max) {
            req.destroy();
            resolve({ status, headers: res.headers, body: { over: size } });
            return;
          }
          chunks.push(c);
        });
        res.on('end', () =>
          resolve({ status, headers: res.headers, body: { text: (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)).toString('utf8') } }),
        );
        res.on('error', reject);
        res.on('aborted', () => reject(new Error('the env closed the connection mid-answer')));
      },
    );
    req.on('error', reject);
    req.end(r.body);
  });
}

/**
 * GET `url` within `timeoutMs`: its status (the body is not kept), or null when nothing answered
 * (the pool's hand-out check); over `agent`'s connection, else one of its own closed after
 */
export async function statusOf(url: string, timeoutMs: number, agent: http.Agent | false = false): Promise<number | null> {
  const d = deadline(timeoutMs);
  try {
    const u = new URL(url);
    const reply = await requestBounded({
      hostname: u.hostname,
      port: u.port,
      path: u.pathname + u.search,
      method: 'GET',
      signal: d.signal,
      agent,
      max: 64 * 1024,
    });
    return reply.status;
  } catch {
    return null;
  } finally {
    d.done();
  }
}

/** one header's value (the first, should it come more than once), or null */
export function headerOf(headers: IncomingHttpHeaders, name: string): string | null {
  const v = headers[name.toLowerCase()];
  return (Array.isArray(v) ? v[0] : v) ?? null;
}
