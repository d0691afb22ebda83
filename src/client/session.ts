/**
 * One `/ws` session of a bundle server, as slime's rollouts hold one: a frame out, the next frame
 * in, each within its own deadline. The client `openenv-bundle eval` and `play` play through, and
 * the one the scripts and tests drive servers with (scripts/lib/ws-client.ts). A connection that
 * drops, a refused upgrade or a reply that does not come is a SessionError (the server's side
 * failed, never the model's).
 */
import WebSocket from 'ws';

export type SessionFailure = 'connection_lost' | 'reply_timeout';

export class SessionError extends Error {
  override readonly name = 'SessionError';
  constructor(
    readonly reason: SessionFailure,
    message: string,
    /** the HTTP status of a refused upgrade */
    readonly statusCode?: number,
  ) {
    super(message);
  }
}

/** A frame as it came: its type, and its data unchecked (the caller parses what it expects). */
export interface Frame {
  type: string;
  data?: Record<string, unknown>;
}

export interface OpenOptions {
  token?: string | null;
  /** how long the upgrade may take (default 30 s) */
  timeoutMs?: number;
  /** a PEM to trust for wss:// (a self-signed certificate) */
  ca?: string | Buffer;
  headers?: Record<string, string>;
  /** aborting (Ctrl-C) ends the handshake at once, rejecting with the signal's reason */
  signal?: AbortSignal;
}

export interface WaitOptions {
  /** default 120 s */
  timeoutMs?: number;
  /** names the budget in the timeout's message (`--reset-timeout`) */
  what?: string;
  /** aborting rejects the wait with the signal's reason */
  signal?: AbortSignal;
}

const DEFAULT_WAIT_MS = 120_000;

interface Waiter {
  resolve(f: Frame): void;
  reject(e: Error): void;
}

export class ServerSession {
  private readonly inbox: Frame[] = [];
  private readonly waiters: Waiter[] = [];
  /** resolves once the socket has closed, with the server's code and reason */
  readonly closed: Promise<{ code: number; reason: string }>;
  closeInfo: { code: number; reason: string } | null = null;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      let frame: Frame;
      try {
        frame = JSON.parse(data.toString()) as Frame;
      } catch {
        frame = { type: 'error', data: { code: 'INVALID_JSON', message: 'the server sent a frame that is not JSON' } };
      }
      const w = this.waiters.shift();
      if (w) w.resolve(frame);
      else this.inbox.push(frame);
    });
    this.closed = new Promise((resolve) => {
      ws.on('close', (code, reason) => {
        this.closeInfo = { code, reason: reason.toString() };
        const why = this.closedMessage();
        for (const w of this.waiters.splice(0)) w.reject(new SessionError('connection_lost', why));
        resolve(this.closeInfo);
      });
    });
    ws.on('error', () => undefined);
  }

  /** Opens `<url>/ws` (http(s):// or ws(s)://; /ws added when missing); a refused upgrade is a SessionError with its statusCode. */
  static open(url: string, opts: OpenOptions = {}): Promise<ServerSession> {
    const base = url.replace(/^http/i, 'ws').replace(/\/+$/, '');
    const target = base.endsWith('/ws') ? base : `${base}/ws`;
    const headers = { ...(opts.headers ?? {}), ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}) };
    const ws = new WebSocket(target, { headers, ca: opts.ca, maxPayload: 64 * 1024 * 1024, handshakeTimeout: opts.timeoutMs ?? 30_000 });
    const { signal } = opts;
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        ws.terminate();
        reject(signal!.reason as Error);
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      ws.once('close', () => signal?.removeEventListener('abort', onAbort));
      ws.once('open', () => {
        signal?.removeEventListener('abort', onAbort);
        resolve(new ServerSession(ws));
      });
      ws.once('unexpected-response', (_req, res) => {
        const hint = res.statusCode === 401 ? ' (the server needs its bearer token)' : '';
        reject(new SessionError('connection_lost', `the server refused the WebSocket at ${target}: HTTP ${res.statusCode}${hint}`, res.statusCode));
        ws.terminate();
      });
      ws.once('error', (e) => reject(new SessionError('connection_lost', `cannot open ${target}: ${e.message}`)));
    });
  }

  private closedMessage(): string {
    const c = this.closeInfo!;
    return `the server closed the session (${c.code}${c.reason ? ` ${c.reason}` : ''})`;
  }

  /** The next frame the server sends, within the wait's deadline. */
  next(opts: WaitOptions = {}): Promise<Frame> {
    const queued = this.inbox.shift();
    if (queued) return Promise.resolve(queued);
    if (this.closeInfo) return Promise.reject(new SessionError('connection_lost', this.closedMessage()));
    const { signal } = opts;
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    const timeoutMs = opts.timeoutMs ?? DEFAULT_WAIT_MS;
    return new Promise<Frame>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        const i = this.waiters.indexOf(waiter);
        if (i !== -1) this.waiters.splice(i, 1);
      };
      const waiter: Waiter = {
        resolve: (f) => {
          done();
          resolve(f);
        },
        reject: (e) => {
          done();
          reject(e);
        },
      };
      const onAbort = () => waiter.reject(signal!.reason as Error);
      const timer = setTimeout(
        () => waiter.reject(new SessionError('reply_timeout', `no reply within ${opts.what ?? 'the timeout'} (${timeoutMs / 1000} s)`)),
        timeoutMs,
      );
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  send(frame: unknown): void {
    this.sendRaw(JSON.stringify(frame));
  }

  /** Sends a frame's text as it is; on a closed socket it is dropped (the next wait says why). */
  sendRaw(text: string): void {
    this.ws.send(text);
  }

  /** Sends a frame and waits for the reply (the next frame). */
  request(frame: unknown, opts: WaitOptions = {}): Promise<Frame> {
    if (this.closeInfo) return Promise.reject(new SessionError('connection_lost', this.closedMessage()));
    const reply = this.next(opts);
    this.send(frame);
    return reply;
  }

  reset(data: Record<string, unknown> = {}, opts?: WaitOptions): Promise<Frame> {
    return this.request({ type: 'reset', data }, opts);
  }

  call(tool: string, args: unknown = {}, opts?: WaitOptions): Promise<Frame> {
    return this.request({ type: 'step', data: { type: 'call_tool', tool_name: tool, arguments: args } }, opts);
  }

  listTools(opts?: WaitOptions): Promise<Frame> {
    return this.request({ type: 'step', data: { type: 'list_tools' } }, opts);
  }

  state(opts?: WaitOptions): Promise<Frame> {
    return this.request({ type: 'state' }, opts);
  }

  /** Ends the session (the server tears its episode down when the socket closes); resolves once closed. */
  async close(): Promise<void> {
    if (this.ws.readyState === WebSocket.OPEN) {
      try {
        this.ws.send(JSON.stringify({ type: 'close' }));
      } catch {
        // already going
      }
      this.ws.close(1000);
    } else if (this.ws.readyState === WebSocket.CONNECTING) {
      this.ws.terminate();
    }
    await this.closed;
  }

  terminate(): void {
    this.ws.terminate();
  }
}
