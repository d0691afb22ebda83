/**
 * Watches the engine's events for the env containers this sandbox deployed: one events stream per
 * sandbox, reconnecting when it drops. The moment an env's container dies, is removed, or leaves
 * its episode network, the AbortSignal its deploy handed out aborts (with an EnvGoneError), so an
 * episode learns at once that nothing it sends to the env's address can reach that env any more,
 * instead of waiting out a tool timeout or, worse, talking to whatever holds the address next.
 *
 * Network events carry no labels, so the stream is filtered by type and action only and matched
 * here against the containers and networks being watched (die, destroy and disconnect are rare).
 */
import type Dockerode from 'dockerode';
import { Backoff } from '../../util/backoff.js';
import { lineSplitter } from '../../util/lines.js';
import { EnvGoneError } from '../engine/env-gone.js';
import type { SandboxLogger } from '../engine/logger.js';
import { sleep } from '../engine/retry.js';

interface Watched {
  envId: string;
  containerId: string;
  networkId: string;
  controller: AbortController;
  /** the stream's drops when the watch began: one since, and some event may have been missed */
  dropsAtWatch: number;
  /** the stream was attached when the watch began */
  attachedAtWatch: boolean;
  /** a signal the engine sent it (docker kill, stop, the storage watch), or oom: what the engine said */
  engineKill: string | null;
}

interface EngineEvent {
  Type?: string;
  Action?: string;
  status?: string;
  timeNano?: number;
  time?: number;
  Actor?: { ID?: string; Attributes?: Record<string, string> };
}

const MAX_BACKOFF_MS = 5_000;
/** exit codes of containers that died, for a diagnosis after they were removed (bounded) */
const MAX_REMEMBERED_EXITS = 1_000;

export class EnvWatcher {
  private readonly byContainer = new Map<string, Watched>();
  private readonly byNetwork = new Map<string, Watched>();
  private readonly exits = new Map<string, number>();
  private stream: NodeJS.ReadableStream | null = null;
  private connecting: Promise<void> | null = null;
  private closed = false;
  private readonly lifetime = new AbortController();
  /** `since` for a reconnect: the engine time (s) of the last event seen */
  private lastEventTime: number | null = null;
  private firstAttempt: Promise<void> | null = null;
  private onFirstAttempt: (() => void) | null = null;
  /** how often the stream dropped (events while it was down are seen only as states) */
  private drops = 0;
  /** containers whose kills the engine reported, kept after their watch for a diagnosis (bounded) */
  private readonly kills = new Map<string, { engineKill: string | null; heardAll: boolean }>();

  constructor(
    private readonly docker: Dockerode,
    private readonly log: SandboxLogger,
  ) {}

  /**
   * Opens the stream once; resolves after the first attempt (later calls wait for that), whether
   * it worked or not: a failure is logged and retried in the background, and never holds a deploy.
   */
  start(): Promise<void> {
    if (this.stream || this.closed) return Promise.resolve();
    if (!this.connecting) {
      let firstAttempt!: () => void;
      this.firstAttempt = new Promise<void>((r) => (firstAttempt = r));
      this.onFirstAttempt = firstAttempt;
      this.connecting = this.connect(false).finally(() => {
        this.connecting = null;
        firstAttempt();
      });
    }
    return this.firstAttempt ?? Promise.resolve();
  }

  /** aborts (with an EnvGoneError) when the container dies, is removed or leaves the network */
  watch(envId: string, containerId: string, networkId: string): AbortSignal {
    const w: Watched = {
      envId,
      containerId,
      networkId,
      controller: new AbortController(),
      dropsAtWatch: this.drops,
      attachedAtWatch: this.stream !== null,
      engineKill: null,
    };
    this.byContainer.set(containerId, w);
    this.byNetwork.set(networkId, w);
    return w.controller.signal;
  }

  /** stops watching an episode's env (before its own teardown removes it) */
  forget(envId: string): void {
    for (const [id, w] of this.byContainer) {
      if (w.envId !== envId) continue;
      this.keepKills(w);
      this.byContainer.delete(id);
      if (this.byNetwork.get(w.networkId) === w) this.byNetwork.delete(w.networkId);
    }
  }

  /** the exit code a `die` event reported for a container (it may be gone since) */
  exitCodeOf(containerId: string): number | null {
    return this.exits.get(containerId) ?? null;
  }

  /**
   * What the engine said of killing a watched container: the signal it sent (or `oom`), and
   * whether every event since its watch began was heard (the stream was up and never dropped).
   * Null for a container never watched.
   */
  killsOf(containerId: string): { engineKill: string | null; heardAll: boolean } | null {
    const w = this.byContainer.get(containerId);
    if (w) return { engineKill: w.engineKill, heardAll: w.attachedAtWatch && w.dropsAtWatch === this.drops };
    return this.kills.get(containerId) ?? null;
  }

  close(): void {
    this.closed = true;
    this.lifetime.abort();
    const s = this.stream as (NodeJS.ReadableStream & { destroy?: () => void }) | null;
    this.stream = null;
    s?.destroy?.();
  }

