/**
 * The bundle server's /ws session (src/client/session.ts) as the tests and scripts (the bench,
 * the soak) drive it: the same client eval and play use, with replies handed over untyped, as
 * they came (each caller asserts the shape it expects next) and timeouts in plain milliseconds.
 */
import type WebSocket from 'ws';
import { clientFrames, ServerSession } from '../../src/client/session.js';

export class WsClient {
  private constructor(private readonly session: ServerSession) {}

  /**
   * Opens `url` (http(s):// or ws(s)://; /ws appended when missing). `ca` is a PEM to trust for
   * wss:// (a self-signed certificate); a refused upgrade rejects with its `statusCode`.
   */
  static async open(url: string, token?: string, opts: { ca?: string | Buffer; headers?: Record<string, string> } = {}): Promise<WsClient> {
    return new WsClient(await ServerSession.open(url, { token, ...opts }));
  }

  get ws(): WebSocket {
    return this.session.ws;
  }

  get closed(): Promise<{ code: number; reason: string }> {
    return this.session.closed;
  }

  get closeInfo(): { code: number; reason: string } | null {
    return this.session.closeInfo;
  }

  next(timeoutMs?: number): Promise<any> {
    return this.session.receive({ timeoutMs });
  }

  sendRaw(text: string): void {
    this.session.sendRaw(text);
  }

  /** sends a frame and resolves with the reply */
  request(frame: unknown, timeoutMs?: number): Promise<any> {
    return this.session.exchange(frame, { timeoutMs });
  }

  reset(data: Record<string, unknown> = {}, timeoutMs?: number): Promise<any> {
    return this.session.exchange(clientFrames.reset(data), { timeoutMs });
  }

  call(tool: string, args: unknown = {}): Promise<any> {
    return this.session.exchange(clientFrames.call(tool, args));
  }

  listTools(): Promise<any> {
    return this.session.exchange(clientFrames.listTools());
  }

  state(): Promise<any> {
    return this.session.exchange(clientFrames.state());
  }

  close(): Promise<void> {
    return this.session.close();
  }

  terminate(): void {
    this.session.terminate();
  }
}
