/**
 * A WebSocket session (`WS /ws`): one connection playing one episode at a time. One JSON text
 * frame in, exactly one out, in order. The message listener is attached synchronously and frames
 * are handled one after another, so frames that arrive while a reset waits or deploys are
 * buffered, never lost. Pings find peers that vanished; the idle clock closes quiet ones.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { WebSocket } from 'ws';
import { isAbortError } from '../util/abort.js';
import { BadInputError, EpisodeStateError, ServerError, ShuttingDownError, toWsError } from '../errors.js';
import type { Episode } from '../episodes/episode.js';
import type { EpisodeManager } from '../episodes/manager.js';
import type { ClientFrame, ServerFrame } from '../protocol/frames.js';
import { IDLE_STATE } from '../protocol/observations.js';
import { parseClientFrame } from './client-input.js';
import { IdleClock } from './idle-clock.js';
import type { McpService } from './mcp-service.js';

/**
 * What one WebSocket session may have waiting to be handled (frames arrive while a step runs):
 * past either bound the session is closed with 1008, its episode torn down, and no other session
 * notices. Generous for any real client (one frame in flight at a time is the protocol).
 */
export const WS_PENDING_LIMIT = { frames: 64, bytes: 16 * 1024 * 1024 } as const;

/** WebSocket close reasons must stay under 123 bytes or `ws` throws. */
export function closeReason(text: string): string {
  const buf = Buffer.from(text, 'utf8');
  return buf.length <= 120
    ? text
    : buf
        .subarray(0, 117)
        .toString('utf8')
        .replace(/\uFFFD$/, '') + '...';
}

export interface WsSessionDeps {
  manager: EpisodeManager;
  mcp: McpService;
  idleTimeoutMs: number;
  pingIntervalMs: number;
  /** called once when the session has closed */
  onClosed: (s: WsSession) => void;
}

export class WsSession {
  private episode: Episode | null = null;
  private chain: Promise<void> = Promise.resolve();
  private closed = false;
  private readonly idle: IdleClock;
  private pingTimer: NodeJS.Timeout | null = null;
  private missedPongs = 0;
  /** frames received and not yet answered, and their bytes (bounded: WS_PENDING_LIMIT) */
  private pending = { frames: 0, bytes: 0 };

  constructor(
    private readonly socket: WebSocket,
    private readonly deps: WsSessionDeps,
    private readonly log: FastifyBaseLogger,
  ) {
    this.idle = new IdleClock(deps.idleTimeoutMs, () => {
      this.log.info({ event: 'ws_idle' }, 'session idle; closing');
      this.close(1000, `idle for idle_timeout (${deps.idleTimeoutMs / 1000} s)`);
    });
    socket.on('message', (data, isBinary) => {
      if (this.closed) return;
      const bytes = Array.isArray(data) ? data.reduce((n, b) => n + b.length, 0) : data.byteLength;
      if (this.pending.frames + 1 > WS_PENDING_LIMIT.frames || this.pending.bytes + bytes > WS_PENDING_LIMIT.bytes) {
        this.log.warn({ event: 'ws_flooded', frames: this.pending.frames, bytes: this.pending.bytes }, 'too many frames in flight; closing the session');
        this.close(
          1008,
          `too many frames in flight (at most ${WS_PENDING_LIMIT.frames} frames or ${WS_PENDING_LIMIT.bytes / 1024 / 1024} MiB): wait for each reply`,
        );
        return;
      }
      this.pending.frames++;
      this.pending.bytes += bytes;
      this.idle.begin();
      const text = isBinary ? null : data.toString();
      this.chain = this.chain
        .then(() => {
          // frames still queued when the session closed have no one to answer and must start nothing
          if (this.closed) return;
          return text === null
            ? this.sendError(new BadInputError('INVALID_JSON', 'binary frames are not supported; send JSON text frames'))
            : this.handle(text);
        })
        .catch((e) => this.log.error({ err: e }, 'ws frame handling failed'))
        .finally(() => {
          this.pending.frames--;
          this.pending.bytes -= bytes;
          this.idle.end();
        });
    });
    socket.on('pong', () => (this.missedPongs = 0));
    socket.on('close', (code) => void this.onClosed(code));
    socket.on('error', (err) => this.log.warn({ err: err.message }, 'ws error'));
    if (deps.pingIntervalMs > 0) {
      this.pingTimer = setInterval(() => this.ping(), deps.pingIntervalMs);
      this.pingTimer.unref?.();
    }
    this.idle.arm();
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

  private async handle(text: string): Promise<void> {
    let frame: ClientFrame;
    try {
      frame = parseClientFrame(text);
    } catch (e) {
      return this.sendError(e);
    }
    const { manager } = this.deps;
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
          const out = await manager.start(ep);
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
          return this.send({ type: 'observation', data: await ep.step(frame.data) });
        } catch (e) {
          return this.sendError(e);
        }
      }
      case 'state':
        return this.send({
          type: 'state',
          data: this.episode ? this.episode.state() : IDLE_STATE,
        });
      case 'close': {
        const ep = this.episode;
        this.episode = null;
        await ep?.close();
        this.close(1000, 'closed by client');
        return;
      }
      case 'mcp': {
        const reply = await this.deps.mcp.handle(frame.data, { sessionEpisode: () => this.episode });
        return this.send({ type: 'mcp', data: reply });
      }
    }
  }

  private send(frame: ServerFrame): Promise<void> {
    if (this.closed || this.socket.readyState !== this.socket.OPEN) return Promise.resolve();
    return new Promise((resolve) => {
      this.socket.send(JSON.stringify(frame), () => resolve());
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
    this.idle.stop();
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.deps.onClosed(this);
    const ep = this.episode;
    this.episode = null;
    if (ep) {
      this.log.info({ event: 'ws_closed', code, episode_id: ep.id, phase: ep.phase }, 'session closed; tearing its episode down');
      await ep.close();
    }
  }
}
