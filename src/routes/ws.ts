/**
 * `WS /ws` (PROTOCOL.md §4): a connection is a session playing one episode at a time. One JSON
 * text frame in, exactly one out, in order. The message listener is attached synchronously and
 * frames are processed one after another, so frames that arrive while a reset waits or deploys
 * are buffered, never lost.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { WebSocket } from 'ws';
import { BadInputError, EpisodeStateError, ServerError, ShuttingDownError, toWsError } from '../errors.js';
import type { Episode } from '../episodes/episode.js';
import type { EpisodeManager } from '../episodes/manager.js';
import { isAbortError } from '../episodes/admission.js';
import { parseClientFrame, type ClientFrame } from '../protocol/frames.js';

export const MAX_FRAME_BYTES = 4 * 1024 * 1024;

/** WebSocket close reasons must stay under 123 bytes or `ws` throws. */
export function closeReason(text: string): string {
  const buf = Buffer.from(text, 'utf8');
  return buf.length <= 120 ? text : buf.subarray(0, 117).toString('utf8').replace(/\uFFFD$/, '') + '...';
}

export type McpHandler = (request: unknown, session: { episodeFor(id?: string): Episode | null }) => Promise<unknown>;

export interface WsOptions {
  manager: EpisodeManager;
  idleTimeoutMs: number;
  pingIntervalMs: number;
  sessions: Set<WsSession>;
  mcp?: McpHandler;
}

export class WsSession {
  episode: Episode | null = null;
  private chain: Promise<void> = Promise.resolve();
  private pending = 0;
  private closed = false;
  private idleTimer: NodeJS.Timeout | null = null;
  private pingTimer: NodeJS.Timeout | null = null;
  private missedPongs = 0;

  constructor(
    private readonly socket: WebSocket,
    private readonly opts: WsOptions,
    private readonly log: FastifyRequest['log'],
  ) {
    socket.on('message', (data, isBinary) => {
      this.touch();
      const text = isBinary ? null : data.toString();
      this.pending++;
      this.chain = this.chain
        .then(() =>
          text === null ? this.sendError(new BadInputError('INVALID_JSON', 'binary frames are not supported; send JSON text frames')) : this.handle(text),
        )
        .catch((e) => this.log.error({ err: e }, 'ws frame handling failed'))
        .finally(() => {
          this.pending--;
          this.armIdle();
        });
    });
    socket.on('pong', () => (this.missedPongs = 0));
    socket.on('close', (code) => void this.onClosed(code));
    socket.on('error', (err) => this.log.warn({ err: err.message }, 'ws error'));
    if (opts.pingIntervalMs > 0) {
      this.pingTimer = setInterval(() => this.ping(), opts.pingIntervalMs);
      this.pingTimer.unref?.();
    }
    this.armIdle();
  }

  private ping(): void {
    if (this.missedPongs >= 2) {
      this.log.info({ event: 'ws_dropped' }, 'peer missed two pings; dropping the session');
      this.socket.terminate();
      return;
    }
    this.missedPongs++;
    try {
      this.socket.ping();
    } catch {
      // the close handler tears down
    }
  }

  private touch(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
  }

  /** The idle clock runs only while the server owes the client nothing. */
  private armIdle(): void {
    if (this.closed || this.pending > 0) return;
    this.touch();
    this.idleTimer = setTimeout(() => {
      this.log.info({ event: 'ws_idle' }, 'session idle; closing');
      this.close(1000, `idle for idle_timeout (${this.opts.idleTimeoutMs / 1000} s)`);
    }, this.opts.idleTimeoutMs);
    this.idleTimer.unref?.();
  }

  private async handle(text: string): Promise<void> {
    let frame: ClientFrame;
    try {
      frame = parseClientFrame(text);
    } catch (e) {
      return this.sendError(e);
    }
    const { manager } = this.opts;
    switch (frame.type) {
      case 'reset': {
        if (this.episode) {
          const prev = this.episode;
          this.episode = null;
          await prev.close();
        }
        let ep: Episode;
        try {
          ep = manager.create(frame.data, 'ws');
        } catch (e) {
          return this.sendError(e);
        }
        this.episode = ep;
        try {
          const out = await manager.start(ep, frame.data);
          if (this.closed) return;
          return this.send({ type: 'observation', data: out });
        } catch (e) {
          if (this.episode === ep) this.episode = null;
          if (isAbortError(e) || this.closed) return;
          await this.sendError(e);
          if (e instanceof ShuttingDownError) this.close(1001, 'server shutting down');
          return;
        }
      }
      case 'step': {
        const ep = this.episode;
        if (!ep) return this.sendError(new EpisodeStateError('no_episode', 'no episode: send a reset first'));
        try {
          const out = await ep.step(frame.data);
          return this.send({ type: 'observation', data: out });
        } catch (e) {
          return this.sendError(e);
        }
      }
      case 'state': {
        const ep = this.episode;
        const data = ep
          ? ep.state()
          : { episode_id: null, task_id: null, step_count: 0, turn: 0, done: false, phase: 'idle' };
        return this.send({ type: 'state', data });
      }
      case 'close': {
        const ep = this.episode;
        this.episode = null;
        await ep?.close();
        this.close(1000, 'closed by client');
        return;
      }
      case 'mcp': {
        if (!this.opts.mcp) {
          return this.send({ type: 'error', data: { code: 'UNKNOWN_TYPE', message: 'this server has no MCP handler' } });
        }
        const reply = await this.opts.mcp(frame.data, { episodeFor: () => this.episode });
        return this.send({ type: 'mcp', data: reply });
      }
    }
  }

  private send(msg: unknown): Promise<void> {
    if (this.closed || this.socket.readyState !== this.socket.OPEN) return Promise.resolve();
    return new Promise((resolve) => {
      this.socket.send(JSON.stringify(msg), () => resolve());
    });
  }

  private sendError(e: unknown): Promise<void> {
    if (!(e instanceof ServerError)) this.log.error({ err: e }, 'unexpected error in a ws session');
    return this.send(toWsError(e));
  }

  /** Server shutdown: tell the client why, close 1001; the manager tears the episode down. */
  async shutdown(): Promise<void> {
    if (this.closed) return;
    await this.send(toWsError(new ShuttingDownError()));
    this.close(1001, 'server shutting down');
  }

  close(code: number, reason: string): void {
    if (this.socket.readyState === this.socket.OPEN || this.socket.readyState === this.socket.CONNECTING) {
      this.socket.close(code, closeReason(reason));
    }
    void this.onClosed(code);
  }

  private async onClosed(code: number): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.touch();
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.opts.sessions.delete(this);
    const ep = this.episode;
    this.episode = null;
    if (ep) {
      this.log.info({ event: 'ws_closed', code, episode_id: ep.id, phase: ep.phase }, 'session closed; tearing its episode down');
      await ep.close();
    }
  }
}

export async function wsRoutes(app: FastifyInstance, opts: WsOptions): Promise<void> {
  app.get('/ws', { websocket: true }, (socket, req) => {
    const session = new WsSession(socket, opts, req.log);
    opts.sessions.add(session);
    if (opts.manager.isDraining) void session.shutdown();
  });
}
