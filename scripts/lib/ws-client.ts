/**
 * A minimal OpenEnv-style WebSocket client for tests and scripts (the bench, the soak): one JSON
 * frame out, the next frame in. Replies are returned as parsed JSON, untyped: each caller asserts
 * the shape it expects next.
 */
import WebSocket from 'ws';

export class WsClient {
  private readonly inbox: unknown[] = [];
  private readonly waiters: { resolve: (m: unknown) => void; reject: (e: Error) => void }[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  closeInfo: { code: number; reason: string } | null = null;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const msg = JSON.parse(data.toString());
      const w = this.waiters.shift();
      if (w) w.resolve(msg);
      else this.inbox.push(msg);
    });
    this.closed = new Promise((resolve) => {
      ws.on('close', (code, reason) => {
        this.closeInfo = { code, reason: reason.toString() };
        for (const w of this.waiters.splice(0)) w.reject(new Error(`socket closed (${code} ${reason.toString()})`));
        resolve(this.closeInfo);
      });
    });
  }

  /**
   * Opens `url` (http(s):// or ws(s)://; /ws appended when missing). `ca` is a PEM to trust for
   * wss:// (a self-signed certificate); a refused upgrade rejects with its `statusCode`.
   */
  static open(url: string, token?: string, opts: { ca?: string | Buffer; headers?: Record<string, string> } = {}): Promise<WsClient> {
    const base = url.replace(/^http/, 'ws').replace(/\/$/, '');
    const target = base.endsWith('/ws') ? base : `${base}/ws`;
    const headers = { ...(opts.headers ?? {}), ...(token ? { authorization: `Bearer ${token}` } : {}) };
    const ws = new WebSocket(target, { headers, ca: opts.ca, maxPayload: 64 * 1024 * 1024 });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(new WsClient(ws)));
      ws.once('unexpected-response', (_req, res) => {
        reject(Object.assign(new Error(`upgrade refused: ${res.statusCode}`), { statusCode: res.statusCode }));
        ws.terminate();
      });
      ws.once('error', reject);
    });
  }

  next(timeoutMs = 120_000): Promise<any> {
    if (this.inbox.length) return Promise.resolve(this.inbox.shift());
    if (this.closeInfo) return Promise.reject(new Error(`socket closed (${this.closeInfo.code})`));
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

  sendRaw(text: string): void {
    this.ws.send(text);
  }

  /** sends a frame and resolves with the reply */
  async request(frame: unknown, timeoutMs?: number): Promise<any> {
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

  listTools(): Promise<any> {
    return this.request({ type: 'step', data: { type: 'list_tools' } });
  }

  state(): Promise<any> {
    return this.request({ type: 'state' });
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

  terminate(): void {
    this.ws.terminate();
  }
}
