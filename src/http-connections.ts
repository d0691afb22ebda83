/**
 * The client connections of the HTTP server: a deadline for a request's headers from the moment a
 * connection opens (Node's own headersTimeout only starts at a request's first byte, so a socket
 * that sends nothing stayed open forever), a bound on how many are open (so slow or idle clients
 * cannot take the descriptors the engine socket and the envs need), and the closing of idle and
 * half-sent connections at shutdown (they held server.close() until the process gave up).
 *
 * At the bound a new connection closes the oldest one that is not in the middle of a request (idle
 * between requests, or still sending its headers): /health stays reachable under a flood of slow
 * clients. Only when every connection is busy (a request being answered, a WebSocket) is the new
 * one refused.
 */
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';

/**
 * --max-connections 0 (auto): the process's soft open-file limit, less descriptors kept for what
 * the server itself opens (the engine socket's connections, each env's HTTP and log streams, the
 * bundle's files): `base` and `perEnv` for each of --max-concurrent-envs. Never below `min`.
 * Without a readable limit (not Linux), `fallbackLimit` is assumed.
 */
const CONNECTION_RESERVE = { base: 128, perEnv: 8, min: 16, fallbackLimit: 1024 } as const;

/** the soft "Max open files" of this process, when the system says (Linux) */
export function openFileLimit(): number | null {
  try {
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    if (!m) return null;
    return m[1] === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(m[1]);
  } catch {
    return null;
  }
}

/** --max-connections 0: the open-file limit less the reserve for what the server opens itself */
export function autoMaxConnections(maxConcurrentEnvs: number, limit: number | null = openFileLimit()): number {
  const l = limit ?? CONNECTION_RESERVE.fallbackLimit;
  return Math.max(CONNECTION_RESERVE.min, l - CONNECTION_RESERVE.base - CONNECTION_RESERVE.perEnv * maxConcurrentEnvs);
}

type State = 'fresh' | 'busy' | 'idle' | 'upgraded';

interface Conn {
  state: State;
  timer: NodeJS.Timeout | null;
}

export interface ConnectionGuardOptions {
  /** open connections at most */
  max: number;
  /** a connection that has not sent a whole request's headers by then is closed */
  headersTimeoutMs: number;
  log: Logger;
}

export class ConnectionGuard {
  /** insertion order: the oldest first */
  private readonly conns = new Map<Socket, Conn>();
  private evicted = 0;
  private refused = 0;
  private timedOut = 0;
  private lastWarn = 0;
  readonly max: number;

  constructor(
    server: Server,
    private readonly opts: ConnectionGuardOptions,
  ) {
    this.max = opts.max;
    server.on('connection', (socket: Socket) => this.onConnection(socket));
    server.on('request', (req: { socket: Socket }, res: { once(e: 'close', f: () => void): void }) => {
      const c = this.conns.get(req.socket);
      if (!c) return;
      this.setState(req.socket, c, 'busy');
      res.once('close', () => {
        if (c.state === 'busy') this.setState(req.socket, c, 'idle');
      });
    });
    server.on('upgrade', (req: { socket: Socket }) => {
      const c = this.conns.get(req.socket);
      if (c) this.setState(req.socket, c, 'upgraded');
    });
  }

  /** connections open now */
  get open(): number {
    return this.conns.size;
  }

  stats(): { open: number; max: number; evicted: number; refused: number; headers_timed_out: number } {
    return { open: this.conns.size, max: this.max, evicted: this.evicted, refused: this.refused, headers_timed_out: this.timedOut };
  }

  /**
   * Closes every connection not in the middle of a request (idle, or still sending headers):
   * what the drain does so that server.close() can finish. Returns how many it closed.
   */
  closeInactive(): number {
    let n = 0;
    for (const [socket, c] of this.conns) {
      if (c.state === 'fresh' || c.state === 'idle') {
        socket.destroy();
        n++;
      }
    }
    return n;
  }

  private onConnection(socket: Socket): void {
    if (this.conns.size >= this.max) {
      const victim = this.oldestInactive();
      if (victim) {
        this.forget(victim);
        victim.destroy();
        this.evicted++;
        this.warn('at --max-connections: closed the oldest idle or half-sent connection for a new one');
      } else {
        socket.destroy();
        this.refused++;
        this.warn('at --max-connections with every connection busy: refused a new connection');
        return;
      }
    }
    const c: Conn = { state: 'fresh', timer: null };
    this.conns.set(socket, c);
    this.setState(socket, c, 'fresh');
    socket.once('close', () => this.forget(socket));
  }

  private forget(socket: Socket): void {
    const c = this.conns.get(socket);
    if (c?.timer) clearTimeout(c.timer);
    this.conns.delete(socket);
  }

  private setState(socket: Socket, c: Conn, state: State): void {
    c.state = state;
    if (c.timer) clearTimeout(c.timer);
    c.timer = null;
    if (state === 'fresh') {
      // from the connection on: Node's headersTimeout only counts from a request's first byte
      c.timer = setTimeout(() => {
        if (c.state !== 'fresh') return;
        this.timedOut++;
        socket.destroy();
      }, this.opts.headersTimeoutMs);
      c.timer.unref();
    }
  }

  private oldestInactive(): Socket | undefined {
    for (const [socket, c] of this.conns) if (c.state === 'fresh' || c.state === 'idle') return socket;
    return undefined;
  }

  private warn(message: string): void {
    const now = Date.now();
    if (now - this.lastWarn < 10_000) return;
    this.lastWarn = now;
    this.opts.log.warn({ event: 'connection_bound', ...this.stats() }, message);
  }
}
