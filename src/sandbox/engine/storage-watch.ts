/**
 * The storage bound of envs whose engine cannot limit their writable layer (overlay2 off xfs with
 * pquota: docs/security.md, "A storage bound per env"): the layer is watched through the engine
 * (`GET /containers/{id}/json?size=1`, its SizeRw) and an env past its `storage_mb` is killed, its
 * episode ending with `storage_exceeded`. The first look comes `firstLookMs` after the start, the
 * next after `intervalMs`, or sooner: after the time the env would take to fill what is left of its
 * bound writing as fast as the disk takes it (`writeBytesPerMs`, or the rate last seen when faster),
 * at least `nearMs`; so a small bound is looked at often, a large one seldom, and a writer at full
 * speed overshoots by about what it writes in `nearMs` plus a look's own time. What asking costs grows with the files in the layer, not their bytes (about 1 ms for
 * one big file, 0.1 to 0.2 s with 20,000 files, measured): a look never comes sooner than
 * `costFactor` times as long as the last took, so that a layer of many small files cannot make
 * the watcher hog the engine (it then overshoots more), nor later than `maxIntervalMs`.
 */
import type Dockerode from 'dockerode';
import { STORAGE_WATCH } from '../../defaults.js';
import { isNotFound } from '../engine/errors.js';
import type { SandboxLogger } from '../engine/logger.js';

interface Watched {
  containerId: string;
  limitBytes: number;
  timer: NodeJS.Timeout | null;
  stopped: boolean;
  /** the last look: its size and time (performance.now()) */
  last: { bytes: number; at: number } | null;
}

export interface StorageWatchSettings {
  firstLookMs: number;
  intervalMs: number;
  nearMs: number;
  maxIntervalMs: number;
  /** how fast an env may write to its layer, bytes per ms: the soonest a bound can be reached */
  writeBytesPerMs: number;
  costFactor: number;
}

/** what ended envs for their storage, for a diagnosis after (bounded) */
const MAX_REMEMBERED = 1_000;

export class StorageWatch {
  private readonly byEpisode = new Map<string, Watched>();
  /** container id → why it was killed */
  private readonly ended = new Map<string, string>();
  private closed = false;

  constructor(
    private readonly docker: Dockerode,
    private readonly log: SandboxLogger,
    private readonly settings: StorageWatchSettings = STORAGE_WATCH,
  ) {}

  /** watches the container's writable layer until forget(episodeId), its removal, or its end for its storage */
  watch(episodeId: string, containerId: string, storageMb: number): void {
    if (this.closed) return;
    this.forget(episodeId);
    const w: Watched = { containerId, limitBytes: storageMb * 1024 * 1024, timer: null, stopped: false, last: null };
    this.byEpisode.set(episodeId, w);
    this.schedule(episodeId, w, this.settings.firstLookMs);
  }

  /** why the container was killed for what it wrote, or null */
  exceeded(containerId: string): string | null {
    return this.ended.get(containerId) ?? null;
  }

  forget(episodeId: string): void {
    const w = this.byEpisode.get(episodeId);
    if (!w) return;
    w.stopped = true;
    if (w.timer) clearTimeout(w.timer);
    this.byEpisode.delete(episodeId);
  }

  close(): void {
    this.closed = true;
    for (const id of [...this.byEpisode.keys()]) this.forget(id);
  }

  private schedule(episodeId: string, w: Watched, delayMs: number): void {
    if (w.stopped) return;
    w.timer = setTimeout(() => void this.look(episodeId, w), delayMs);
    w.timer.unref?.();
  }

  private async look(episodeId: string, w: Watched): Promise<void> {
    const t0 = performance.now();
    let sizeRw: number;
    try {
      const c = this.docker.getContainer(w.containerId);
      // the engine's `size` query (dockerode passes it on; its types do not know it)
      const info = (await (c.inspect as (o: object) => Promise<unknown>).call(c, { size: true })) as { SizeRw?: number; State?: { Running?: boolean } };
      if (info.State?.Running === false) return this.forget(episodeId);
      sizeRw = info.SizeRw ?? 0;
    } catch (err) {
      if (isNotFound(err)) return this.forget(episodeId);
      this.log.warn({ episode: episodeId, err: (err as Error).message }, 'could not read the size of an env container; trying again');
      return this.schedule(episodeId, w, this.settings.maxIntervalMs);
    }
    if (w.stopped) return;
    const costMs = performance.now() - t0;
    if (sizeRw > w.limitBytes) {
      const mb = (n: number) => Math.round(n / (1024 * 1024));
      const why = `the env wrote ${mb(sizeRw)} MB to its container's writable layer, past its storage_mb (${mb(w.limitBytes)} MB), and was stopped`;
      this.remember(w.containerId, why);
      this.forget(episodeId);
      this.log.warn({ episode: episodeId, container: w.containerId.slice(0, 12), size_rw: sizeRw, limit: w.limitBytes }, why);
      // killed at once: it is still writing
      await this.docker
        .getContainer(w.containerId)
        .kill()
        .catch((err) => {
          if (!isNotFound(err)) this.log.warn({ episode: episodeId, err: (err as Error).message }, 'could not kill an env past its storage bound');
        });
      return;
    }
    this.schedule(episodeId, w, this.nextLook(w, sizeRw, costMs));
  }

  /** when to look again: the interval, sooner as the layer grows toward its bound, never sooner than the engine can spare */
  private nextLook(w: Watched, bytes: number, costMs: number): number {
    const now = performance.now();
    const { intervalMs, nearMs, maxIntervalMs, costFactor } = this.settings;
    // the soonest the env could reach its bound, writing as fast as the engine's disk takes it (or faster, when seen)
    const seen = w.last && bytes > w.last.bytes && now > w.last.at ? (bytes - w.last.bytes) / (now - w.last.at) : 0;
    const reachMs = (w.limitBytes - bytes) / Math.max(this.settings.writeBytesPerMs, seen);
    const next = Math.min(intervalMs, Math.max(nearMs, reachMs));
    w.last = { bytes, at: now };
    return Math.min(maxIntervalMs, Math.max(next, costMs * costFactor));
  }

  private remember(containerId: string, why: string): void {
    this.ended.set(containerId, why);
    if (this.ended.size > MAX_REMEMBERED) this.ended.delete(this.ended.keys().next().value!);
  }
}
