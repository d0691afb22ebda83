/**
 * The bounds of an env's writable layer that the server keeps by watching it through the engine
 * (docs/security.md, "A storage bound per env"): its bytes (`storage_mb`, where the engine cannot
 * limit the layer: overlay2 off xfs with pquota) and its entries (`max_files`: files and
 * directories created, changed or deleted; no engine limits those). An env past either is killed,
 * its episode ending with `storage_exceeded`.
 *
 * Bytes: the layer's SizeRw (`GET /containers/{id}/json?size=1`). The first look comes
 * `firstLookMs` after the start, the next after `intervalMs`, or sooner: after the time the env
 * would take to fill what is left of its bound writing as fast as the disk takes it
 * (`writeBytesPerMs`, or the rate last seen when faster), at least `nearMs`; so a small bound is
 * looked at often, a large one seldom, and a writer at full speed overshoots by about what it
 * writes in `nearMs` plus a look's own time. What asking costs grows with the entries in the
 * layer, not their bytes (about 1 ms for one big file, 0.06 to 0.2 s with 20,000 files, 0.8 to
 * 1.9 s with 300,000, measured): a look never comes sooner than `costFactor` times as long as the
 * last took, so that a layer of many small files cannot make the watcher hog the engine (it then
 * overshoots more), nor later than `maxIntervalMs`.
 *
 * Entries: the engine counts them only in `GET /containers/{id}/changes` (its length), which
 * costs far more (0.25 s of the engine's CPU on an empty layer, 3.2 s at 300,000) and holds the
 * container's lock meanwhile (an exec into it waits). So the size look's own time stands in: the
 * engine walks every entry for SizeRw, at least `walkMsPerFile` each, so a look of t ms says the
 * layer holds at most what the last count found plus (t less the cheapest look since that count)
 * / walkMsPerFile entries (before any count, t / walkMsPerFile). Only when that reaches the bound
 * are they counted. Counts run one at a time per engine, each no sooner than `countCostFactor`
 * times as long as the last one took after it (at most `maxIntervalMs`): whatever the envs do,
 * counting takes at most 1 / (1 + countCostFactor) of one engine thread, while a count takes
 * under maxIntervalMs / countCostFactor. A count runs beside the env's size looks, never
 * holding them (its bytes stay watched while its entries are counted).
 */
import type Dockerode from 'dockerode';
import { isNotFound } from '../engine/errors.js';
import type { SandboxLogger } from '../engine/logger.js';
import type { LayerBound } from '../sandbox.js';

/**
 * The bounds of an env's writable layer the server keeps by watching it
 * (src/sandbox/engine/storage-watch.ts). Bytes, where the engine cannot limit the layer: the env's layer is first looked at (SizeRw) `firstLookMs`
 * after its start, then after `intervalMs` or, sooner, the time it would take to fill what is left
 * of its bound at `writeBytesPerMs` (1 GB/s: above the 844 MB/s measured into a writable layer
 * here), at least `nearMs`; never sooner than `costFactor` times as long as the last look took
 * nor later than `maxIntervalMs` (a layer of 100,000 files costs the engine about 0.3 to 0.8 s a look).
 * The file bound: the engine names no count but walks every entry of the layer for SizeRw, so a
 * look's own time says how many entries the layer may hold at most, at `walkMsPerFile` (0.5 µs:
 * five times faster than the 2.5 to 3.5 µs measured here; after a count, what it found plus the
 * growth over the cheapest look since). Only when that reaches the bound are the entries counted
 * (`GET /containers/{id}/changes`: 0.25 s of the engine's CPU on an empty layer, 3.2 s at 300,000,
 * and the container's lock held meanwhile); a count starts no sooner than `countCostFactor` times
 * as long as the engine's last count took (one at a time per engine), so counts take at most a
 * sixth of one engine thread while a count takes under 6 s (none is put off past
 * `maxIntervalMs`). `filesPerMs`: the fastest an env makes files (twice the 25 a ms seen here),
 * for the soonest a file bound can be reached.
 */
