/**
 * `npm run bench`: how the server deploys envs under a trainer's load, each figure against a
 * baseline taken in the same run on the same engine (fixture env; needs a Docker engine and the
 * offline base image, docker/make-local-node-base.sh). About seven minutes on a 2-core machine
 * at the defaults, about eleven with --burst 256 (256 live envs).
 *
 *   1. Sustained (--phases sustained): --episodes (128) episodes, --concurrency (16) at a time, each
 *      reset + list_tools + end_turn, cold (no pool), for each --max-concurrent-deploys value in
 *      --deploys (4,8), and twice more at the best value: with the network stock off
 *      (--network-stock 0), and with a stock of fresh networks each removed with its episode
 *      (--no-network-recycling; the default recycles them). Baselines: bare create/start/readiness/rm through the same engine API
 *      at the same parallelism, (a) on an internal network per worker slot made before the clock
 *      starts, all 16 starting at once and again at most the picked deploy value at once (the
 *      server is compared with the faster: the engine's best pace on ready networks), (b) in a
 *      fresh internal network each, (c) on Docker's default bridge. The best value is the one the
 *      burst runs with (and the default's evidence).
 *   2. Burst (--phases burst): --burst B (64) resets at once with --max-concurrent-envs B, against
 *      B bare container starts + readiness at once on Docker's default bridge (and again, like for
 *      like, each on an internal network made beforehand): cold with the server's network stock,
 *      cold with --network-stock 0, and warm (--warm-pool B, full before the burst; single warm
 *      resets one at a time first). For each: reset latency p50/p95/max, the time until all B were
 *      up, every episode answering an echo call while all are up, the server's RSS and the engine's
 *      memory with all live, and the time until every teardown had finished. Cold runs also say
 *      where an episode's slot time went (deploy, env removal, network removal) and its deploy's
 *      stages (openenv_deploy_stage_seconds) beside the bare starts' create/start/ready. --cpu-profile:
 *      the warm server runs under the V8 inspector, and its main thread is profiled over the burst
 *      alone (the heaviest functions printed; the whole profile written as a .cpuprofile).
 *   3. Lanes (--phases lanes): --lanes-train T (64) training resets at once at --max-concurrent-envs
 *      --lanes-cap C (8), each holding its env --lanes-hold S (2) seconds, then --lanes-eval E (8)
 *      eval resets at once while the training ones hold every slot or wait: each eval reset's queue
 *      wait and latency, p50/p95, lanes on (the default, eval=high) against lanes off
 *      (--split-priority eval=normal) in the same run; the training resets' waits beside them.
 *      About a minute and a half at the defaults.
 *   4. Gateway (--phases gateway; first, as it needs no engine): the model gateway's overhead per
 *      call, the same calls directly and through an episode's door, one at a time
 *      (--gateway-calls pairs, a whole reply and a stream of --gateway-chunks events) and
 *      --gateway-concurrency harnesses at once (--gateway-per-worker calls each); p50/p95 of each
 *      and what the gateway adds (scripts/bench/gateway.ts). About a minute.
 *   5. Shell (--phases shell, scripts/bench/shell.ts): `bash` call latency p50/p95 through the
 *      persistent shell against a bare dockerode exec of the same command (--shell-calls, 200), and
 *      a cold reset of a served Harbor task (the shipped dataset, imported) against a bare
 *      create/start/exec-ready/remove loop (--shell-resets, 20); needs docker/make-local-debian-base.sh's
 *      image (--debian-image). Not in the default phases. About a minute.
 *   6. Verify (--phases verify, scripts/bench/verify.ts): what a verified episode's end costs
 *      (end_turn: the stop, the toolchain check or a clean container, the tests), in place against
 *      clean, --verify-episodes (20) of each, and against an earlier version's server in the same
 *      run when --verify-baseline names a built checkout of it. Not in the default phases.
 *   7. E2B (--phases e2b, scripts/bench/e2b.ts): the server as an E2B provider through the real
 *      `e2b` SDK against bare dockerode calls of the same work: create to first command
 *      (--e2b-creates, 20), `commands.run` latency (--e2b-calls, 200), file write and read
 *      throughput (--e2b-file-mb MB, --e2b-file-rounds times) against the engine's archive
 *      calls; needs docker/make-local-debian-base.sh's image. Not in the default phases. About two
 *      minutes.
 *   8. Dataset (--phases dataset, scripts/bench/dataset.ts): a synthetic Harbor dataset of
 *      --dataset-tasks (200) tasks, an image each, served from an engine without its images:
 *      start to /health, the first episode (its image not built), every task once at
 *      --dataset-concurrency (16), --dataset-build-concurrency (4) builds at once, against a bare
 *      build + run of a dataset of the same shape; --dataset-server-arg passes the server more
 *      options. Needs docker/make-local-debian-base.sh's image. Not in the default phases. About
 *      five minutes at 200 tasks.
 *   9. Live (--phases live, --live N, 1024): N episodes live at once, each in its own network,
 *      against N bare starts each on an internal network made beforehand; memory per live
 *      episode. Not in the default phases.
 *  10. Groups (--phases groups, scripts/bench/groups.ts): a GRPO trainer's groups over a dataset whose
 *      tasks each have their own env: --groups-tasks (32) tasks of their own env (the fixture's env
 *      under as many names), a group of --groups-size (8) resets of each, each within
 *      --groups-stagger ms (1000) of its group's start, a group every --groups-gap ms (500), at
 *      --warm-pool 2×size and --max-concurrent-envs 4×size; with --warm-pool-group size and again
 *      off, each beside warm single resets of the same server (p95 against the warm p95). Not in
 *      the default phases; `--phases groups --groups-tasks 4` runs it small (about a minute).
 *  11. Afterwards: what of the run is left on the engine (containers, networks, volumes labelled
 *      by the bench or by its server instances): reported, then removed.
 *
 * Writes bench-results/bench-<time>.json (every figure) and .svg (reset-latency CDFs) and prints
 * where. Targets are reported, never asserted. This file is the orchestration (the phases, the
 * tables, the figures); the parts are in scripts/bench/: baselines.ts (bare containers), server.ts
 * (the server under test), engine.ts (memory and leftovers on the engine), load.ts (sustained and
 * burst runs), lanes.ts (the lanes run), stats.ts, charts.ts, context.ts.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { networkStockSize } from '../src/config.js';
import { DEFAULT_MAX_CONCURRENT_DEPLOYS, SUBNET_POOL } from '../src/defaults.js';
import { burstBare, envImage, sustainedBare, type BareNetworks } from './bench/baselines.js';
import { cdfSvg } from './bench/charts.js';
import { CpuProfiler, summarizeProfile, type CpuProfile, type ProfileSummary } from './bench/cpu-profile.js';
import { benchContext } from './bench/context.js';
import { countRunLeftovers, removeRunLeftovers } from './bench/engine.js';
import { gatewayPhase, printGateway, type GatewayLoad } from './bench/gateway.js';
import { lanesRun, type LanesLoad, type LanesRun } from './bench/lanes.js';
import type { SustainedRate } from './bench/load.js';
import {
  burstServer,
  finishEpisode,
  slotTime,
  startEpisode,
  startServer,
  sustainedServer,
  waitNetworkStock,
  waitPool,
  type ServerBurst,
  type SlotTime,
} from './bench/server.js';
import { printShell, shellPhase } from './bench/shell.js';
import { verifyPhase } from './bench/verify.js';
import { e2bPhase, printE2b } from './bench/e2b.js';
import { datasetPhase, printDataset } from './bench/dataset.js';
import { percentile, type BurstSummary } from './bench/stats.js';
import { LOCAL_NODE_IMAGE } from './lib/local-node-image.js';
import { harnessBurst, printHarnessBurst } from './bench/harness.js';
import { groupsPhase, printGroups } from './bench/groups.js';

const { values } = parseArgs({
  options: {
    burst: { type: 'string', default: '64' },
    episodes: { type: 'string', default: '128' },
    concurrency: { type: 'string', default: '16' },
    deploys: { type: 'string', default: '4,8' },
    singles: { type: 'string', default: '20' },
    phases: { type: 'string', default: 'sustained,burst,lanes,gateway,harness' },
    'gateway-calls': { type: 'string', default: '2000' },
    'gateway-chunks': { type: 'string', default: '64' },
    'gateway-concurrency': { type: 'string', default: '32' },
    'gateway-per-worker': { type: 'string', default: '50' },
    'harness-burst': { type: 'string', default: '32' },
    'lanes-train': { type: 'string', default: '64' },
    'lanes-eval': { type: 'string', default: '8' },
    'lanes-cap': { type: 'string', default: '8' },
    'lanes-hold': { type: 'string', default: '2' },
    'node-image': { type: 'string', default: LOCAL_NODE_IMAGE },
    'cpu-profile': { type: 'boolean', default: false },
    'shell-calls': { type: 'string', default: '200' },
    'shell-resets': { type: 'string', default: '20' },
    'debian-image': { type: 'string', default: 'openenv-local/debian:bookworm' },
    'verify-episodes': { type: 'string', default: '20' },
    'verify-baseline': { type: 'string' },
    'e2b-creates': { type: 'string', default: '20' },
    'e2b-calls': { type: 'string', default: '200' },
    'e2b-file-mb': { type: 'string', default: '50' },
    'e2b-file-rounds': { type: 'string', default: '5' },
    live: { type: 'string', default: '1024' },
    'dataset-tasks': { type: 'string', default: '200' },
    'dataset-concurrency': { type: 'string', default: '16' },
    'dataset-build-concurrency': { type: 'string', default: '4' },
    'dataset-cold-resets': { type: 'string', default: '10' },
    'dataset-server-arg': { type: 'string', multiple: true, default: [] },
    'groups-tasks': { type: 'string', default: '32' },
    'groups-size': { type: 'string', default: '8' },
    'groups-stagger': { type: 'string', default: '1000' },
    'groups-gap': { type: 'string', default: '500' },
  },
});
function positive(name: string, v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, not ${JSON.stringify(v)}`);
  return n;
}
const BURST = positive('burst', values.burst);
const EPISODES = positive('episodes', values.episodes);
const CONCURRENCY = positive('concurrency', values.concurrency);
const DEPLOY_VALUES = values.deploys.split(',').map((d) => positive('deploys', d));
const SINGLES = positive('singles', values.singles);
const PHASES = new Set(values.phases.split(','));
for (const p of PHASES)
  if (!['sustained', 'burst', 'lanes', 'gateway', 'harness', 'shell', 'verify', 'e2b', 'dataset', 'live', 'groups'].includes(p))
    throw new Error(`--phases takes sustained, burst, lanes, gateway, harness, shell, verify, e2b, dataset, live and/or groups, not ${JSON.stringify(p)}`);
const LANES_HOLD_S = Number(values['lanes-hold']);
if (!(LANES_HOLD_S >= 0)) throw new Error(`--lanes-hold must be a number of seconds, not ${JSON.stringify(values['lanes-hold'])}`);
const RESULTS = fileURLToPath(new URL('../bench-results', import.meta.url));
const ctx = benchContext(values['node-image']);
const { progress } = ctx;
const LOAD = { episodes: EPISODES, concurrency: CONCURRENCY };
const LANES_CAP = positive('lanes-cap', values['lanes-cap']);
const LANES_LOAD = {
  train: positive('lanes-train', values['lanes-train']),
  evals: positive('lanes-eval', values['lanes-eval']),
  cap: LANES_CAP,
  holdS: LANES_HOLD_S,
};
const GATEWAY_LOAD: GatewayLoad = {
  calls: positive('gateway-calls', values['gateway-calls']),
  chunks: positive('gateway-chunks', values['gateway-chunks']),
  concurrency: positive('gateway-concurrency', values['gateway-concurrency']),
  perWorker: positive('gateway-per-worker', values['gateway-per-worker']),
};
/** the server's network stock off: every deploy makes its episode's network on the reset path */
const STOCK_OFF = ['--network-stock', '0'];
/** the networks a server with `maxConcurrentEnvs` keeps ready: its default stock, or none */
const stockSize = (maxConcurrentEnvs: number, off: boolean) =>
  networkStockSize({ networkStock: off ? 0 : undefined, maxConcurrentEnvs, subnetPool: SUBNET_POOL });

