/**
 * Stateful HTTP (PROTOCOL.md §5): `/episodes` for clients without WebSockets (curl, the web
 * console). The same Episode and manager as `/ws`; this module only adds what a request-driven
 * episode needs and a socket gives for free: an idle clock per episode, and a short memory of
 * ended episodes so a late step gets "episode_done" rather than a bare 404.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { EpisodeStateError, NotFoundError, ServerError, ShuttingDownError } from '../errors.js';
import { isAbortError } from '../episodes/admission.js';
import type { Episode, StepOutcome } from '../episodes/episode.js';
import type { EpisodeManager } from '../episodes/manager.js';
import { parseAction, parseResetData, type ResetData } from '../protocol/frames.js';

/** An episode a WebSocket session owns is driven through that session only. */
export class OwnedBySessionError extends ServerError {
  override readonly name = 'OwnedBySessionError';
  readonly wsCode = 'EXECUTION_ERROR' as const;
  readonly httpStatus = 409;
  readonly httpCode = 'owned_by_ws_session';
  constructor(id: string) {
    super(`episode ${id} belongs to a WebSocket session; step it over that /ws connection`);
  }
  override details(): Record<string, unknown> {
    return { reason: 'owned_by_ws_session' };
  }
}

interface Tracked {
  ep: Episode;
  pending: number;
  timer: NodeJS.Timeout | null;
}

/** How long an ended episode stays answerable (state, "episode_done"), and how many are kept. */
const ENDED_KEEP_MAX = 4096;

/**
 * Episodes driven by requests (`/episodes`, `/mcp`): each has an idle clock that runs only while
 * no request on it is in flight, and is torn down when it runs out. Ended ones are remembered for
 * a while so their state stays readable.
 */
export class RequestEpisodes {
  private readonly live = new Map<string, Tracked>();
  private readonly ended = new Map<string, { ep: Episode; timer: NodeJS.Timeout }>();
  private stopped = false;

  constructor(
    readonly idleTimeoutMs: number,
    private readonly log: Logger,
  ) {}

  /** Starts tracking an episode this transport created (its creating request counts as in flight). */
  track(ep: Episode): void {
    const t: Tracked = { ep, pending: 0, timer: null };
    this.live.set(ep.id, t);
    void ep.tornDown.then(() => this.onTornDown(ep));
  }

  owns(ep: Episode): boolean {
    return this.live.has(ep.id) || this.ended.has(ep.id);
  }

  /** A live or recently ended episode this transport created. */
  get(id: string): Episode | undefined {
    return this.live.get(id)?.ep ?? this.ended.get(id)?.ep;
  }

  /** Runs a request on the episode: the idle clock stops until it is answered. */
  async run<T>(ep: Episode, fn: () => Promise<T>): Promise<T> {
    const t = this.live.get(ep.id);
    if (t) {
      t.pending++;
      this.clear(t);
    }
    try {
      return await fn();
    } finally {
      if (t) {
        t.pending--;
        this.arm(t);
      }
    }
  }

  /** A request that only reads the episode still counts as the client being there. */
  touch(ep: Episode): void {
    const t = this.live.get(ep.id);
    if (t) this.arm(t);
  }

  forget(id: string): void {
    const e = this.ended.get(id);
    if (e) clearTimeout(e.timer);
    this.ended.delete(id);
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.live.values()) this.clear(t);
    for (const e of this.ended.values()) clearTimeout(e.timer);
    this.ended.clear();
  }

  private clear(t: Tracked): void {
    if (t.timer) clearTimeout(t.timer);
    t.timer = null;
  }

  private arm(t: Tracked): void {
    this.clear(t);
    if (this.stopped || t.pending > 0 || !this.live.has(t.ep.id)) return;
    t.timer = setTimeout(() => {
      t.timer = null;
      this.log.info({ event: 'http_idle', episode_id: t.ep.id, transport: t.ep.transport }, `no request for idle_timeout (${this.idleTimeoutMs / 1000} s); tearing the episode down`);
      void t.ep.close();
    }, this.idleTimeoutMs);
    t.timer.unref?.();
  }

  private onTornDown(ep: Episode): void {
    const t = this.live.get(ep.id);
    if (t) this.clear(t);
    this.live.delete(ep.id);
    if (this.stopped) return;
    if (this.ended.size >= ENDED_KEEP_MAX) {
      const oldest = this.ended.keys().next().value;
      if (oldest !== undefined) this.forget(oldest);
    }
    const timer = setTimeout(() => this.ended.delete(ep.id), this.idleTimeoutMs);
    timer.unref?.();
    this.ended.set(ep.id, { ep, timer });
  }
}

