/**
 * `npm run bench`: how the server deploys envs under a trainer's load, each figure against a
 * baseline taken in the same run on the same engine (fixture env; needs a Docker engine and the
 * offline base image, docker/make-local-node-base.sh). About ten minutes on a 2-core machine.
 *
 *   1. Sustained: --episodes (128) episodes, --concurrency (16) at a time, each reset + list_tools
 *      + end_turn, cold (no pool), for each --max-concurrent-deploys value in --deploys (2,4,8),
 *      vs bare create/start/readiness/rm throughput through the same engine API at the same
 *      parallelism. The best value is the one the burst runs with (and the default's evidence).
 *   2. Burst: --burst (64; 128 and 256 accepted) resets at once with --max-concurrent-envs B:
 *      reset latency p50/p95/max and the time until the last episode started, cold (no pool) vs
 *      warm (--warm-pool B, full before the burst), vs B bare container starts + readiness at once.
 *      Single warm resets one at a time on a full pool (p50) come first; server RSS at 0 and at B live episodes, and
 *      where an episode's slot time goes (deploy, run, env removal, network removal).
 *
 * Writes bench-results/bench-<time>.json (every figure) and .svg (reset-latency CDFs) and prints
 * where. Targets are reported, never asserted. This file is the orchestration (the phases, the
 * table, the figures); the parts are in scripts/bench/: baselines.ts (bare containers), server.ts
 * (the server under test), load.ts (sustained and burst runs), stats.ts, charts.ts, context.ts.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { DEFAULT_MAX_CONCURRENT_DEPLOYS } from '../src/defaults.js';
import { burstBare, envImage, removeBareLeftovers, sustainedBare } from './bench/baselines.js';
import { cdfSvg } from './bench/charts.js';
import { benchContext } from './bench/context.js';
import type { SustainedRate } from './bench/load.js';
import { burstServer, finishEpisode, slotTime, startEpisode, startServer, sustainedServer, waitPool, type SlotTime } from './bench/server.js';
import { percentile, type BurstSummary } from './bench/stats.js';
import { LOCAL_NODE_IMAGE } from './lib/local-node-image.js';

const { values } = parseArgs({
  options: {
    burst: { type: 'string', default: '64' },
    episodes: { type: 'string', default: '128' },
    concurrency: { type: 'string', default: '16' },
    deploys: { type: 'string', default: '2,4,8' },
    singles: { type: 'string', default: '20' },
    'node-image': { type: 'string', default: LOCAL_NODE_IMAGE },
  },
});
const BURST = Number(values.burst);
const EPISODES = Number(values.episodes);
const CONCURRENCY = Number(values.concurrency);
const DEPLOY_VALUES = values.deploys
  .split(',')
  .map(Number)
  .filter((n) => n > 0);
const SINGLES = Number(values.singles);
const RESULTS = fileURLToPath(new URL('../bench-results', import.meta.url));
const ctx = benchContext(values['node-image']);
const { progress } = ctx;
const LOAD = { episodes: EPISODES, concurrency: CONCURRENCY };

async function main(): Promise<void> {
  progress(
    `bench: fixture env; sustained ${EPISODES} episodes at ${CONCURRENCY} concurrent for --max-concurrent-deploys ${DEPLOY_VALUES.join(', ')}; burst of ${BURST}; ${SINGLES} single warm resets`,
  );
  // the first server builds the image (or finds it)
  const probe = await startServer(ctx, 'probe', ['--max-concurrent-envs', '1']);
  const image = await envImage(ctx, probe).finally(() => probe.stop());
  progress(`image ${image}`);

  // 1. sustained
  progress('sustained: bare run/rm through the engine API');
  const bareSustained = await sustainedBare(ctx, image, LOAD);
  progress(`  bare: ${bareSustained.perS.toFixed(2)} episodes/s`);
  progress('sustained: bare run/rm, each in a fresh network of its own (what the server does besides)');
  const bareNetSustained = await sustainedBare(ctx, image, LOAD, true);
  progress(`  bare with networks: ${bareNetSustained.perS.toFixed(2)} episodes/s`);
  const sustained: Record<string, SustainedRate & { vsBare: number; vsBareNet: number }> = {};
  for (const d of DEPLOY_VALUES) {
    progress(`sustained: server, --max-concurrent-deploys ${d}`);
    const r = await sustainedServer(ctx, d, LOAD);
    sustained[d] = { ...r, vsBare: r.perS / bareSustained.perS, vsBareNet: r.perS / bareNetSustained.perS };
    progress(
      `  ${r.perS.toFixed(2)} episodes/s (${(r.perS / bareSustained.perS).toFixed(2)}x bare, ${(r.perS / bareNetSustained.perS).toFixed(2)}x bare with networks)`,
    );
  }
  const best = Number(Object.entries(sustained).sort((a, b) => b[1].perS - a[1].perS)[0]![0]);
  // the smallest value within 3% of the best: more deploys at once only crowd the engine
  const picked = Math.min(
    ...Object.entries(sustained)
      .filter(([, r]) => r.perS >= sustained[best]!.perS * 0.97)
      .map(([d]) => Number(d)),
  );
  progress(`sustained: best ${best}; picked ${picked} (smallest within 3% of the best)`);

  // 2. burst: bare
  progress(`burst: ${BURST} bare container starts + readiness at once`);
  const bare = await burstBare(ctx, image, BURST);
  progress(`  bare p50 ${bare.p50_s} s p95 ${bare.p95_s} s max ${bare.max_s} s`);

  // cold
  const cold = await startServer(ctx, 'cold', ['--max-concurrent-envs', String(BURST), '--max-concurrent-deploys', String(picked), '--max-waiting', '4096']);
  let coldResult: BurstSummary & { rss_live_mb?: number };
  let rssIdle: number;
  let slot: SlotTime;
  try {
    await new Promise((r) => setTimeout(r, 1000));
    rssIdle = cold.rssMb();
    progress(`burst: cold (no pool), server RSS idle ${rssIdle.toFixed(1)} MB`);
    coldResult = await burstServer(ctx, cold, 'cold', BURST, true);
    progress(
      `  cold p50 ${coldResult.p50_s} s p95 ${coldResult.p95_s} s max ${coldResult.max_s} s; RSS at ${BURST} live ${coldResult.rss_live_mb!.toFixed(1)} MB`,
    );
    // every teardown finished before reading where the slot time went
    slot = await slotTime(ctx, cold, BURST);
  } finally {
    await cold.stop();
  }

  // warm
  const warm = await startServer(ctx, 'warm', [
    '--max-concurrent-envs',
    String(BURST),
    '--warm-pool',
    String(BURST),
    '--max-concurrent-deploys',
    String(picked),
    '--max-waiting',
    '4096',
  ]);
  let warmResult: BurstSummary;
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
    warmResult = await burstServer(ctx, warm, 'warm', BURST);
    progress(`  warm p50 ${warmResult.p50_s} s p95 ${warmResult.p95_s} s max ${warmResult.max_s} s (${warmResult.pooled}/${BURST} pooled)`);
  } finally {
    await warm.stop();
  }
  await removeBareLeftovers(ctx);

  const rssPerEpisode = (coldResult.rss_live_mb! - rssIdle) / BURST;
  const figures = {
    when: new Date().toISOString(),
    machine: { cpus: cpus().length, engine: (await ctx.docker.version()).Version },
    image,
    burst: {
      size: BURST,
      max_concurrent_envs: BURST,
      max_concurrent_deploys: picked,
      bare: { p50_s: bare.p50_s, p95_s: bare.p95_s, max_s: bare.max_s, last_started_s: bare.last_started_s, remove_all_s: bare.remove_s },
      cold: { p50_s: coldResult.p50_s, p95_s: coldResult.p95_s, max_s: coldResult.max_s, last_started_s: coldResult.last_started_s },
      warm: {
        p50_s: warmResult.p50_s,
        p95_s: warmResult.p95_s,
        max_s: warmResult.max_s,
        last_started_s: warmResult.last_started_s,
        pooled: warmResult.pooled,
        pool_fill_s: Number(fillS.toFixed(1)),
      },
      ratios: {
        cold_p95_vs_bare: Number((coldResult.p95_s / bare.p95_s).toFixed(2)),
        warm_p95_vs_bare: Number((warmResult.p95_s / bare.p95_s).toFixed(3)),
        warm_p95_vs_cold: Number((warmResult.p95_s / coldResult.p95_s).toFixed(4)),
        cold_last_started_vs_bare: Number((coldResult.last_started_s / bare.last_started_s).toFixed(2)),
      },
      reset_ms: {
        bare: bare.resetMs.map((x) => Math.round(x)),
        cold: coldResult.resetMs.map((x) => Math.round(x)),
        warm: warmResult.resetMs.map((x) => Math.round(x)),
      },
    },
    single_warm_reset: {
      n: SINGLES,
      pooled: singlePooled,
      p50_ms: Number(percentile(singleMs, 50).toFixed(1)),
      p95_ms: Number(percentile(singleMs, 95).toFixed(1)),
    },
    sustained: {
      episodes: EPISODES,
      concurrency: CONCURRENCY,
      bare_per_s: Number(bareSustained.perS.toFixed(3)),
      bare_with_networks_per_s: Number(bareNetSustained.perS.toFixed(3)),
      by_max_concurrent_deploys: Object.fromEntries(
        Object.entries(sustained).map(([d, r]) => [
          d,
          {
            per_s: Number(r.perS.toFixed(3)),
            vs_bare: Number(r.vsBare.toFixed(3)),
            vs_bare_with_networks: Number(r.vsBareNet.toFixed(3)),
            wall_s: Number(r.wallS.toFixed(1)),
          },
        ]),
      ),
      best: best,
      picked,
      server_default: DEFAULT_MAX_CONCURRENT_DEPLOYS,
    },
    rss: {
      idle_mb: Number(rssIdle.toFixed(1)),
      live_mb: Number(coldResult.rss_live_mb!.toFixed(1)),
      live_episodes: BURST,
      mb_per_live_episode: Number(rssPerEpisode.toFixed(3)),
    },
    slot_time_cold_burst_mean: slot,
    targets: {
      'warm burst p95 <= 1 s': warmResult.p95_s <= 1,
      'single warm reset p50 <= 50 ms': percentile(singleMs, 50) <= 50,
      'cold sustained >= 0.95x bare (picked value)': sustained[picked]!.vsBare >= 0.95,
      '<= 0.5 MB RSS per live episode': rssPerEpisode <= 0.5,
    },
    total_s: Number(((performance.now() - ctx.startedAt) / 1000).toFixed(0)),
  };

  mkdirSync(RESULTS, { recursive: true });
  const stamp = figures.when.replace(/[:.]/g, '-');
  const jsonPath = path.join(RESULTS, `bench-${stamp}.json`);
  const svgPath = path.join(RESULTS, `bench-${stamp}.svg`);
  writeFileSync(jsonPath, JSON.stringify(figures, null, 2) + '\n');
  writeFileSync(
    svgPath,
    cdfSvg(`Reset latency, burst of ${BURST} at once (CDF)`, [
      { name: `bare container start + readiness ×${BURST}`, color: '#888', ms: bare.resetMs },
      { name: 'cold (no pool)', color: '#c0392b', ms: coldResult.resetMs },
      { name: `warm (--warm-pool ${BURST})`, color: '#2471a3', ms: warmResult.resetMs },
    ]),
  );

  const b = figures.burst;
  const row = (name: string, r: { p50_s: number; p95_s: number; max_s: number; last_started_s: number }) =>
    `| ${name.padEnd(28)} | ${String(r.p50_s).padStart(8)} | ${String(r.p95_s).padStart(8)} | ${String(r.max_s).padStart(8)} | ${String(r.last_started_s).padStart(14)} |`;
  console.log('');
  console.log(`Burst of ${BURST} resets at once, --max-concurrent-envs ${BURST}, --max-concurrent-deploys ${picked} (seconds)`);
  console.log('| run                          |      p50 |      p95 |      max | last started   |');
  console.log('|---|---|---|---|---|');
  console.log(row('bare start + readiness', b.bare));
  console.log(row('cold (no pool)', b.cold));
  console.log(row(`warm (--warm-pool ${BURST})`, b.warm));
  console.log(
    `ratios: cold p95 / bare ${b.ratios.cold_p95_vs_bare}x; warm p95 / bare ${b.ratios.warm_p95_vs_bare}x; warm p95 / cold ${b.ratios.warm_p95_vs_cold}x; pool filled in ${b.warm.pool_fill_s} s`,
  );
  console.log(`single warm reset: p50 ${figures.single_warm_reset.p50_ms} ms, p95 ${figures.single_warm_reset.p95_ms} ms (${singlePooled}/${SINGLES} pooled)`);
  console.log('');
  console.log(
    `Sustained: ${EPISODES} episodes, ${CONCURRENCY} at a time; bare run/rm ${figures.sustained.bare_per_s} episodes/s; bare run/rm with a network each ${figures.sustained.bare_with_networks_per_s} episodes/s`,
  );
  for (const [d, r] of Object.entries(figures.sustained.by_max_concurrent_deploys))
    console.log(`  --max-concurrent-deploys ${d.padStart(2)}: ${r.per_s} episodes/s = ${r.vs_bare}x bare, ${r.vs_bare_with_networks}x bare with networks`);
  console.log(`  picked ${picked} (server default ${DEFAULT_MAX_CONCURRENT_DEPLOYS})`);
  console.log('');
  console.log(
    `Server RSS: ${figures.rss.idle_mb} MB idle, ${figures.rss.live_mb} MB at ${BURST} live episodes = ${figures.rss.mb_per_live_episode} MB per live episode`,
  );
  console.log(
    `Slot time per cold episode (mean): deploy ${slot.deploy_s} s; teardown ${slot.teardown_s} s = env removed ${slot.env_removed_s} s (slot freed) + network ${slot.network_removed_s} s (off the slot)`,
  );
  console.log('');
  for (const [t, ok] of Object.entries(figures.targets)) console.log(`  target ${ok ? 'met   ' : 'MISSED'} ${t}`);
  console.log('');
  console.log(`figures: ${jsonPath}`);
  console.log(`chart:   ${svgPath}`);
}

main().catch(async (e) => {
  console.error(e);
  await removeBareLeftovers(ctx).catch(() => undefined);
  process.exit(1);
});