const round = (x: number, d = 3) => Number(x.toFixed(d));

interface SustainedFigures {
  episodes: number;
  concurrency: number;
  bare_per_s: Record<BareNetworks, number> & { premade_capped: number; premade_best: number };
  /** the starts at once of the capped premade baseline: the picked --max-concurrent-deploys */
  bare_premade_capped_starts: number;
  server: Record<
    string,
    { deploys: number; network_stock: number; recycling: boolean; per_s: number; vs_bare_premade: number; vs_bare_fresh: number; wall_s: number }
  >;
  /** the recycled stock's rate over the fresh stock's (--no-network-recycling), same run and deploys */
  recycling_vs_fresh_stock: number;
  best: number;
  picked: number;
}

async function sustainedPhase(image: string): Promise<SustainedFigures> {
  const bare = {} as Record<BareNetworks | 'premade_capped', number>;
  const bareRun = async (key: BareNetworks | 'premade_capped', what: string, startsAtOnce = Infinity) => {
    progress(`sustained: bare run/rm ${what}`);
    bare[key] = (await sustainedBare(ctx, image, LOAD, key === 'premade_capped' ? 'premade' : key, startsAtOnce)).perS;
    progress(`  ${bare[key].toFixed(2)} episodes/s`);
  };
  await bareRun('premade', 'on an internal network per worker slot, made beforehand');
  await bareRun('fresh', 'in a fresh internal network each (what the server does without a stock)');
  await bareRun('default-bridge', "on Docker's default bridge");
  const rates: Record<string, { deploys: number; stock: number; recycling: boolean; r: SustainedRate }> = {};
  const run = async (key: string, deploys: number, stockOff: boolean, extra: string[] = []) => {
    progress(`sustained: server, --max-concurrent-deploys ${deploys}${stockOff ? ', --network-stock 0' : ''}${extra.length ? `, ${extra.join(' ')}` : ''}`);
    const stock = stockSize(LOAD.concurrency, stockOff);
    const r = await sustainedServer(ctx, `sustained-${key}`, deploys, LOAD, { args: [...(stockOff ? STOCK_OFF : []), ...extra], stock });
    rates[key] = { deploys, stock, recycling: stock > 0 && !extra.includes('--no-network-recycling'), r };
    progress(`  ${r.perS.toFixed(2)} episodes/s`);
  };
  for (const d of DEPLOY_VALUES) await run(String(d), d, false);
  const byDeploys = DEPLOY_VALUES.map((d) => rates[String(d)]!);
  const best = byDeploys.reduce((a, b) => (b.r.perS > a.r.perS ? b : a)).deploys;
  // the smallest value within 3% of the best: more deploys at once only crowd the engine
  const picked = Math.min(...byDeploys.filter((x) => x.r.perS >= rates[String(best)]!.r.perS * 0.97).map((x) => x.deploys));
  progress(`sustained: best ${best}; picked ${picked} (smallest within 3% of the best)`);
  await run(`${picked}-stock-off`, picked, true);
  // the stock of fresh networks (each removed with its episode), against the recycled stock above
  await run(`${picked}-no-recycling`, picked, false, ['--no-network-recycling']);
  await bareRun('premade_capped', `on an internal network per worker slot, made beforehand, ${picked} starts at once (as the server's deploy cap)`, picked);
  // the server is compared with the faster of the two premade baselines: the engine's best pace
  const premadeBest = Math.max(bare.premade, bare.premade_capped);
  const server: SustainedFigures['server'] = {};
  for (const [key, { deploys, stock, recycling, r }] of Object.entries(rates))
    server[key] = {
      deploys,
      network_stock: stock,
      recycling,
      per_s: round(r.perS),
      vs_bare_premade: round(r.perS / premadeBest),
      vs_bare_fresh: round(r.perS / bare.fresh),
      wall_s: round(r.wallS, 1),
    };
  return {
    episodes: EPISODES,
    concurrency: CONCURRENCY,
    bare_per_s: {
      premade: round(bare.premade),
      premade_capped: round(bare.premade_capped),
      premade_best: round(premadeBest),
      fresh: round(bare.fresh),
      'default-bridge': round(bare['default-bridge']),
    },
    bare_premade_capped_starts: picked,
    server,
    recycling_vs_fresh_stock: round(rates[String(picked)]!.r.perS / rates[`${picked}-no-recycling`]!.r.perS),
    best,
    picked,
  };
}