const STORAGE_WATCH = {
  firstLookMs: 100,
  intervalMs: 500,
  nearMs: 50,
  maxIntervalMs: 30_000,
  costFactor: 20,
  writeBytesPerMs: 1_000_000,
  walkMsPerFile: 0.0005,
  filesPerMs: 50,
  countCostFactor: 5,
} as const;

/** what is watched of an env's layer; null: not watched (no bound, or the engine keeps it) */
export interface LayerWatch {
  storageMb: number | null;
  maxFiles: number | null;
  /** which bounds are the server's defaults, its bundle giving none (the message says so) */
  defaulted?: readonly LayerBound[];
}

interface Watched {
  containerId: string;
  limitBytes: number | null;
  maxFiles: number | null;
  defaulted: readonly LayerBound[];
  timer: NodeJS.Timeout | null;
  stopped: boolean;
  /** the last look: its size and time (performance.now()) */
  last: { bytes: number; at: number } | null;
  /** the last count of the layer's entries, and the cheapest size look (ms) since; null before the first */
  counted: { entries: number; baseMs: number } | null;
  /** a count of its entries is running */
  countRunning: boolean;
}

export interface StorageWatchSettings {
  firstLookMs: number;
  intervalMs: number;
  nearMs: number;
  maxIntervalMs: number;
  /** how fast an env may write to its layer, bytes per ms: the soonest a bound can be reached */
  writeBytesPerMs: number;
  costFactor: number;
  /** the least the engine's walk of the layer (for SizeRw) takes per entry, ms */
  walkMsPerFile: number;
  /** how fast an env may make entries, per ms: the soonest a file bound can be reached */
  filesPerMs: number;
  /** a count starts no sooner than this many times as long as the engine's last count took, after it */
  countCostFactor: number;
}

/** what ended envs for their storage, for a diagnosis after (bounded) */
const MAX_REMEMBERED = 1_000;

/** each entry of the engine's `/changes` answer has one key `"Path":` (a quote inside a path is escaped, so never followed by `":`) */
const ENTRY_KEY = '"Path":';

/**
 * The entries of the container's writable layer the engine reports changed (added, modified,
 * deleted: `docker diff`), counted as the answer streams in, never parsed whole (9.5 MB of JSON at
 * 300,000 entries).
 */
export async function countLayerEntries(docker: Dockerode, containerId: string): Promise<number> {
  const stream = await new Promise<NodeJS.ReadableStream>((resolve, reject) => {
    docker.modem.dial(
      {
        path: `/containers/${encodeURIComponent(containerId)}/changes`,
        method: 'GET',
        isStream: true,
        statusCodes: { 200: true, 404: 'no such container', 500: 'server error' },
      } as Parameters<Dockerode['modem']['dial']>[0],
      (err: unknown, s: unknown) => (err ? reject(err as Error) : resolve(s as NodeJS.ReadableStream)),
    );
  });
  let entries = 0;
  // a key split between two chunks is found in the tail kept from the first, never counted twice
  let tail = '';
  for await (const chunk of stream) {
    const text = tail + (typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('latin1'));
    for (let i = text.indexOf(ENTRY_KEY); i !== -1; i = text.indexOf(ENTRY_KEY, i + ENTRY_KEY.length)) entries++;
    tail = text.slice(-(ENTRY_KEY.length - 1));
  }
  return entries;
}

export class StorageWatch {
  private readonly byEnv = new Map<string, Watched>();
  /** container id → why it was killed */
  private readonly ended = new Map<string, string>();
  private closed = false;
  /** a count of some env's entries is running on this engine */
  private counting = false;
  /** when the engine may be asked for the next count (performance.now()) */
  private nextCountAt = 0;

