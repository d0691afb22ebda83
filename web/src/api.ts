/**
 * Every data request of the page: relative to the page (so a TLS proxy's prefix or
 * --token-in-path's /t/<token>/ carries over), with `Authorization: Bearer` when a token was
 * given. The token lives in memory; "remember in this tab" also keeps it in sessionStorage.
 * It never goes in a URL. Live updates: NDJSON read from a fetch() response (not EventSource,
 * which cannot send the header).
 */

import type { StreamMessage } from './types';

const STORAGE_KEY = 'openenv-console-token';

let token: string | null = null;
try {
  token = sessionStorage.getItem(STORAGE_KEY);
} catch {
  token = null;
}

const unauthorizedListeners = new Set<(message: string) => void>();

export function hasToken(): boolean {
  return token !== null;
}

export function setToken(t: string | null, remember: boolean): void {
  token = t;
  try {
    if (t !== null && remember) sessionStorage.setItem(STORAGE_KEY, t);
    else sessionStorage.removeItem(STORAGE_KEY);
  } catch {
    // storage may be off: memory only
  }
}

/** called with the server's message whenever a request is refused with 401 */
export function onUnauthorized(fn: (message: string) => void): () => void {
  unauthorizedListeners.add(fn);
  return () => unauthorizedListeners.delete(fn);
}

/** `console/overview` → the server's URL for it, beside the page's /web/ */
export function apiUrl(path: string): string {
  return new URL(path.replace(/^\//, ''), new URL('../', document.baseURI)).toString();
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
    message: string,
  ) {
    super(message);
  }
}

function headers(json: boolean): Record<string, string> {
  const h: Record<string, string> = { accept: 'application/json' };
  if (json) h['content-type'] = 'application/json';
  if (token !== null) h.authorization = `Bearer ${token}`;
  return h;
}

async function check(res: Response): Promise<unknown> {
  const text = await res.text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = text;
  }
  if (!res.ok) {
    const message = (body as { message?: string } | null)?.message ?? `HTTP ${res.status}`;
    if (res.status === 401) for (const fn of unauthorizedListeners) fn(message);
    throw new ApiError(res.status, body, message);
  }
  return body;
}

export async function api<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
  const res = await fetch(apiUrl(path), {
    method,
    headers: headers(body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
    cache: 'no-store',
    credentials: 'omit',
  });
  return (await check(res)) as T;
}

export const get = <T>(path: string, signal?: AbortSignal) => api<T>('GET', path, undefined, signal);

/**
 * Reads an NDJSON stream until `signal` aborts, reconnecting after a dropped connection (the
 * server ends streams when it stops). A 401 stops it and tells the listeners.
 */
export async function stream(path: string, onMessage: (m: StreamMessage) => void, signal: AbortSignal, onState?: (connected: boolean) => void): Promise<void> {
  let delay = 500;
  while (!signal.aborted) {
    try {
      const res = await fetch(apiUrl(path), { headers: headers(false), signal, cache: 'no-store', credentials: 'omit' });
      if (!res.ok || !res.body) {
        await check(res);
        throw new Error(`HTTP ${res.status}`);
      }
      onState?.(true);
      delay = 500;
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i: number;
        while ((i = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          if (line.trim()) onMessage(JSON.parse(line) as StreamMessage);
        }
      }
    } catch (e) {
      if (signal.aborted) return;
      if (e instanceof ApiError && (e.status === 401 || e.status === 404)) {
        onState?.(false);
        return;
      }
    }
    onState?.(false);
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 5000);
  }
}

/**
 * A request that outlives the page (keepalive: sent even as the tab closes), with the header:
 * the playground ends its episode this way when the page goes away.
 */
export function sendOnExit(method: string, path: string): void {
  try {
    void fetch(apiUrl(path), { method, headers: headers(false), keepalive: true, cache: 'no-store', credentials: 'omit' }).catch(() => undefined);
  } catch {
    // the page is going away: nothing to tell
  }
}

/** saves JSON as a file through a blob URL (the data came with the header; no token in a link) */
export function download(name: string, data: unknown): void {
  const url = URL.createObjectURL(new Blob([JSON.stringify(data, null, 2)], { type: 'application/json' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