function burstFigures(r: ServerBurst, bare: BurstSummary) {
  const live = r.live;
  return {
    p50_s: r.p50_s,
    p95_s: r.p95_s,
    max_s: r.max_s,
    all_up_s: r.last_started_s,
    pooled: r.pooled,
    p95_vs_bare: round(r.p95_s / bare.p95_s),
    all_up_vs_bare: round(r.last_started_s / bare.last_started_s),
    answered_while_all_live: live.answered,
    containers_running: live.containers_running,
    server_rss_mb: { before: round(r.before.server_rss_mb, 1), live: round(live.server_rss_mb, 1) },
    env_containers_mb: round(live.env_containers_mb, 1),
    env_container_mb_each: round(live.env_containers_mb / Math.max(1, live.containers_running), 1),
    engine_processes_mb: {
      before: round(r.before.engine.total_mb, 1),
      live: round(live.engine.total_mb, 1),
      shims_live: live.engine.shims,
      dockerd_live: round(live.engine.dockerd_mb, 1),
      containerd_live: round(live.engine.containerd_mb, 1),
    },
    teardown_all_s: r.teardown_all_s,
    outside_deploy_mean_s: r.outside_deploy_s,
  };
}

/** a cold burst on a fresh server; `stockOff`: with --network-stock 0 */
async function coldBurst(picked: number, stockOff: boolean, size = BURST, name = stockOff ? 'cold-stock-off' : 'cold') {
  const s = await startServer(ctx, name, [
    '--max-concurrent-envs',
    String(size),
    '--max-concurrent-deploys',
    String(picked),
    '--max-waiting',
    '4096',
    ...(stockOff ? STOCK_OFF : []),
  ]);
  try {
    const stock = stockSize(size, stockOff);
    const stockFillS = await waitNetworkStock(ctx, s, stock);
    // a moment for the server to finish settling after its start (its sweep, the stock's last creation)
    await new Promise((r) => setTimeout(r, 1000));
    progress(
      `burst: cold, ${stockOff ? '--network-stock 0' : `a network stock of ${stock} (the default; made in ${stockFillS.toFixed(1)} s)`}; server RSS idle ${s.rssMb().toFixed(1)} MB`,
    );
    const r = await burstServer(ctx, s, name, size);
    progress(
      `  p50 ${r.p50_s} s p95 ${r.p95_s} s all up ${r.last_started_s} s; ${r.live.answered}/${size} answered while all live; all torn down in ${r.teardown_all_s} s`,
    );
    const slot: SlotTime = await slotTime(ctx, s, size);
    return { r, slot, stock, stockFillS };
  } finally {
    await s.stop();
  }
}

