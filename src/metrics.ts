/**
 * Prometheus metrics, one registry per app (prom-client's global registry throws when a process
 * builds two apps). Labels are low-cardinality only: never an episode or task id.
 * docs/metrics.md has the table an operator reads; keep it in step with this file.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { LANES, type LaneCounts } from './protocol/lanes.js';
import { EnvImageStateSchema, type EnvImageState } from './protocol/server.js';

export interface GaugeSources {
  running(): number;
  /** resets waiting for a slot, per lane */
  waiting(): LaneCounts;
  capacity(): number;
  networks(): number;
  /** deploys running, and waiting for a turn (--max-concurrent-deploys) */
  deploysInFlight?(): number;
  deploysWaiting?(): number;
  /** the network stock (--network-stock), when the sandbox keeps one */
  networkStock?(): { size: number; ready: number; recycled: number; out: number } | null;
  /** the warm pool, when there is one */
  pool?(): { ready: number; deploying: number; target: number; refilling: boolean } | null;
  /** E2B sandboxes (src/e2b/) by state: waiting for a slot, deploying, running, paused */
  sandboxes?(): Record<'waiting' | 'deploying' | 'running' | 'paused', number>;
  /** the bundle's env images by state (src/bundle/env-catalog.ts) */
  envImages?(): Record<EnvImageState, number>;
}

const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

export class Metrics {
  readonly registry = new Registry();
  readonly resets: Counter<'outcome'>;
  readonly queueWait: Histogram<'lane'>;
  readonly deploy: Histogram;
  readonly deployStage: Histogram<'stage'>;
  readonly toolCall: Histogram<'outcome'>;
  readonly teardown: Histogram<'outcome'>;
  readonly steps: Counter;
  readonly envFailures: Counter<'reason'>;
  readonly rewards: Histogram<'split'>;
  readonly episodesEnded: Counter<'end_reason'>;
  readonly modelCalls: Counter<'outcome'>;
  readonly modelCallSeconds: Histogram<'stream'>;
  readonly modelTokens: Counter<'kind'>;
  /** the E2B side (src/e2b/, docs/e2b.md) */
  readonly sandboxCreates: Counter<'outcome'>;
  readonly sandboxesEnded: Counter<'end'>;
  readonly sandboxCalls: Histogram<'call' | 'outcome'>;
  readonly sandboxFileBytes: Counter<'direction'>;
  readonly teardownStage: Histogram<'stage'>;
  readonly poolHits: Counter;
  readonly poolMisses: Counter;
  readonly poolEvictions: Counter;
  readonly poolRefillFailures: Counter;
  readonly poolDiscarded: Counter<'reason'>;
  /** what ended episodes' envs cost (src/episodes/episode-cost.ts), by split; a figure the sandbox cannot tell is not observed */
  readonly episodeCpu: Histogram<'split'>;
  readonly episodePeakMemory: Histogram<'split'>;
  readonly episodeBytesWritten: Histogram<'split'>;
  readonly episodeWall: Histogram<'split'>;

