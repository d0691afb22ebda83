/**
 * What an ended episode's env cost: CPU seconds, peak memory, bytes written (what the sandbox's
 * `usage` part can tell) and the wall time it was deployed for the episode. Read once, at the start
 * of the episode's teardown, before its env is removed (the removal waits for the reading, bounded
 * by EPISODE_COST_READ_MS); the reply that tells the client the episode ended waits for the same
 * reading and carries it in its observation's `metadata.cost` (docs/protocol.md, "What an episode
 * cost"). The figures go to the metrics here, to the console and --record through the episode's
 * `cost`. A reading that fails or runs late gives null figures: it never fails the episode.
 */
import type { Logger } from 'pino';
import { EPISODE_COST_READ_MS } from '../defaults.js';
import type { Metrics } from '../metrics.js';
import type { EpisodeCost, Observation, StepOutcome } from '../protocol/observations.js';
import type { EnvHandle, EnvUsage, EnvUsageReading } from '../sandbox/sandbox.js';
import { seconds3 } from '../util/time.js';

const NOTHING: EnvUsageReading = { cpuS: null, peakMemoryBytes: null, bytesWritten: null };
/** past the reading's bound, how long a sandbox that does not heed the abort is still waited for */
const GRACE_MS = 100;

export interface EpisodeCostDeps {
  /** the sandbox's usage part; absent: only the wall time is known */
  usage: EnvUsage | undefined;
  /** the episode's env now: its handle (null: none deployed) and since when it is the episode's (EnvLease.envSince) */
  env: () => { handle: EnvHandle | null; since: number | null };
  now: () => number;
  log: Logger;
  metrics: Metrics;
  /** the episode's split (the metrics' label) */
  split: string;
  /** default EPISODE_COST_READ_MS */
  timeoutMs?: number;
}

export class EpisodeCostMeter {
  /** the cost once read; null before, and for an episode no env was ever deployed for */
  value: EpisodeCost | null = null;
  private reading: Promise<EpisodeCost | null> | null = null;

  constructor(private readonly deps: EpisodeCostDeps) {}

  /** Reads the cost, once: every call gets the same reading. Never rejects. */
  read(): Promise<EpisodeCost | null> {
    return (this.reading ??= this.readOnce());
  }

  /** The outcome that ends the episode, with the cost in its observation's metadata. */
  async onto<O extends Observation>(out: StepOutcome<O>): Promise<StepOutcome<O>> {
    const cost = await this.read();
    return { ...out, observation: { ...out.observation, metadata: { cost } } };
  }

  private async readOnce(): Promise<EpisodeCost | null> {
    const { handle, since } = this.deps.env();
    if (since === null) return null;
    const wallS = seconds3(Math.max(0, this.deps.now() - since));
    const r = this.deps.usage && handle ? await this.readUsage(this.deps.usage, handle) : NOTHING;
    const cost: EpisodeCost = {
      cpu_s: r.cpuS === null || !(r.cpuS >= 0) || !Number.isFinite(r.cpuS) ? null : seconds3(r.cpuS * 1000),
      peak_memory_bytes: bytes(r.peakMemoryBytes),
      bytes_written: bytes(r.bytesWritten),
      wall_s: wallS,
    };
    this.value = cost;
    this.observe(cost);
    this.deps.log.debug({ event: 'cost', ...cost }, 'what the episode cost');
    return cost;
  }

  /** the sandbox's reading, bounded: what it read by the bound, or nothing */
  private async readUsage(usage: EnvUsage, handle: EnvHandle): Promise<EnvUsageReading> {
    const ms = this.deps.timeoutMs ?? EPISODE_COST_READ_MS;
    const stop = new AbortController();
    const timers: NodeJS.Timeout[] = [];
    const late = new Promise<EnvUsageReading>((resolve) => {
      timers.push(setTimeout(() => stop.abort(new Error(`the env's cost was not read within ${ms} ms`)), ms));
      timers.push(setTimeout(() => resolve(NOTHING), ms + GRACE_MS));
    });
    try {
      const read = Promise.resolve()
        .then(() => usage.read(handle, stop.signal))
        .catch((e: unknown) => {
          this.deps.log.warn({ event: 'cost_unread', err: (e as Error)?.message }, "the env's cost could not be read; its figures are null");
          return NOTHING;
        });
      return await Promise.race([read, late]);
    } finally {
      for (const t of timers) clearTimeout(t);
    }
  }

  private observe(cost: EpisodeCost): void {
    const { metrics, split } = this.deps;
    const at = { split };
    if (cost.cpu_s !== null) metrics.episodeCpu.observe(at, cost.cpu_s);
    if (cost.peak_memory_bytes !== null) metrics.episodePeakMemory.observe(at, cost.peak_memory_bytes);
    if (cost.bytes_written !== null) metrics.episodeBytesWritten.observe(at, cost.bytes_written);
    if (cost.wall_s !== null) metrics.episodeWall.observe(at, cost.wall_s);
  }
}

/** a byte count as the wire carries it: a non-negative integer, or null */
function bytes(n: number | null): number | null {
  return n === null || !Number.isFinite(n) || n < 0 ? null : Math.round(n);
}