/**
 * --phases live: --live N episodes live at once on this host, each in its own network (the
 * server's stock), against N bare starts each on an internal network made beforehand (like for
 * like): all up or the first failure, memory per live episode.
 */
async function livePhase(image: string, picked: number, size: number) {
  progress(`live: ${size} bare container starts + readiness at once, each on an internal network made beforehand`);
  const bare = await burstBare(ctx, image, size, 'premade');
  progress(`  bare p95 ${bare.p95_s} s all up ${bare.last_started_s} s; removed in ${bare.remove_s} s`);
  const { r, stock, stockFillS } = await coldBurst(picked, false, size, 'live');
  return {
    size,
    network_stock: stock,
    network_stock_fill_s: round(stockFillS, 1),
    bare_premade: { p95_s: bare.p95_s, all_up_s: bare.last_started_s, remove_all_s: bare.remove_s },
    server: { p50_s: r.p50_s, p95_s: r.p95_s, all_up_s: r.last_started_s, answered: r.live.answered, teardown_all_s: r.teardown_all_s },
    ratio_all_up_like_for_like: round(r.last_started_s / bare.last_started_s),
    ratio_p95_like_for_like: round(r.p95_s / bare.p95_s),
    memory_per_live_episode_mb: {
      server: round((r.live.server_rss_mb - r.before.server_rss_mb) / size),
      env_container: round(r.live.env_containers_mb / size),
      engine: round((r.live.engine.total_mb - r.before.engine.total_mb) / size),
    },
    containers_running: r.live.containers_running,
  };
}

async function burstPhase(image: string, picked: number) {
  progress(`burst: ${BURST} bare container starts + readiness at once`);
  const bare = await burstBare(ctx, image, BURST);
  progress(`  bare p50 ${bare.p50_s} s p95 ${bare.p95_s} s all up ${bare.last_started_s} s; removed in ${bare.remove_s} s`);
  // the same on an internal network each, made beforehand: where the server's episodes run (its network stock)
  progress(`burst: ${BURST} bare container starts + readiness at once, each on an internal network made beforehand`);
  const barePremade = await burstBare(ctx, image, BURST, 'premade');
  progress(`  bare p50 ${barePremade.p50_s} s p95 ${barePremade.p95_s} s all up ${barePremade.last_started_s} s; removed in ${barePremade.remove_s} s`);

  const cold = await coldBurst(picked, false);
  const coldOff = await coldBurst(picked, true);

  const warm = await startServer(
    ctx,
    'warm',
    ['--max-concurrent-envs', String(BURST), '--warm-pool', String(BURST), '--max-concurrent-deploys', String(picked), '--max-waiting', '4096'],
    { inspect: values['cpu-profile'] },
  );
  let warmResult: ServerBurst;
  let profile: CpuProfile | null;
  let fillS: number;
  const singleMs: number[] = [];
  let singlePooled = 0;
  try {
    progress(`burst: warm, filling the pool with ${BURST}`);
    fillS = await waitPool(ctx, warm, BURST, 'pool filling');
    progress(`  pool full after ${fillS.toFixed(1)} s`);
    // one reset at a time on an idle server with a full pool (each waits for the pool to be full again)
    progress(`single warm resets: ${SINGLES}, one at a time, the pool full before each`);
    for (let i = 0; i < SINGLES; i++) {
      const e = await startEpisode(warm.url);
      singleMs.push(e.resetMs);
      if (e.timings.pooled === true) singlePooled++;
      await finishEpisode(e.client);
      await waitPool(ctx, warm, BURST, 'pool refilling');
    }
    progress(`  single warm reset p50 ${percentile(singleMs, 50).toFixed(1)} ms (${singlePooled}/${SINGLES} pooled)`);
    progress(`burst: warm`);
    await waitNetworkStock(ctx, warm, stockSize(BURST, false));
    // --cpu-profile: the server's main thread, over the burst alone
    const profiler = warm.inspectPort === null ? null : await CpuProfiler.attach(warm.inspectPort);
    await profiler?.start();
    profile = null;
    // the profile covers the resets alone: it stops once every one has answered
    warmResult = await burstServer(ctx, warm, 'warm', BURST, async () => {
      profile = (await profiler?.stop()) ?? null;
    });
    profiler?.close();
    progress(`  warm p50 ${warmResult.p50_s} s p95 ${warmResult.p95_s} s all up ${warmResult.last_started_s} s (${warmResult.pooled}/${BURST} pooled)`);
  } finally {
    await warm.stop();
  }

  const rssPerEpisode = (cold.r.live.server_rss_mb - cold.r.before.server_rss_mb) / BURST;
  const enginePerEpisode = (cold.r.live.engine.total_mb - cold.r.before.engine.total_mb) / BURST;
  return {
    figures: {
      size: BURST,
      max_concurrent_envs: BURST,
      max_concurrent_deploys: picked,
      bare: {
        p50_s: bare.p50_s,
        p95_s: bare.p95_s,
        max_s: bare.max_s,
        all_up_s: bare.last_started_s,
        remove_all_s: bare.remove_s,
        stages_mean_s: bare.stages_s,
      },
      bare_premade: {
        p50_s: barePremade.p50_s,
        p95_s: barePremade.p95_s,
        max_s: barePremade.max_s,
        all_up_s: barePremade.last_started_s,
        remove_all_s: barePremade.remove_s,
        stages_mean_s: barePremade.stages_s,
      },
      cold: {
        ...burstFigures(cold.r, bare),
        p95_vs_bare_premade: round(cold.r.p95_s / barePremade.p95_s),
        network_stock: cold.stock,
        network_stock_fill_s: round(cold.stockFillS, 1),
        slot_time_mean: cold.slot,
      },
      cold_stock_off: {
        ...burstFigures(coldOff.r, bare),
        p95_vs_bare_premade: round(coldOff.r.p95_s / barePremade.p95_s),
        network_stock: 0,
        slot_time_mean: coldOff.slot,
      },
      warm: { ...burstFigures(warmResult, bare), pool_fill_s: round(fillS, 1) },
      warm_cpu_profile: profile ? summarizeProfile(profile) : null,
      single_warm_reset: {
        n: SINGLES,
        pooled: singlePooled,
        p50_ms: round(percentile(singleMs, 50), 1),
        p95_ms: round(percentile(singleMs, 95), 1),
      },
      server_rss_mb_per_live_episode: round(rssPerEpisode),
      engine_processes_mb_per_live_env: round(enginePerEpisode, 2),
      reset_ms: {
        bare: bare.resetMs.map(Math.round),
        cold: cold.r.resetMs.map(Math.round),
        cold_stock_off: coldOff.r.resetMs.map(Math.round),
        warm: warmResult.resetMs.map(Math.round),
      },
    },
    profile,
    chart: cdfSvg(`Reset latency, burst of ${BURST} at once (CDF)`, [
      { name: `bare container start + readiness ×${BURST}`, color: '#888', ms: bare.resetMs },
      { name: `cold, network stock ${cold.stock} (the default)`, color: '#c0392b', ms: cold.r.resetMs },
      { name: 'cold, --network-stock 0', color: '#e59866', ms: coldOff.r.resetMs },
      { name: `warm (--warm-pool ${BURST})`, color: '#2471a3', ms: warmResult.resetMs },
    ]),
  };
}

