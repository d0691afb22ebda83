/**
 * One `/ws` session of a bundle server, as slime's rollouts hold one: a frame out, the next frame
 * in, each within its own deadline. The client `openenv-bundle eval` and `play` play through, and
 * the one the scripts and tests drive servers with (scripts/lib/ws-client.ts). A connection that
 * drops, a refused upgrade, a reply that does not come or a frame that is not the protocol's is a
 * SessionError (the server's side failed, never the model's).
 *
 * The frames come as the protocol's ServerFrame, parsed with its schema (`next`, `request` and
 * the steps); the test rig, which checks the wire itself, reads them as they came (`receive`,
 * `exchange`).
 */
import WebSocket from 'ws';
import { ServerFrameSchema, type ServerFrame } from '../protocol/frames.js';
import { describeZod } from '../protocol/zod-issues.js';

export type SessionFailure = 'connection_lost' | 'reply_timeout' | 'bad_frame';

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

/** The frames a client sends (what the session's steps send; the test rig sends them as they are). */
export const clientFrames = {
  reset: (data: Record<string, unknown> = {}) => ({ type: 'reset', data }),
  call: (tool: string, args: unknown = {}) => ({ type: 'step', data: { type: 'call_tool', tool_name: tool, arguments: args } }),
  listTools: () => ({ type: 'step', data: { type: 'list_tools' } }),
  state: () => ({ type: 'state' }),
  close: () => ({ type: 'close' }),
};

/** A frame's JSON as it came, or why it could not be read. */
type Arrival = { json: unknown } | { error: SessionError };

/** A frame as the protocol declares it; anything else is the server's failure. */
function toServerFrame(json: unknown): ServerFrame {
  const parsed = ServerFrameSchema.safeParse(json);
  if (parsed.success) return parsed.data;
  const about = JSON.stringify(json) ?? String(json);
  throw new SessionError(
    'bad_frame',
    `the server sent a frame that is not the protocol's (${describeZod(parsed.error, 'frame')}): ${about.length > 300 ? `${about.slice(0, 299)}…` : about}`,
  );
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
  resolve(json: unknown): void;
  reject(e: Error): void;
}

export class ServerSession {
  private readonly inbox: Arrival[] = [];
  private readonly waiters: Waiter[] = [];
  /** resolves once the socket has closed, with the server's code and reason */
  readonly closed: Promise<{ code: number; reason: string }>;
  closeInfo: { code: number; reason: string } | null = null;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      let got: Arrival;
      try {
        got = { json: JSON.parse(data.toString()) as unknown };
      } catch {
        got = { error: new SessionError('bad_frame', 'the server sent a frame that is not JSON') };
      }
      const w = this.waiters.shift();
      if (!w) this.inbox.push(got);
      else if ('json' in got) w.resolve(got.json);
      else w.reject(got.error);
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

  /** The next frame the server sends, as the protocol declares it, within the wait's deadline. */
  async next(opts: WaitOptions = {}): Promise<ServerFrame> {
    return toServerFrame(await this.receive(opts));
  }

  /** The next frame's JSON as it came, unchecked, within the wait's deadline (the test rig reads the wire with it). */
  receive(opts: WaitOptions = {}): Promise<unknown> {
    const queued = this.inbox.shift();
    if (queued) return 'json' in queued ? Promise.resolve(queued.json) : Promise.reject(queued.error);
    if (this.closeInfo) return Promise.reject(new SessionError('connection_lost', this.closedMessage()));
    const { signal } = opts;
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    const timeoutMs = opts.timeoutMs ?? DEFAULT_WAIT_MS;
    return new Promise<unknown>((resolve, reject) => {
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

  /** Sends a frame and waits for the reply (the next frame), as the protocol declares it. */
  async request(frame: unknown, opts: WaitOptions = {}): Promise<ServerFrame> {
    return toServerFrame(await this.exchange(frame, opts));
  }

  /** Sends a frame and waits for the reply's JSON as it came, unchecked. */
  exchange(frame: unknown, opts: WaitOptions = {}): Promise<unknown> {
    if (this.closeInfo) return Promise.reject(new SessionError('connection_lost', this.closedMessage()));
    const reply = this.receive(opts);
    this.send(frame);
    return reply;
  }

  reset(data: Record<string, unknown> = {}, opts?: WaitOptions): Promise<ServerFrame> {
    return this.request(clientFrames.reset(data), opts);
  }

  call(tool: string, args: unknown = {}, opts?: WaitOptions): Promise<ServerFrame> {
    return this.request(clientFrames.call(tool, args), opts);
  }

  listTools(opts?: WaitOptions): Promise<ServerFrame> {
    return this.request(clientFrames.listTools(), opts);
  }

  state(opts?: WaitOptions): Promise<ServerFrame> {
    return this.request(clientFrames.state(), opts);
  }

  /** Ends the session (the server tears its episode down when the socket closes); resolves once closed. */
  async close(): Promise<void> {
    if (this.ws.readyState === WebSocket.OPEN) {
      try {
        this.ws.send(JSON.stringify(clientFrames.close()));
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