  private async connect(isReconnect: boolean): Promise<void> {
    const backoff = new Backoff(250, MAX_BACKOFF_MS);
    while (!this.closed) {
      try {
        const since = this.lastEventTime ?? undefined;
        const stream: NodeJS.ReadableStream = await this.docker.getEvents({
          ...(since ? { since } : {}),
          filters: JSON.stringify({ type: ['container', 'network'], event: ['die', 'destroy', 'disconnect', 'kill', 'oom'] }),
        });
        if (this.closed) {
          (stream as NodeJS.ReadableStream & { destroy?: () => void }).destroy?.();
          return;
        }
        this.attach(stream);
        if (isReconnect) {
          this.log.info({ since }, 'engine events stream reopened');
          // events missed while the stream was down: ask the engine directly
          await this.recheckAll();
        }
        return;
      } catch (err) {
        this.onFirstAttempt?.();
        const delay = backoff.next();
        this.log.warn(
          { err: (err as Error).message, retryInMs: delay },
          'cannot open the engine events stream; env deaths are noticed only when a call fails until it reopens',
        );
        await sleep(delay, this.lifetime.signal).catch(() => {});
      }
    }
  }

  private attach(stream: NodeJS.ReadableStream): void {
    this.stream = stream;
    // no event seen yet: the local clock stands in (recheckAll covers a skew)
    if (this.lastEventTime === null) this.lastEventTime = Math.floor(Date.now() / 1000) - 1;
    const lines = lineSplitter((raw) => {
      const line = raw.trim();
      if (!line) return;
      try {
        this.onEvent(JSON.parse(line) as EngineEvent);
      } catch {
        // not an event: ignore
      }
    });
    stream.on('data', (chunk: Buffer | string) => lines.push(chunk));
    let dropped = false;
    const drop = (err?: Error) => {
      if (dropped) return;
      dropped = true;
      this.drops++;
      if (this.stream === stream) this.stream = null;
      if (this.closed) return;
      this.log.warn({ err: err?.message }, 'engine events stream dropped; reopening');
      this.connecting ??= this.connect(true).finally(() => (this.connecting = null));
    };
    stream.on('end', () => drop());
    stream.on('close', () => drop());
    stream.on('error', (err: Error) => drop(err));
  }

  private onEvent(e: EngineEvent): void {
    // whole seconds: a reconnect may see an event twice, never miss one (firing is idempotent)
    if (typeof e.time === 'number') this.lastEventTime = e.time;
    const id = e.Actor?.ID ?? '';
    const attrs = e.Actor?.Attributes ?? {};
    const action = e.Action ?? e.status ?? '';
    if (e.Type === 'container') {
      const w = this.byContainer.get(id);
      if (action === 'kill' || action === 'oom') {
        // the engine's own kills (docker kill or stop, a storage watch, the kernel's OOM killer): never the env's doing
        if (w) w.engineKill ??= action === 'oom' ? 'oom' : `signal ${attrs.signal ?? '?'}`;
        return;
      }
      if (action === 'die') {
        const code = Number(attrs.exitCode);
        if (Number.isFinite(code) && w) this.remember(id, code);
        if (w)
          this.fire(
            w,
            new EnvGoneError('die', `the env's container exited${Number.isFinite(code) ? ` with code ${code}` : ''}`, Number.isFinite(code) ? code : null),
          );
      } else if (action === 'destroy' && w) {
        this.fire(w, new EnvGoneError('destroy', "the env's container was removed from the engine", this.exitCodeOf(id)));
      }
    } else if (e.Type === 'network') {
      const w = this.byNetwork.get(id);
      if (!w) return;
      if (action === 'destroy' || (action === 'disconnect' && attrs.container === w.containerId)) {
        this.fire(w, new EnvGoneError('disconnect', "the env's container left its episode network"));
      }
    }
  }

  private fire(w: Watched, reason: EnvGoneError): void {
    if (w.controller.signal.aborted) return;
    this.log.warn({ episode: w.envId, container: w.containerId.slice(0, 12), event: reason.event, exitCode: reason.exitCode }, reason.message);
    w.controller.abort(reason);
  }

  private keepKills(w: Watched): void {
    if (this.kills.size >= MAX_REMEMBERED_EXITS) {
      const oldest = this.kills.keys().next().value;
      if (oldest !== undefined) this.kills.delete(oldest);
    }
    this.kills.set(w.containerId, { engineKill: w.engineKill, heardAll: w.attachedAtWatch && w.dropsAtWatch === this.drops });
  }

  private remember(containerId: string, code: number): void {
    if (this.exits.size >= MAX_REMEMBERED_EXITS) {
      const oldest = this.exits.keys().next().value;
      if (oldest !== undefined) this.exits.delete(oldest);
    }
    this.exits.set(containerId, code);
  }

  private async recheckAll(): Promise<void> {
    await Promise.all(
      [...this.byContainer.values()].map(async (w) => {
        try {
          const info = await this.docker.getContainer(w.containerId).inspect();
          if (!info.State.Running) {
            this.remember(w.containerId, info.State.ExitCode);
            this.fire(w, new EnvGoneError('die', `the env's container exited with code ${info.State.ExitCode}`, info.State.ExitCode));
          }
        } catch (err) {
          if ((err as { statusCode?: number }).statusCode === 404) {
            this.fire(w, new EnvGoneError('destroy', "the env's container was removed from the engine", this.exitCodeOf(w.containerId)));
          }
        }
      }),
    );
  }
}
