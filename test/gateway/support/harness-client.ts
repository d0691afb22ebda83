/**
 * What a harness does with the variables the gateway gave it, for the tests: JSON calls and
 * streamed calls whose events are read as they arrive, over real HTTP.
 */
import { request } from 'node:http';
import type { Issued, ModelCallRecord, ModelGateway } from '../../../src/gateway/index.js';
import type { GatewayEnd } from '../../../src/gateway/index.js';

export interface JsonReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
}

/** a call with the episode's key (or `key`, or none with null) as a Bearer token */
export async function call(
  issued: Issued,
  path: string,
  body?: unknown,
  opts: { key?: string | null; headers?: Record<string, string>; method?: string } = {},
): Promise<JsonReply> {
  const key = opts.key === undefined ? issued.credential : opts.key;
  const r = await fetch(issued.origin + path, {
    method: opts.method ?? (body === undefined ? 'GET' : 'POST'),
    headers: {
      ...(key !== null ? { authorization: `Bearer ${key}` } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...opts.headers,
    },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // a stream or a non-JSON body: kept as text
  }
  return { status: r.status, headers: Object.fromEntries(r.headers.entries()), body: parsed };
}

export interface OpenStream {
  status: number;
  /** the raw text received so far */
  text(): string;
  /** resolves once the text received holds `needle` */
  until(needle: string, timeoutMs?: number): Promise<void>;
  /** resolves with the whole text when the stream ends */
  done: Promise<string>;
  cancel(): void;
}

/** a streamed call, read chunk by chunk as the gateway writes it */
export async function openStream(issued: Issued, path: string, body: unknown, headers: Record<string, string> = {}): Promise<OpenStream> {
  const ctl = new AbortController();
  const r = await fetch(issued.origin + path, {
    method: 'POST',
    headers: { authorization: `Bearer ${issued.credential}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
    signal: ctl.signal,
  });
  let text = '';
  const listeners = new Set<() => void>();
  const reader = r.body!.getReader();
  const decoder = new TextDecoder();
  const done = (async () => {
    try {
      for (;;) {
        const { value, done: end } = await reader.read();
        if (end) break;
        text += decoder.decode(value, { stream: true });
        for (const l of listeners) l();
      }
    } catch {
      // cancelled
    }
    for (const l of listeners) l();
    return text;
  })();
  return {
    status: r.status,
    text: () => text,
    until(needle, timeoutMs = 5000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (text.includes(needle)) {
            listeners.delete(check);
            clearTimeout(t);
            resolve();
          }
        };
        const t = setTimeout(() => {
          listeners.delete(check);
          reject(new Error(`the stream did not bring ${JSON.stringify(needle)} within ${timeoutMs} ms; got ${JSON.stringify(text.slice(-400))}`));
        }, timeoutMs);
        listeners.add(check);
        check();
      });
    },
    done,
    cancel: () => ctl.abort(),
  };
}

/** a raw request from a chosen local address (for the door's source check) */
export function callFrom(localAddress: string, issued: Issued, path: string): Promise<{ status: number } | { error: string }> {
  const u = new URL(issued.origin + path);
  return new Promise((resolve) => {
    const req = request(
      { host: u.hostname, port: u.port, path: u.pathname, localAddress, headers: { authorization: `Bearer ${issued.credential}` } },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
      },
    );
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }));
    req.end();
  });
}

/** the observer the tests give the gateway: every record and end, kept */
export class Observed {
  records: ModelCallRecord[] = [];
  ends: { episode: string; end: GatewayEnd }[] = [];
  readonly observer = {
    call: (r: ModelCallRecord) => this.records.push(r),
    ended: (episode: string, end: GatewayEnd) => this.ends.push({ episode, end }),
  };
  of(episode: string): ModelCallRecord[] {
    return this.records.filter((r) => r.episode_id === episode);
  }
  last(episode: string): ModelCallRecord {
    const rs = this.of(episode);
    if (rs.length === 0) throw new Error(`no record of ${episode}`);
    return rs[rs.length - 1]!;
  }
  endsOf(episode: string): GatewayEnd[] {
    return this.ends.filter((e) => e.episode === episode).map((e) => e.end);
  }
}

/** the loopback door every fast test uses: 127.0.0.1, any loopback source */
export const LOOPBACK_DOOR = { address: '127.0.0.1', subnet: '127.0.0.0/8' };

export async function waitUntil(cond: () => boolean, timeoutMs = 5000, what = 'the condition'): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`${what} did not hold within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export type { ModelGateway };