interface LanesFigures {
  load: LanesLoad;
  on: LanesRun;
  off: LanesRun;
  /** lanes on / lanes off, same run */
  eval_queued_p95_on_vs_off: number;
  eval_reset_p95_on_vs_off: number;
  train_queued_p95_on_vs_off: number;
}

async function lanesPhase(): Promise<LanesFigures> {
  const load: LanesLoad = { ...LANES_LOAD, stock: stockSize(LANES_CAP, false) };
  progress(`lanes: ${load.train} training resets (each holding its env ${load.holdS} s) then ${load.evals} eval resets, at a cap of ${load.cap}`);
  const on = await lanesRun(ctx, load, true);
  progress(`  lanes on: eval queue wait p50 ${on.eval.queued_p50_s} s p95 ${on.eval.queued_p95_s} s; training p95 ${on.train.queued_p95_s} s`);
  const off = await lanesRun(ctx, load, false);
  progress(`  lanes off: eval queue wait p50 ${off.eval.queued_p50_s} s p95 ${off.eval.queued_p95_s} s; training p95 ${off.train.queued_p95_s} s`);
  const ratio = (a: number, b: number) => (b > 0 ? round(a / b) : NaN);
  return {
    load,
    on,
    off,
    eval_queued_p95_on_vs_off: ratio(on.eval.queued_p95_s, off.eval.queued_p95_s),
    eval_reset_p95_on_vs_off: ratio(on.eval.reset_p95_s, off.eval.reset_p95_s),
    train_queued_p95_on_vs_off: ratio(on.train.queued_p95_s, off.train.queued_p95_s),
  };
}