/**
 * Starts a request-driven episode: created (listed while it waits), tracked, started. A client
 * that goes away while it waits or deploys closes it, which takes it out of the queue.
 * Resolves null when the client left (nothing to answer).
 */
export async function startRequestEpisode(
  manager: EpisodeManager,
  tracker: RequestEpisodes,
  data: ResetData,
  transport: 'http' | 'mcp',
  reply: FastifyReply | null,
): Promise<{ ep: Episode; out: StepOutcome } | null> {
  const ep = manager.create(data, transport);
  tracker.track(ep);
  let left = false;
  const onClose = () => {
    if (reply && !reply.raw.writableFinished) {
      left = true;
      reply.log.info({ event: 'client_left', episode_id: ep.id, phase: ep.phase }, 'the client went away before its episode started; closing it');
      void ep.close();
    }
  };
  reply?.raw.on('close', onClose);
  try {
    const out = await tracker.run(ep, () => manager.start(ep, data));
    if (left) return null;
    return { ep, out };
  } catch (e) {
    if (left && isAbortError(e)) return null;
    if (isAbortError(e)) {
      // closed by someone else while it waited or deployed: a DELETE, or the server stopping
      if (manager.isDraining) throw new ShuttingDownError();
      throw new EpisodeStateError('episode_done', `episode ${ep.id} was closed before it started`);
    }
    throw e;
  } finally {
    reply?.raw.off('close', onClose);
  }
}

export interface EpisodesRouteOptions {
  manager: EpisodeManager;
  tracker: RequestEpisodes;
}

type IdParams = { Params: { id: string } };

export async function episodesRoutes(app: FastifyInstance, opts: EpisodesRouteOptions): Promise<void> {
  const { manager, tracker } = opts;
  const admission = manager.admission;

  /** a live episode of any transport, or an ended one this transport remembers */
  const find = (id: string): Episode => {
    const ep = manager.get(id) ?? tracker.get(id);
    if (!ep) throw new NotFoundError(`no episode "${id}": it never existed, or it ended and was torn down; GET /episodes lists the live ones`);
    return ep;
  };

  app.post('/episodes', async (req: FastifyRequest, reply: FastifyReply) => {
    const data = parseResetData(req.body);
    const started = await startRequestEpisode(manager, tracker, data, 'http', reply);
    if (!started) {
      // the client is gone: there is no one to answer
      reply.hijack();
      reply.raw.destroy();
      return;
    }
    return reply.code(201).send({ episode_id: started.ep.id, ...started.out });
  });

  app.post<IdParams>('/episodes/:id/step', async (req) => {
    const ep = find(req.params.id);
    if (!tracker.owns(ep)) throw new OwnedBySessionError(ep.id);
    const action = parseAction(req.body);
    return tracker.run(ep, () => ep.step(action));
  });

  app.get<IdParams>('/episodes/:id', async (req) => {
    const ep = find(req.params.id);
    tracker.touch(ep);
    return ep.state();
  });

  app.delete<IdParams>('/episodes/:id', async (req, reply) => {
    const ep = find(req.params.id);
    await ep.close();
    tracker.forget(ep.id);
    return reply.code(204).send();
  });

  app.get('/episodes', async () => ({
    active: manager.list().map((ep) => ({
      episode_id: ep.id,
      task_id: ep.task.task_id,
      phase: ep.phase,
      transport: ep.transport,
      started_at: new Date(ep.createdAt).toISOString(),
      steps: ep.steps,
      reward: ep.reward,
    })),
    waiting: admission.waitingCount,
    capacity: admission.capacity,
  }));

  app.addHook('onClose', async () => tracker.stop());
}
