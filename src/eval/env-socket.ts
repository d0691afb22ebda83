/**
 * One `/ws` session of the bundle server, as slime's rollouts hold one: a frame out, the next
 * frame in, each within its own deadline. A connection that drops or a reply that does not come
 * is an EnvError (the env's side failed, never the model's).
 */
import WebSocket from 'ws';

export class EnvError extends Error {
  override readonly name = 'EnvError';
  constructor(
    readonly reason: string,
    message: string,
    /** the server's failure object, when it sent one */
    readonly failure: Record<string, unknown> | null = null,
  ) {
    super(message);
  }
}

export interface Frame {
  type: string;
  data?: Record<string, unknown>;
}

export class EnvSocket {
  private readonly inbox: Frame[] = [];
  private waiter: { resolve: (f: Frame) => void; reject: (e: Error) => void } | null = null;
  private closedWith: string | null = null;

  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (data) => {
      let frame: Frame;
      try {
        frame = JSON.parse(data.toString()) as Frame;
      } catch {
        frame = { type: 'error', data: { code: 'INVALID_JSON', message: 'the server sent a frame that is not JSON' } };
      }
      const w = this.waiter;
      this.waiter = null;
      if (w) w.resolve(frame);
      else this.inbox.push(frame);
    });
    ws.on('close', (code, reason) => {
      this.closedWith = `the server closed the session (${code}${reason.length ? ` ${reason.toString()}` : ''})`;
      const w = this.waiter;
      this.waiter = null;
      w?.reject(new EnvError('connection_lost', this.closedWith));
    });
    ws.on('error', () => undefined);
  }

  /** Opens `<url>/ws` with the token; rejects with an EnvError when the upgrade fails, with `signal`'s reason when it aborts first. */
  static open(url: string, token: string | null, timeoutMs: number, signal?: AbortSignal): Promise<EnvSocket> {
    const target = `${url.replace(/^http/i, 'ws')}/ws`;
    const ws = new WebSocket(target, { headers: token ? { authorization: `Bearer ${token}` } : {}, maxPayload: 64 * 1024 * 1024, handshakeTimeout: timeoutMs });
    return new Promise((resolve, reject) => {
      // Ctrl-C during the handshake ends it at once, not at the handshake timeout
      const onAbort = () => {
        ws.terminate();
        reject(signal!.reason);
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      ws.once('close', () => signal?.removeEventListener('abort', onAbort));
      ws.once('open', () => {
        signal?.removeEventListener('abort', onAbort);
        resolve(new EnvSocket(ws));
      });
      ws.once('unexpected-response', (_req, res) => {
        reject(
          new EnvError(
            'connection_lost',
            `the server refused the WebSocket at ${target}: HTTP ${res.statusCode}${res.statusCode === 401 ? ' (check --token-var)' : ''}`,
          ),
        );
        ws.terminate();
      });
      ws.once('error', (e) => reject(new EnvError('connection_lost', `cannot open ${target}: ${e.message}`)));
    });
  }

  /** Sends a frame and waits for the next one, at most `timeoutMs` (`what` names the budget). */
  async request(frame: Frame, timeoutMs: number, what: string, signal?: AbortSignal): Promise<Frame> {
    if (this.closedWith) throw new EnvError('connection_lost', this.closedWith);
    if (this.waiter) throw new Error('one request at a time on a session');
    this.ws.send(JSON.stringify(frame));
    const queued = this.inbox.shift();
    if (queued) return queued;
    return new Promise<Frame>((resolve, reject) => {
      const onAbort = () => {
        clearTimeout(timer);
        this.waiter = null;
        reject(signal!.reason);
      };
      const timer = setTimeout(() => {
        this.waiter = null;
        signal?.removeEventListener('abort', onAbort);
        reject(new EnvError('reply_timeout', `no reply within ${what} (${timeoutMs / 1000} s)`));
      }, timeoutMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiter = {
        resolve: (f) => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          resolve(f);
        },
        reject: (e) => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          reject(e);
        },
      };
    });
  }

  /** Ends the session: the server tears its episode down when the socket closes. */
  close(): void {
    if (this.closedWith) return;
    try {
      this.ws.send(JSON.stringify({ type: 'close' }));
    } catch {
      // already going
    }
    this.ws.close(1000);
  }
}
