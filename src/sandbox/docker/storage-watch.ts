/**
 * The storage bound of envs whose engine cannot limit their writable layer (overlay2 off xfs with
 * pquota: docs/security.md, "A storage bound per env"): the layer is watched through the engine
 * (`GET /containers/{id}/json?size=1`, its SizeRw) and an env past its `storage_mb` is killed, its
 * episode ending with `storage_exceeded`. What asking costs grows with the files in the layer, not
 * their bytes (about 1 ms for one big file, 0.1 to 0.2 s with 20,000 files, measured): the next
 * look waits `costFactor` times as long as the last took, so that a layer of many small files
 * cannot make the watcher hog the engine, and at least `minIntervalMs`. An env may overshoot by
 * what it writes in one interval (the engine's write rate times the interval).
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
    private readonly settings: { minIntervalMs: number; maxIntervalMs: number; costFactor: number } = STORAGE_WATCH,
  ) {}

  /** watches the container's writable layer until forget(episodeId), its removal, or its end for its storage */
  watch(episodeId: string, containerId: string, storageMb: number): void {
    if (this.closed) return;
    this.forget(episodeId);
    const w: Watched = { containerId, limitBytes: storageMb * 1024 * 1024, timer: null, stopped: false };
    this.byEpisode.set(episodeId, w);
    this.schedule(episodeId, w, 0);
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
    const next = Math.min(this.settings.maxIntervalMs, Math.max(this.settings.minIntervalMs, costMs * this.settings.costFactor));
    this.schedule(episodeId, w, next);
  }

  private remember(containerId: string, why: string): void {
    this.ended.set(containerId, why);
    if (this.ended.size > MAX_REMEMBERED) this.ended.delete(this.ended.keys().next().value!);
  }
}