  constructor(
    private readonly docker: Dockerode,
    private readonly log: SandboxLogger,
    private readonly settings: StorageWatchSettings = STORAGE_WATCH,
    /** the clock a look's and a count's time are read on (a test's may count only what the engine took) */
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** watches the container's writable layer until forget(envId), its removal, or its end for its storage; nothing to watch: nothing */
  watch(envId: string, containerId: string, bounds: LayerWatch): void {
    if (this.closed) return;
    this.forget(envId);
    if (bounds.storageMb === null && bounds.maxFiles === null) return;
    const w: Watched = {
      containerId,
      limitBytes: bounds.storageMb === null ? null : bounds.storageMb * 1024 * 1024,
      maxFiles: bounds.maxFiles,
      defaulted: bounds.defaulted ?? [],
      timer: null,
      stopped: false,
      last: null,
      counted: null,
      countRunning: false,
    };
    this.byEnv.set(envId, w);
    this.schedule(envId, w, this.settings.firstLookMs);
  }

  /** why the container was killed for what it wrote, or null */
  exceeded(containerId: string): string | null {
    return this.ended.get(containerId) ?? null;
  }

  forget(envId: string): void {
    const w = this.byEnv.get(envId);
    if (!w) return;
    w.stopped = true;
    if (w.timer) clearTimeout(w.timer);
    this.byEnv.delete(envId);
  }

  close(): void {
    this.closed = true;
    for (const id of [...this.byEnv.keys()]) this.forget(id);
  }

  private schedule(envId: string, w: Watched, delayMs: number): void {
    if (w.stopped) return;
    w.timer = setTimeout(() => void this.look(envId, w), delayMs);
    w.timer.unref?.();
  }

  private async look(envId: string, w: Watched): Promise<void> {
    const t0 = this.now();
    let sizeRw: number;
    try {
      const c = this.docker.getContainer(w.containerId);
      // the engine's `size` query (dockerode passes it on; its types do not know it)
      const info = (await (c.inspect as (o: object) => Promise<unknown>).call(c, { size: true })) as { SizeRw?: number; State?: { Running?: boolean } };
      if (info.State?.Running === false) return this.forget(envId);
      sizeRw = info.SizeRw ?? 0;
    } catch (err) {
      if (isNotFound(err)) return this.forget(envId);
      this.log.warn({ episode: envId, err: (err as Error).message }, 'could not read the size of an env container; trying again');
      return this.schedule(envId, w, this.settings.maxIntervalMs);
    }
    if (w.stopped) return;
    const costMs = this.now() - t0;
    if (w.limitBytes !== null && sizeRw > w.limitBytes) {
      const mb = (n: number) => Math.round(n / (1024 * 1024));
      const bound = w.defaulted.includes('storageMb')
        ? `the server's default storage bound (${mb(w.limitBytes)} MB, --default-storage-mb; its bundle gives no storage_mb)`
        : `its storage_mb (${mb(w.limitBytes)} MB)`;
      const why = `the env wrote ${mb(sizeRw)} MB to its container's writable layer, past ${bound}, and was stopped`;
      return this.stop(envId, w, why, { size_rw: sizeRw, limit: w.limitBytes });
    }
    let entries: number | null = null;
    let countIn: number | null = null;
    if (w.maxFiles !== null) {
      entries = this.entriesAtMost(w, costMs);
      if (entries >= w.maxFiles && !w.countRunning) {
        const waitMs = this.countWaitMs();
        // in the background: the size looks go on meanwhile (a count takes the engine far longer)
        if (waitMs === 0) void this.count(envId, w, costMs);
        else countIn = waitMs;
      }
    }
    const next = this.nextLook(w, sizeRw, entries, costMs);
    // a count the engine cannot take yet is asked for again once it can (after a size look: the env may have shrunk)
    this.schedule(envId, w, countIn === null ? next : Math.min(next, Math.max(countIn, costMs * this.settings.costFactor)));
  }

  /** the most entries the layer can hold, by how long the engine took to walk it for SizeRw */
  private entriesAtMost(w: Watched, lookMs: number): number {
    const perEntry = this.settings.walkMsPerFile;
    if (w.counted === null) return lookMs / perEntry;
    w.counted.baseMs = Math.min(w.counted.baseMs, lookMs);
    return w.counted.entries + (lookMs - w.counted.baseMs) / perEntry;
  }

  /** how long until this engine may be asked for a count: 0 now */
  private countWaitMs(): number {
    if (this.counting) return this.settings.nearMs;
    return Math.max(0, this.nextCountAt - this.now());
  }

  /**
   * Counts the layer's entries (the engine's count, one at a time on it): past the bound the env is
   * stopped; else the count and the size look `lookMs` that asked for it are what later looks are
   * measured from. A failed count is asked for again by a later look.
   */
  private async count(envId: string, w: Watched, lookMs: number): Promise<void> {
    this.counting = true;
    w.countRunning = true;
    const t0 = this.now();
    let entries: number;
    try {
      entries = await countLayerEntries(this.docker, w.containerId);
    } catch (err) {
      if (isNotFound(err)) this.forget(envId);
      else if (!w.stopped)
        this.log.warn({ episode: envId, err: (err as Error).message }, "could not count the entries of an env container's writable layer; trying again");
      return;
    } finally {
      const now = this.now();
      this.nextCountAt = now + Math.min(this.settings.maxIntervalMs, (now - t0) * this.settings.countCostFactor);
      this.counting = false;
      w.countRunning = false;
    }
    this.log.debug(
      { episode: envId, container: w.containerId.slice(0, 12), entries, ms: Math.round(this.now() - t0) },
      "counted the entries of an env container's writable layer",
    );
    if (w.stopped || w.maxFiles === null) return;
    if (entries > w.maxFiles) {
      const bound = w.defaulted.includes('maxFiles')
        ? `the server's default file bound (${thousands(w.maxFiles)}, --default-max-files; its bundle gives no max_files)`
        : `its max_files (${thousands(w.maxFiles)})`;
      const why = `the env made ${thousands(entries)} entries (files and directories created, changed or deleted) in its container's writable layer, past ${bound}, and was stopped`;
      return this.stop(envId, w, why, { entries, max_files: w.maxFiles });
    }
    w.counted = { entries, baseMs: lookMs };
  }

  /** kills the env at once (it is still writing), keeping why for its diagnosis */
  private async stop(envId: string, w: Watched, why: string, fields: Record<string, number>): Promise<void> {
    this.remember(w.containerId, why);
    this.forget(envId);
    this.log.warn({ episode: envId, container: w.containerId.slice(0, 12), ...fields }, why);
    await this.docker
      .getContainer(w.containerId)
      .kill()
      .catch((err) => {
        if (!isNotFound(err)) this.log.warn({ episode: envId, err: (err as Error).message }, 'could not kill an env past its storage bound');
      });
  }

  /** when to look again: the interval, sooner as the layer grows toward a bound, never sooner than the engine can spare */
  private nextLook(w: Watched, bytes: number, entries: number | null, costMs: number): number {
    const now = this.now();
    const { intervalMs, nearMs, maxIntervalMs, costFactor } = this.settings;
    let reachMs = Infinity;
    if (w.limitBytes !== null) {
      // the soonest the env could reach its bound, writing as fast as the engine's disk takes it (or faster, when seen)
      const seen = w.last && bytes > w.last.bytes && now > w.last.at ? (bytes - w.last.bytes) / (now - w.last.at) : 0;
      reachMs = (w.limitBytes - bytes) / Math.max(this.settings.writeBytesPerMs, seen);
    }
    if (w.maxFiles !== null && entries !== null) reachMs = Math.min(reachMs, (w.maxFiles - entries) / this.settings.filesPerMs);
    const next = Math.min(intervalMs, Math.max(nearMs, reachMs));
    w.last = { bytes, at: now };
    return Math.min(maxIntervalMs, Math.max(next, costMs * costFactor));
  }

  private remember(containerId: string, why: string): void {
    this.ended.set(containerId, why);
    if (this.ended.size > MAX_REMEMBERED) this.ended.delete(this.ended.keys().next().value!);
  }
}

/** 123456 → "123,456" */
function thousands(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}