async function main(): Promise<void> {
  progress(
    `bench: fixture env; phases ${[...PHASES].join(', ')}; sustained ${EPISODES} episodes at ${CONCURRENCY} concurrent for --max-concurrent-deploys ${DEPLOY_VALUES.join(', ')}; burst of ${BURST}; ${SINGLES} single warm resets`,
  );
  // first, while nothing else runs: the gateway phase needs no engine
  const gatewayFigures = PHASES.has('gateway') ? await gatewayPhase(ctx, GATEWAY_LOAD) : null;
  // the first server builds the image (or finds it), when a phase needs the engine
  let image = '(no engine phase)';
  if (['sustained', 'burst', 'lanes', 'live'].some((p) => PHASES.has(p))) {
    const probe = await startServer(ctx, 'probe', ['--max-concurrent-envs', '1']);
    image = await envImage(ctx, probe).finally(() => probe.stop());
    progress(`image ${image}`);
  }

  const sustainedFigures = PHASES.has('sustained') ? await sustainedPhase(image) : null;
  // without a sustained phase: the one --deploys value given, or the server's default
  const picked = sustainedFigures?.picked ?? (DEPLOY_VALUES.length === 1 ? DEPLOY_VALUES[0]! : DEFAULT_MAX_CONCURRENT_DEPLOYS);
  const burstResult = PHASES.has('burst') ? await burstPhase(image, picked) : null;
  const lanesFigures = PHASES.has('lanes') ? await lanesPhase() : null;
  const liveFigures = PHASES.has('live') ? await livePhase(image, picked, positive('live', values.live)) : null;
  const harnessFigures = PHASES.has('harness')
    ? await harnessBurst({ run: ctx.run, size: positive('harness-burst', values['harness-burst']), image: values['debian-image'], progress })
    : null;
  const shellFigures = PHASES.has('shell')
    ? await shellPhase(ctx, {
        calls: positive('shell-calls', values['shell-calls']),
        resets: positive('shell-resets', values['shell-resets']),
        debianImage: values['debian-image'],
      })
    : null;
  const verifyFigures = PHASES.has('verify')
    ? await verifyPhase(ctx, {
        episodes: positive('verify-episodes', values['verify-episodes']),
        debianImage: values['debian-image'],
        baseline: values['verify-baseline'] ?? null,
      })
    : null;

  const e2bFigures = PHASES.has('e2b')
    ? await e2bPhase(ctx, {
        creates: positive('e2b-creates', values['e2b-creates']),
        calls: positive('e2b-calls', values['e2b-calls']),
        fileMb: positive('e2b-file-mb', values['e2b-file-mb']),
        fileRounds: positive('e2b-file-rounds', values['e2b-file-rounds']),
      })
    : null;

  const datasetFigures = PHASES.has('dataset')
    ? await datasetPhase(ctx, {
        tasks: positive('dataset-tasks', values['dataset-tasks']),
        concurrency: positive('dataset-concurrency', values['dataset-concurrency']),
        buildConcurrency: positive('dataset-build-concurrency', values['dataset-build-concurrency']),
        coldResets: positive('dataset-cold-resets', values['dataset-cold-resets']),
        debianImage: values['debian-image'],
        serverArgs: values['dataset-server-arg'],
      })
    : null;
  const groupSize = positive('groups-size', values['groups-size']);
  const groupsFigures = PHASES.has('groups')
    ? await groupsPhase(ctx, {
        tasks: positive('groups-tasks', values['groups-tasks']),
        size: groupSize,
        staggerMs: positive('groups-stagger', values['groups-stagger']),
        gapMs: positive('groups-gap', values['groups-gap']),
        pool: 2 * groupSize,
        cap: 4 * groupSize,
        warm: SINGLES,
      })
    : null;

  // counted before they are removed: a leftover is the server's (or the bench's) bug, reported
  const left = await countRunLeftovers(ctx);
  await removeRunLeftovers(ctx);
  const b = burstResult?.figures;
  const s = sustainedFigures;
  const targets: Record<string, boolean> = {};
  if (s)
    targets[`cold sustained >= 0.95x bare run/rm on premade networks (${s.picked} deploys, the server's network stock)`] =
      s.server[String(s.picked)]!.vs_bare_premade >= 0.95;
  if (b) {
    targets[`cold burst of ${BURST} p95 <= 1.0x bare starts`] = b.cold.p95_vs_bare <= 1;
    targets[`cold burst of ${BURST} all up <= 1.0x bare starts`] = b.cold.all_up_vs_bare <= 1;
    // like for like: bare starts where the server's envs run, an internal network each (not Docker's default bridge)
    targets[`cold burst of ${BURST} p95 <= 1.0x bare starts on a network each made ahead`] = b.cold.p95_vs_bare_premade <= 1;
    targets[`warm burst of ${BURST} p95 <= 1 s`] = b.warm.p95_s <= 1;
    targets['single warm reset p50 <= 50 ms'] = b.single_warm_reset.p50_ms <= 50;
    targets['<= 0.5 MB server RSS per live episode'] = b.server_rss_mb_per_live_episode <= 0.5;
    targets['every episode answered a tool call while all were live'] = [b.cold, b.cold_stock_off, b.warm].every((r) => r.answered_while_all_live === BURST);
  }
  const l = lanesFigures;
  if (l) {
    targets[`eval reset queue wait p95 during a training burst of ${l.load.train} at a full cap of ${l.load.cap}, lanes on <= 0.25x lanes off`] =
      l.eval_queued_p95_on_vs_off <= 0.25;
  }
  if (harnessFigures)
    targets[`every one of a burst of ${harnessFigures.size} harness episodes scored 1`] = harnessFigures.harness.scored_1 === harnessFigures.size;
  if (shellFigures) {
    targets['bash call p95 <= 1.2x a bare exec of the same command'] = shellFigures.bash.ratio_p95 <= 1.2;
    targets['cold shell reset p50 <= 1.2x a bare create/start/exec-ready'] = shellFigures.reset.ratio_p50 <= 1.2;
  }
  if (e2bFigures) {
    targets['e2b create to first command p50 <= 1.2x a bare network/create/start/exec'] = e2bFigures.create.ratio_p50 <= 1.2;
    targets['e2b create to first command p95 <= 1.2x a bare network/create/start/exec'] = e2bFigures.create.ratio_p95 <= 1.2;
    targets['e2b commands.run p50 <= 1.2x a bare exec of the same command'] = e2bFigures.command.ratio_p50 <= 1.2;
    targets['e2b commands.run p95 <= 1.2x a bare exec of the same command'] = e2bFigures.command.ratio_p95 <= 1.2;
    targets['e2b files.write time <= 1.2x putArchive of the same bytes'] = e2bFigures.files.write_mb_s.time_ratio <= 1.2;
    targets['e2b files.read time <= 1.2x getArchive of the same bytes'] = e2bFigures.files.read_mb_s.time_ratio <= 1.2;
  }
  if (liveFigures)
    targets[`${liveFigures.size} live episodes on this host, each in its own network: all up and answering`] =
      liveFigures.server.answered === liveFigures.size && liveFigures.containers_running >= liveFigures.size;
  if (datasetFigures) {
    const d = datasetFigures;
    targets[`dataset of ${d.tasks}: /health ready within 10 s of start`] = d.targets.health_within_10s;
    targets[`dataset of ${d.tasks}: first episode within one bare build + 1.2x a cold episode`] = d.targets.first_episode;
    targets[`dataset of ${d.tasks}: every task once within 1.2x bare build + run`] = d.targets.all_episodes;
  }
  targets['nothing of the run left on the engine'] = left.containers + left.networks + left.volumes === 0;
  const figures = {
    when: new Date().toISOString(),
    machine: { cpus: cpus().length, memory_gib: round(totalmem() / 2 ** 30, 1), engine: (await ctx.docker.version()).Version },
    image,
    server_default_max_concurrent_deploys: DEFAULT_MAX_CONCURRENT_DEPLOYS,
    sustained: s,
    burst: b ?? null,
    lanes: l ?? null,
    gateway: gatewayFigures,
    harness: harnessFigures,
    shell: shellFigures,
    verify: verifyFigures,
    e2b: e2bFigures,
    dataset: datasetFigures,
    live: liveFigures,
    groups: groupsFigures,
    left_on_engine: left,
    targets,
    total_s: round((performance.now() - ctx.startedAt) / 1000, 0),
  };

  mkdirSync(RESULTS, { recursive: true });
  const stamp = figures.when.replace(/[:.]/g, '-');
  const jsonPath = path.join(RESULTS, `bench-${stamp}.json`);
  writeFileSync(jsonPath, JSON.stringify(figures, null, 2) + '\n');
  const svgPath = burstResult ? path.join(RESULTS, `bench-${stamp}.svg`) : null;
  if (svgPath) writeFileSync(svgPath, burstResult!.chart);
  // the whole profile, for Chrome DevTools (Performance panel, load profile)
  if (burstResult?.profile) writeFileSync(path.join(RESULTS, `bench-${stamp}-warm-burst.cpuprofile`), JSON.stringify(burstResult.profile));

  console.log('');
  console.log(`bench of ${figures.when}: ${figures.machine.cpus} cores, ${figures.machine.memory_gib} GiB, Docker ${figures.machine.engine}`);
  if (b) printBurst(b);
  if (s) printSustained(s);
  if (l) printLanes(l);
  if (gatewayFigures) printGateway(gatewayFigures);
  if (harnessFigures) printHarnessBurst(harnessFigures);
  if (groupsFigures) printGroups(groupsFigures);
  if (shellFigures) printShell(shellFigures);
  if (verifyFigures) {
    const f = verifyFigures;
    console.log(`\nverified episode end (end_turn: the stop, the check or a clean container, the tests), ${f.episodes} episodes each:`);
    console.log(`  in place  p50 ${f.in_place.p50_ms} ms  p95 ${f.in_place.p95_ms} ms`);
    console.log(`  clean     p50 ${f.clean.p50_ms} ms  p95 ${f.clean.p95_ms} ms   (${f.clean_over_in_place_p50}x in place)`);
    if (f.baseline) console.log(`  baseline  p50 ${f.baseline.p50_ms} ms  p95 ${f.baseline.p95_ms} ms   (in place is ${f.in_place_over_baseline_p50}x it)`);
  }
  if (e2bFigures) printE2b(e2bFigures);
  if (datasetFigures) printDataset(datasetFigures);
  if (liveFigures) {
    const f = liveFigures;
    console.log(`\n## ${f.size} live episodes, each in its own network\n`);
    console.log('| | p95 | all up | answered |');
    console.log('|---|---|---|---|');
    console.log(`| ${f.size} bare starts, each on an internal network made ahead | ${f.bare_premade.p95_s} s | ${f.bare_premade.all_up_s} s | |`);
    console.log(
      `| ${f.size} resets, cold | ${f.server.p95_s} s (${f.ratio_p95_like_for_like}×) | ${f.server.all_up_s} s (${f.ratio_all_up_like_for_like}×) | ${f.server.answered}/${f.size} |`,
    );
    const m = f.memory_per_live_episode_mb;
    console.log(
      `\nper live episode: server ${m.server} MB, env container ${m.env_container} MB, engine ${m.engine} MB; all torn down in ${f.server.teardown_all_s} s`,
    );
  }
  console.log('');
  console.log(`left on the engine afterwards: ${left.containers} containers, ${left.networks} networks, ${left.volumes} volumes`);
  for (const [t, ok] of Object.entries(targets)) console.log(`  target ${ok ? 'met   ' : 'MISSED'} ${t}`);
  console.log('');
  console.log(`figures: ${jsonPath}`);
  if (svgPath) console.log(`chart:   ${svgPath}`);
}

