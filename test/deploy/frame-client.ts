/**
 * The OpenEnv frame exchange (one JSON frame out, the next frame in) over ws:// or wss://, with the
 * TLS trust and headers a deployment test needs (a self-signed CA, a spoofed X-Forwarded-For).
 */
import https from 'node:https';
import WebSocket from 'ws';

export interface OpenOptions {
  token?: string;
  /** PEM the client trusts for wss:// (the self-signed certificate) */
  ca?: string | Buffer;
  headers?: Record<string, string>;
}

export class FrameClient {
  private readonly inbox: unknown[] = [];
  private readonly waiters: { resolve: (m: unknown) => void; reject: (e: Error) => void }[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const msg = JSON.parse(data.toString());
      const w = this.waiters.shift();
      if (w) w.resolve(msg);
      else this.inbox.push(msg);
    });
    this.closed = new Promise((resolve) => {
      ws.on('close', (code, reason) => {
        for (const w of this.waiters.splice(0)) w.reject(new Error(`socket closed (${code} ${reason.toString()})`));
        resolve({ code, reason: reason.toString() });
      });
    });
  }

  /** `base` is http(s)://host:port; resolves when upgraded, rejects with `statusCode` when refused */
  static open(base: string, o: OpenOptions = {}): Promise<FrameClient> {
    const url = `${base.replace(/^http/, 'ws').replace(/\/$/, '')}/ws`;
    const headers = { ...(o.headers ?? {}), ...(o.token ? { authorization: `Bearer ${o.token}` } : {}) };
    const ws = new WebSocket(url, { headers, ca: o.ca, maxPayload: 64 * 1024 * 1024 });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(new FrameClient(ws)));
      ws.once('unexpected-response', (_req, res) => {
        reject(Object.assign(new Error(`upgrade refused: ${res.statusCode}`), { statusCode: res.statusCode }));
        ws.terminate();
      });
      ws.once('error', reject);
    });
  }

  next(timeoutMs = 120_000): Promise<any> {
    if (this.inbox.length) return Promise.resolve(this.inbox.shift());
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('no frame within the timeout')), timeoutMs);
      this.waiters.push({
        resolve: (m) => {
          clearTimeout(t);
          resolve(m);
        },
        reject: (e) => {
          clearTimeout(t);
          reject(e);
        },
      });
    });
  }

  request(frame: unknown, timeoutMs?: number): Promise<any> {
    const reply = this.next(timeoutMs);
    this.ws.send(JSON.stringify(frame));
    return reply;
  }

  reset(data: Record<string, unknown> = {}, timeoutMs?: number): Promise<any> {
    return this.request({ type: 'reset', data }, timeoutMs);
  }

  call(tool: string, args: unknown = {}): Promise<any> {
    return this.request({ type: 'step', data: { type: 'call_tool', tool_name: tool, arguments: args } });
  }

  async close(): Promise<void> {
    if (this.ws.readyState === WebSocket.OPEN) {
      this.ws.send(JSON.stringify({ type: 'close' }));
      this.ws.close();
    } else if (this.ws.readyState === WebSocket.CONNECTING) {
      this.ws.terminate();
    }
    await this.closed;
  }
}

/** GET over http(s) with an optional trusted CA; the body as text */
export function get(url: string, o: { token?: string; ca?: string | Buffer } = {}): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  const headers: Record<string, string> = o.token ? { authorization: `Bearer ${o.token}` } : {};
  if (url.startsWith('http://')) {
    return fetch(url, { headers, signal: AbortSignal.timeout(30_000) }).then(async (r) => ({
      status: r.status,
      headers: Object.fromEntries(r.headers),
      body: await r.text(),
    }));
  }
  return new Promise((resolve, reject) => {
    const req = https.get(url, { headers, ca: o.ca, timeout: 30_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on('error', reject);
  });
}

/** plays the fixture's fx-echo-0 to its end: reset, echo, end_turn; returns the frames */
export async function playEchoEpisode(c: FrameClient, taskId = 'fx-echo-0'): Promise<{ reset: any; echo: any; end: any }> {
  const reset = await c.reset({ task_id: taskId });
  const echo = await c.call('echo', { text: 'hello' });
  const end = await c.call('end_turn', { answer: 'hello' });
  return { reset, echo, end };
}
