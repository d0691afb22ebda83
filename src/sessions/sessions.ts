/**
 * Every client that holds an episode, in one place: WebSocket sessions (one socket, one episode
 * at a time) and request clients (`/episodes`, `/mcp`, each episode with its idle clock), and the
 * MCP service both reach. Routes adapt their transport to this; they hold no session state.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import type { LoadedBundle } from '../bundle/index.js';
import type { EpisodeManager } from '../episodes/manager.js';
import { McpService } from './mcp-service.js';
import { StandardMcpSessions } from './mcp-standard-sessions.js';
import { RequestEpisodes } from './request-episodes.js';
import { WsSession } from './ws-session.js';

export interface SessionsOptions {
  manager: EpisodeManager;
  bundle: LoadedBundle;
  log: Logger;
  idleTimeoutMs: number;
  pingIntervalMs: number;
}

export class Sessions {
  readonly requests: RequestEpisodes;
  /** OpenEnv's JSON-RPC dialect on /mcp and /ws */
  readonly mcp: McpService;
  /** standard MCP (Streamable HTTP) sessions on /mcp, one episode each */
  readonly mcpStandard: StandardMcpSessions;
  private readonly sockets = new Set<WsSession>();

  constructor(private readonly opts: SessionsOptions) {
    this.requests = new RequestEpisodes(opts.manager, opts.idleTimeoutMs, opts.log.child({ component: 'http-episodes' }));
    this.mcp = new McpService({ requests: this.requests, bundle: opts.bundle, log: opts.log.child({ component: 'mcp' }) });
    this.mcpStandard = new StandardMcpSessions({ requests: this.requests, bundle: opts.bundle, log: opts.log.child({ component: 'mcp' }) });
  }

  /** A new WebSocket connection becomes a session (told at once when the server is draining). */
  openSocket(socket: WebSocket, log: FastifyBaseLogger): WsSession {
    const { manager, idleTimeoutMs, pingIntervalMs } = this.opts;
    const session = new WsSession(socket, { manager, mcp: this.mcp, idleTimeoutMs, pingIntervalMs, onClosed: (s) => this.sockets.delete(s) }, log);
    this.sockets.add(session);
    if (manager.isDraining) void session.shutdown();
    return session;
  }

  get socketCount(): number {
    return this.sockets.size;
  }

  /** Draining: every socket is told the server is shutting down and closed (1001). */
  async shutdownSockets(): Promise<void> {
    await Promise.all([...this.sockets].map((s) => s.shutdown()));
  }

  /** After the drain: no idle clock or memory of ended episodes outlives the app. */
  stop(): void {
    this.requests.stop();
    this.mcpStandard.stop();
  }
}