  /**
   * @param processMetrics also export the process' own figures (process_*, nodejs_*: memory, CPU,
   *   event-loop lag, handles); on by default, as an operator wants them beside the episodes'
   */
  constructor(sources: GaugeSources, prefix = 'openenv_', processMetrics = true) {
    const r = this.registry;
    if (processMetrics) collectDefaultMetrics({ register: r });
    new Gauge({
      name: `${prefix}episodes_running`,
      help: 'Episodes holding an env slot (deploying, running or tearing down)',
      registers: [r],
      collect() {
        this.set(sources.running());
      },
    });
    new Gauge({
      name: `${prefix}resets_waiting`,
      help: 'Resets waiting in the queue for a slot, by lane (high, normal, low)',
      labelNames: ['lane'],
      registers: [r],
      collect() {
        const waiting = sources.waiting();
        for (const lane of LANES) this.set({ lane }, waiting[lane]);
      },
    });
    new Gauge({
      name: `${prefix}capacity`,
      help: 'max_concurrent_envs: env slots in all',
      registers: [r],
      collect() {
        this.set(sources.capacity());
      },
    });
    new Gauge({
      name: `${prefix}episode_networks`,
      help: 'Episode Docker networks in use',
      registers: [r],
      collect() {
        this.set(sources.networks());
      },
    });
    /** one figure of the network stock's, read at each scrape (0 without a stock) */
    const stockGauge = (name: string, help: string, figure: 'ready' | 'out' | 'size') =>
      new Gauge({
        name: `${prefix}${name}`,
        help,
        registers: [r],
        collect() {
          this.set(sources.networkStock?.()?.[figure] ?? 0);
        },
      });
    stockGauge('network_stock_ready', '--network-stock: episode networks made ahead of demand and ready for a deploy', 'ready');
    stockGauge(
      'network_stock_out',
      '--network-stock: networks out with live episodes that come back to the stock when they end (recycling), counted towards its size',
      'out',
    );
    new Counter({
      name: `${prefix}network_stock_recycled_total`,
      help: '--network-stock: networks that came back empty from an ended episode into the stock, instead of being removed',
      registers: [r],
      collect() {
        this.reset();
        this.inc(sources.networkStock?.()?.recycled ?? 0);
      },
    });
    stockGauge('network_stock_size', '--network-stock: episode networks the server keeps made ahead of demand (0: none)', 'size');
    this.resets = new Counter({
      name: `${prefix}resets_total`,
      help: 'Resets by outcome: started, invalid (no such task), capacity (no slot in time or queue full), deploy_failed, aborted (client left), shutting_down, error',
      labelNames: ['outcome'],
      registers: [r],
    });
    this.queueWait = new Histogram({
      name: `${prefix}queue_wait_seconds`,
      help: 'Time a reset waited for a slot (also when it got none), by the lane it waited in',
      labelNames: ['lane'],
      buckets: DURATION_BUCKETS,
      registers: [r],
    });
    // every lane's series exists from the start, so a dashboard's rate() has a zero to start from
    for (const lane of LANES) this.queueWait.zero({ lane });
    this.deploy = new Histogram({
      name: `${prefix}deploy_seconds`,
      help: 'Env deploy time: network, container, readiness and the env reset',
      buckets: DURATION_BUCKETS,
      registers: [r],
    });
    this.deployStage = new Histogram({
      name: `${prefix}deploy_stage_seconds`,
      help:
        "Where an episode's own deploy (not a warm-pool env's) spends its time, stage by stage: turn (the wait for a turn under --max-concurrent-deploys), " +
        "the sandbox's stages (docker: network, create, start, ready; swarm: nodes, overlay, service, schedule, start, address, attach, ready), " +
        'then env_reset (attaching to the env and its /reset)',
      labelNames: ['stage'],
      buckets: DURATION_BUCKETS,
      registers: [r],
    });
    this.toolCall = new Histogram({
      name: `${prefix}tool_call_seconds`,
      help: 'Tool call round trip to the env, by outcome',
      labelNames: ['outcome'],
      buckets: DURATION_BUCKETS,
      registers: [r],
    });
    this.teardown = new Histogram({
      name: `${prefix}teardown_seconds`,
      help: 'Episode teardown time, by outcome',
      labelNames: ['outcome'],
      buckets: DURATION_BUCKETS,
      registers: [r],
    });
    this.steps = new Counter({ name: `${prefix}steps_total`, help: 'Steps (list_tools and call_tool) served', registers: [r] });
    this.envFailures = new Counter({ name: `${prefix}env_failures_total`, help: 'Env failures by reason', labelNames: ['reason'], registers: [r] });
    this.rewards = new Histogram({
      name: `${prefix}episode_reward`,
      help: 'Rewards of scored episodes, by split',
      labelNames: ['split'],
      buckets: [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1],
      registers: [r],
    });
    this.teardownStage = new Histogram({
      name: `${prefix}teardown_stage_seconds`,
      help: "Where an ended episode's teardown time goes: env_removed (from its start until the env container is killed and removed, when its slot frees) and network_removed (after that, off the slot)",
      labelNames: ['stage'],
      buckets: DURATION_BUCKETS,
      registers: [r],
    });
    new Gauge({
      name: `${prefix}deploys_in_flight`,
      help: 'Env deploys running (--max-concurrent-deploys caps it), pool refills and network-stock refills included',
      registers: [r],
      collect() {
        this.set(sources.deploysInFlight?.() ?? 0);
      },
    });
    new Gauge({
      name: `${prefix}deploys_waiting`,
      help: 'Env deploys waiting for a turn under --max-concurrent-deploys, pool refills and network-stock refills included',
      registers: [r],
      collect() {
        this.set(sources.deploysWaiting?.() ?? 0);
      },
    });
    new Gauge({
      name: `${prefix}pool_envs`,
      help: 'Warm pool envs by state: ready (to hand out) or deploying (refills)',
      labelNames: ['state'],
      registers: [r],
      collect() {
        const p = sources.pool?.();
        this.set({ state: 'ready' }, p?.ready ?? 0);
        this.set({ state: 'deploying' }, p?.deploying ?? 0);
      },
    });
    new Gauge({
      name: `${prefix}pool_target`,
      help: '--warm-pool: envs the pool keeps deployed ahead of demand',
      registers: [r],
      collect() {
        this.set(sources.pool?.()?.target ?? 0);
      },
    });
    new Gauge({
      name: `${prefix}pool_refilling`,
      help: '1 while the warm pool refills, 0 while refills are stopped after repeated failures (or there is no pool)',
      registers: [r],
      collect() {
        this.set(sources.pool?.()?.refilling ? 1 : 0);
      },
    });
    this.poolHits = new Counter({ name: `${prefix}pool_hits_total`, help: 'Resets that took a pooled env', registers: [r] });
    this.poolMisses = new Counter({
      name: `${prefix}pool_misses_total`,
      help: 'Resets on a server with a warm pool that deployed their own env',
      registers: [r],
    });
    this.poolEvictions = new Counter({
      name: `${prefix}pool_evictions_total`,
      help: 'Pooled envs torn down to give their slot to a waiting reset of another env',
      registers: [r],
    });
    this.poolRefillFailures = new Counter({ name: `${prefix}pool_refill_failures_total`, help: 'Warm pool refills whose deploy failed', registers: [r] });
    this.poolDiscarded = new Counter({
      name: `${prefix}pool_discarded_total`,
      help: 'Pooled envs torn down unused, by reason: dead (at hand-out or in the pool), evicted (for a waiting reset), stale (for an env in demand: its env asked for least lately), expired (deployed for a group, not taken in time), failed (deploy), stopped (deploying when refilling stopped after repeated failures), closed (drain)',
      labelNames: ['reason'],
      registers: [r],
    });
    this.episodeCpu = new Histogram({
      name: `${prefix}episode_cpu_seconds`,
      help: "CPU seconds an ended episode's env used over its whole life, by split (not observed where the sandbox cannot tell)",
      labelNames: ['split'],
      buckets: [0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600],
      registers: [r],
    });
    this.episodePeakMemory = new Histogram({
      name: `${prefix}episode_peak_memory_bytes`,
      help: "The most memory an ended episode's env held at once, by split (not observed where the sandbox cannot tell)",
      labelNames: ['split'],
      buckets: [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384].map((mb) => mb * 1024 * 1024),
      registers: [r],
    });
    this.episodeBytesWritten = new Histogram({
      name: `${prefix}episode_bytes_written`,
      help: "Bytes an ended episode's env wrote to the host's disk, by split (not observed where the sandbox cannot tell)",
      labelNames: ['split'],
      buckets: [0, 1, 16, 64, 256, 1024, 4096, 16384, 65536].map((mb) => mb * 1024 * 1024),
      registers: [r],
    });
    this.episodeWall = new Histogram({
      name: `${prefix}episode_wall_seconds`,
      help: "Seconds an ended episode's env was deployed for it (from its deploy's start or its hand-out from the warm pool to its removal), by split",
      labelNames: ['split'],
      buckets: [1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200],
      registers: [r],
    });
    this.episodesEnded = new Counter({
      name: `${prefix}episodes_ended_total`,
      help: 'Episodes ended, by end reason',
      labelNames: ['end_reason'],
      registers: [r],
    });
    // the model gateway's (--model-url, --model-from-reset)
    this.modelCalls = new Counter({
      name: `${prefix}model_calls_total`,
      help: "Envs' model calls through the gateway, by outcome",
      labelNames: ['outcome'],
      registers: [r],
    });
    this.modelCallSeconds = new Histogram({
      name: `${prefix}model_call_seconds`,
      help: 'Model calls through the gateway that succeeded, start to end, streamed or not',
      labelNames: ['stream'],
      buckets: DURATION_BUCKETS,
      registers: [r],
    });
    this.modelTokens = new Counter({
      name: `${prefix}model_tokens_total`,
      help: 'Tokens the upstream reported for model calls through the gateway',
      labelNames: ['kind'],
      registers: [r],
    });
    new Gauge({
      name: `${prefix}env_images`,
      help: "The bundle's env images by state: ready, building, queued, failed, missing (--images prebuilt: not on the engine)",
      labelNames: ['state'],
      registers: [r],
      collect() {
        const s = sources.envImages?.();
        for (const state of EnvImageStateSchema.options) this.set({ state }, s?.[state] ?? 0);
      },
    });
    // the E2B side's (docs/e2b.md)
    new Gauge({
      name: `${prefix}e2b_sandboxes`,
      help: 'E2B sandboxes by state: waiting (for a slot, or its image), deploying, running, paused; every one but the waiting holds an env slot',
      labelNames: ['state'],
      registers: [r],
      collect() {
        const s = sources.sandboxes?.();
        for (const state of ['waiting', 'deploying', 'running', 'paused'] as const) this.set({ state }, s?.[state] ?? 0);
      },
    });
    this.sandboxCreates = new Counter({
      name: `${prefix}e2b_creates_total`,
      help: 'E2B sandbox creates by outcome: started, refused (bad request, unknown template, image not allowed), capacity (no slot within the reset timeout), deploy_failed, aborted (client left), shutting_down',
      labelNames: ['outcome'],
      registers: [r],
    });
    this.sandboxesEnded = new Counter({
      name: `${prefix}e2b_sandboxes_ended_total`,
      help: 'E2B sandboxes ended, by how: killed (by the client), timeout (at its timeout), failed (its container died), shutdown (the drain)',
      labelNames: ['end'],
      registers: [r],
    });
    this.sandboxCalls = new Histogram({
      name: `${prefix}e2b_call_seconds`,
      help: "Calls of the E2B sandbox side (envd's), by call (process.start, files.write, filesystem.stat…) and outcome (ok, error): a process's start is timed to its end",
      labelNames: ['call', 'outcome'],
      buckets: DURATION_BUCKETS,
      registers: [r],
    });
    this.sandboxFileBytes = new Counter({
      name: `${prefix}e2b_file_bytes_total`,
      help: 'Bytes moved by the E2B file transfer, by direction: in (written into sandboxes), out (read from them)',
      labelNames: ['direction'],
      registers: [r],
    });
  }
}
