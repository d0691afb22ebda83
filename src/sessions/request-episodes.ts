/**
 * Episodes held by request-driven clients (`/episodes`, `/mcp`): no socket says when such a client
 * is gone, so each episode has its own idle clock (running only while no request on it is in
 * flight) and is torn down when it runs out. Ended ones stay answerable for a while (state,
 * "episode_done") instead of vanishing into a bare 404.
 */
import type { Logger } from 'pino';
import { ENDED_EPISODES_KEPT } from '../defaults.js';
import { EpisodeStateError, ShuttingDownError, TooManyRequestsError } from '../errors.js';
import { isAbortError } from '../util/abort.js';
import type { Episode } from '../episodes/episode.js';
import type { ResetObservation, StepOutcome } from '../protocol/observations.js';
import type { EpisodeManager } from '../episodes/manager.js';
import type { ResetData } from '../protocol/frames.js';
import { IdleClock } from './idle-clock.js';

/** Requests one HTTP-held episode may have in flight at once (/episodes, /mcp); past it: 429. */
export const REQUESTS_IN_FLIGHT_PER_EPISODE = 16;

/** Who drives a live episode: a request client (through this registry) or a WebSocket session. */
export type Holder = 'request' | 'socket';

export class RequestEpisodes {
  private readonly live = new Map<string, { ep: Episode; clock: IdleClock; inFlight: number }>();
  private readonly ended = new Map<string, { ep: Episode; timer: NodeJS.Timeout }>();
  private stopped = false;

  constructor(
    private readonly manager: EpisodeManager,
    readonly idleTimeoutMs: number,
    private readonly log: Logger,
  ) {}

  /**
   * Starts a request-held episode: created (listed while it waits), held, started. A client that
   * goes away while it waits or deploys (`clientGone` aborts) closes it, which takes it out of the
   * queue. Resolves null when the client left: there is no one to answer. `idleTimeoutMs` may
   * bound this episode's idleness more tightly than the server's (the console's playground).
   */
  async start(
    data: ResetData,
    transport: 'http' | 'mcp',
    clientGone?: AbortSignal,
    idleTimeoutMs = this.idleTimeoutMs,
  ): Promise<{ ep: Episode; out: StepOutcome<ResetObservation> } | null> {
    const ep = this.manager.create(data, transport);
    this.hold(ep, Math.min(idleTimeoutMs, this.idleTimeoutMs));
    const onGone = () => {
      this.log.info({ event: 'client_left', episode_id: ep.id, phase: ep.phase }, 'the client went away before its episode started; closing it');
      void ep.close();
    };
    clientGone?.addEventListener('abort', onGone, { once: true });
    try {
      const out = await this.run(ep, () => this.manager.start(ep));
      return clientGone?.aborted ? null : { ep, out };
    } catch (e) {
      if (!isAbortError(e)) throw e;
      if (clientGone?.aborted) return null;
      // closed by someone else while it waited or deployed: a DELETE, or the server stopping
      if (this.manager.isDraining) throw new ShuttingDownError();
      throw new EpisodeStateError('episode_done', `episode ${ep.id} was closed before it started`);
    } finally {
      clientGone?.removeEventListener('abort', onGone);
    }
  }

  /**
   * An episode a request names: live or recently ended, held here (`request`), or live and driven
   * by a WebSocket session (`socket`); null when there is none.
   */
  find(id: string): { ep: Episode; holder: Holder } | null {
    const held = this.live.get(id)?.ep ?? this.ended.get(id)?.ep;
    if (held) return { ep: held, holder: 'request' };
    const other = this.manager.get(id);
    return other ? { ep: other, holder: 'socket' } : null;
  }

  /**
   * Runs a request on a held episode: its idle clock stops until the request is answered. A
   * client may have a bounded number in flight on one episode (steps queue one behind another).
   */
  async run<T>(ep: Episode, fn: () => Promise<T>): Promise<T> {
    const held = this.live.get(ep.id);
    if (!held) return fn();
    if (held.inFlight >= REQUESTS_IN_FLIGHT_PER_EPISODE) throw new TooManyRequestsError(ep.id, REQUESTS_IN_FLIGHT_PER_EPISODE);
    held.inFlight++;
    try {
      return await held.clock.during(fn);
    } finally {
      held.inFlight--;
    }
  }

  /** A request that only reads the episode still shows the client is there. */
  touch(ep: Episode): void {
    this.live.get(ep.id)?.clock.arm();
  }

  /** Closes an episode (any holder's) and forgets it. */
  async close(ep: Episode): Promise<void> {
    await ep.close();
    const e = this.ended.get(ep.id);
    if (e) clearTimeout(e.timer);
    this.ended.delete(ep.id);
  }

  stop(): void {
    this.stopped = true;
    for (const h of this.live.values()) h.clock.stop();
    for (const e of this.ended.values()) clearTimeout(e.timer);
    this.ended.clear();
  }

  private hold(ep: Episode, idleTimeoutMs: number): void {
    const clock = new IdleClock(idleTimeoutMs, () => {
      this.log.info(
        { event: 'http_idle', episode_id: ep.id, transport: ep.transport },
        `no request for ${idleTimeoutMs / 1000} s (its idle bound); tearing the episode down`,
      );
      void ep.close();
    });
    this.live.set(ep.id, { ep, clock, inFlight: 0 });
    void ep.tornDown.then(() => this.onTornDown(ep));
  }

  private onTornDown(ep: Episode): void {
    this.live.get(ep.id)?.clock.stop();
    this.live.delete(ep.id);
    if (this.stopped) return;
    if (this.ended.size >= ENDED_EPISODES_KEPT) {
      const oldest = this.ended.entries().next().value;
      if (oldest) {
        clearTimeout(oldest[1].timer);
        this.ended.delete(oldest[0]);
      }
    }
    const timer = setTimeout(() => this.ended.delete(ep.id), this.idleTimeoutMs);
    timer.unref?.();
    this.ended.set(ep.id, { ep, timer });
  }
}