type BurstOut = Awaited<ReturnType<typeof burstPhase>>['figures'];

function printBurst(b: BurstOut): void {
  const cell = (v: string | number, w = 8) => String(v).padStart(w);
  const row = (name: string, r: { p50_s: number; p95_s: number; max_s: number; all_up_s: number }, more: string[]) =>
    `| ${name.padEnd(30)} | ${cell(r.p50_s)} | ${cell(r.p95_s)} | ${cell(r.max_s)} | ${cell(r.all_up_s)} | ${more.map((m) => cell(m)).join(' | ')} |`;
  const server = (r: ReturnType<typeof burstFigures>) => [
    `${r.p95_vs_bare}x`,
    `${r.all_up_vs_bare}x`,
    `${r.answered_while_all_live}/${b.size}`,
    String(r.teardown_all_s),
  ];
  console.log('');
  console.log(`Burst of ${b.size} resets at once, --max-concurrent-envs ${b.size}, --max-concurrent-deploys ${b.max_concurrent_deploys} (seconds)`);
  console.log('| run                            |      p50 |      p95 |      max |   all up | p95/bare | up/bare | answered | all torn down |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  console.log(row('bare start + readiness', b.bare, ['1x', '1x', '', `${b.bare.remove_all_s} (rm)`]));
  const bp = b.bare_premade;
  console.log(
    row('bare, a network each made ahead', bp, [
      `${round(bp.p95_s / b.bare.p95_s)}x`,
      `${round(bp.all_up_s / b.bare.all_up_s)}x`,
      '',
      `${bp.remove_all_s} (rm)`,
    ]),
  );
  console.log(row(`cold, network stock ${b.cold.network_stock}`, b.cold, server(b.cold)));
  console.log(row('cold, --network-stock 0', b.cold_stock_off, server(b.cold_stock_off)));
  console.log(row(`warm (--warm-pool ${b.size})`, b.warm, server(b.warm)));
  console.log(`warm: ${b.warm.pooled}/${b.size} pooled; pool filled in ${b.warm.pool_fill_s} s; warm p95 / cold p95 ${round(b.warm.p95_s / b.cold.p95_s, 4)}x`);
  console.log(
    `single warm reset: p50 ${b.single_warm_reset.p50_ms} ms, p95 ${b.single_warm_reset.p95_ms} ms (${b.single_warm_reset.pooled}/${b.single_warm_reset.n} pooled)`,
  );
  const c = b.cold;
  console.log(
    `with ${b.size} live (cold): ${c.containers_running} env containers running; server RSS ${c.server_rss_mb.before} -> ${c.server_rss_mb.live} MB = ${b.server_rss_mb_per_live_episode} MB per live episode`,
  );
  console.log(
    `  env containers' memory (engine stats, as docker stats shows it) ${c.env_containers_mb} MB = ${c.env_container_mb_each} MB each; engine processes (dockerd + containerd + ${c.engine_processes_mb.shims_live} shims) PSS ${c.engine_processes_mb.before} -> ${c.engine_processes_mb.live} MB = ${b.engine_processes_mb_per_live_env} MB per live env`,
  );
  for (const [name, r] of [
    ['cold', b.cold],
    ['cold, --network-stock 0', b.cold_stock_off],
  ] as const) {
    const t = r.slot_time_mean;
    console.log(
      `slot time per episode, ${name} (mean): deploy ${t.deploy_s} s; teardown ${t.teardown_s} s = env removed ${t.env_removed_s} s (slot freed) + network ${t.network_removed_s} s (off the slot)`,
    );
    const stages = Object.entries(t.deploy_stages_s)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
    console.log(`  its deploy's stages (mean s): ${stages}; outside queue and deploy (socket, frames, event loop) ${r.outside_deploy_mean_s}`);
  }
  for (const [name, s] of [
    ["Docker's default bridge", b.bare.stages_mean_s],
    ['a network each made ahead', b.bare_premade.stages_mean_s],
  ] as const)
    console.log(`  bare start's stages, ${name} (mean s): create ${s.create}, start ${s.start}, ready ${s.ready}`);
  console.log(
    `cold p95 / bare p95 on a network each made ahead: ${b.cold.p95_vs_bare_premade}x (network stock), ${b.cold_stock_off.p95_vs_bare_premade}x (--network-stock 0)`,
  );
  const p = b.warm_cpu_profile;
  if (p) printProfile(`warm burst of ${b.size}`, p);
}

function printProfile(what: string, p: ProfileSummary): void {
  console.log('');
  console.log(
    `Server CPU profile, ${what}: ${p.window_ms} ms window, main thread busy ${Math.round(p.busy_share * 100)}% (${p.samples} samples); self time, heaviest first`,
  );
  console.log('| function | where | self ms | share of window |');
  console.log('|---|---|---|---|');
  for (const e of p.top) console.log(`| ${e.fn} | ${e.where} | ${e.self_ms} | ${Math.round(e.share * 1000) / 10}% |`);
}

function printSustained(s: SustainedFigures): void {
  const bp = s.bare_per_s;
  console.log('');
  console.log(`Sustained: ${s.episodes} episodes, ${s.concurrency} at a time, cold (episodes/s)`);
  console.log(`| run | episodes/s | vs bare, premade networks (best of the two: ${bp.premade_best}/s) | vs bare, a fresh network each |`);
  console.log('|---|---|---|---|');
  const bareRow = (name: string, v: number) => console.log(`| ${name} | ${v} | ${round(v / bp.premade_best)}x | ${round(v / bp.fresh)}x |`);
  bareRow(`bare run/rm, an internal network per slot made beforehand, ${s.concurrency} starts at once`, bp.premade);
  bareRow(`bare run/rm, an internal network per slot made beforehand, ${s.bare_premade_capped_starts} starts at once`, bp.premade_capped);
  bareRow('bare run/rm, a fresh internal network each', bp.fresh);
  bareRow("bare run/rm, Docker's default bridge", bp['default-bridge']);
  for (const r of Object.values(s.server))
    console.log(
      `| server, --max-concurrent-deploys ${r.deploys}, network stock ${r.network_stock}${r.network_stock === 0 ? ' (off)' : r.recycling ? ', recycled' : ', fresh networks (--no-network-recycling)'} | ${r.per_s} | ${r.vs_bare_premade}x | ${r.vs_bare_fresh}x |`,
    );
  console.log(`recycled stock / fresh stock, --max-concurrent-deploys ${s.picked}: ${s.recycling_vs_fresh_stock}x`);
  console.log(`best ${s.best}; picked ${s.picked} (the smallest within 3% of the best; server default ${DEFAULT_MAX_CONCURRENT_DEPLOYS})`);
}

function printLanes(l: LanesFigures): void {
  const { load, on, off } = l;
  console.log('');
  console.log(
    `Lanes: ${load.evals} eval resets during a burst of ${load.train} training resets (each holding its env ${load.holdS} s), --max-concurrent-envs ${load.cap} (seconds)`,
  );
  console.log('| run | eval queue wait p50 | p95 | eval reset p50 | p95 | training queue wait p50 | p95 | wall |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const [name, r] of [
    ['lanes on (eval=high, the default)', on],
    ['lanes off (--split-priority eval=normal)', off],
  ] as const)
    console.log(
      `| ${name} | ${r.eval.queued_p50_s} | ${r.eval.queued_p95_s} | ${r.eval.reset_p50_s} | ${r.eval.reset_p95_s} | ${r.train.queued_p50_s} | ${r.train.queued_p95_s} | ${r.wall_s} |`,
    );
  console.log(
    `lanes on / off: eval queue wait p95 ${l.eval_queued_p95_on_vs_off}x, eval reset p95 ${l.eval_reset_p95_on_vs_off}x; training queue wait p95 ${l.train_queued_p95_on_vs_off}x`,
  );
}

main().catch(async (e) => {
  console.error(e);
  await removeRunLeftovers(ctx).catch(() => undefined);
  process.exit(1);
});
