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
 * where. Targets are reported, never asserted.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import Dockerode from 'dockerode';
import { DEFAULT_MAX_CONCURRENT_DEPLOYS } from '../src/defaults.js';
import { parsePrometheusText, valueOf } from './lib/prom-text.js';
import { WsClient } from './lib/ws-client.js';

const { values } = parseArgs({
  options: {
    burst: { type: 'string', default: '64' },
    episodes: { type: 'string', default: '128' },
    concurrency: { type: 'string', default: '16' },
    deploys: { type: 'string', default: '2,4,8' },
    singles: { type: 'string', default: '20' },
    'node-image': { type: 'string', default: process.env.OPENENV_TEST_NODE_IMAGE ?? 'openenv-local/node:20' },
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
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BUNDLE = path.join(ROOT, 'test/fixtures/fixture-v1');
const SERVE = path.join(ROOT, 'dist/serve.js');
const RUN = `bench-${process.pid}`;
const docker = new Dockerode();
const T0 = performance.now();

function progress(msg: string): void {
  process.stderr.write(`[${((performance.now() - T0) / 1000).toFixed(0).padStart(4)} s] ${msg}\n`);
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
}

const sec = (ms: number) => Number((ms / 1000).toFixed(3));

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

async function waitHttp(url: string, deadline: number): Promise<void> {
  while (Date.now() < deadline) {
    try {
      const r = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await r.arrayBuffer();
      if (r.ok) return;
    } catch {
      // not yet
    }
    await new Promise((r) => setTimeout(r, 15));
  }
  throw new Error(`${url} not ready`);
}

interface Server {
  url: string;
  child: ChildProcess;
  rssMb(): number;
  metrics(): Promise<string>;
  health(): Promise<{ status: string; pool?: { ready: number } }>;
  stop(): Promise<void>;
}

async function startServer(name: string, args: string[]): Promise<Server> {
  const port = await freePort();
  const instance = `${RUN}-${name}`;
  const child = spawn(
    process.execPath,
    [
      SERVE,
      BUNDLE,
      '--port',
      String(port),
      '--instance',
      instance,
      '--build-arg',
      `NODE_IMAGE=${values['node-image']}`,
      '--ping-interval',
      '0',
      '--reset-timeout',
      '900',
      ...args,
    ],
    {
      env: { ...process.env, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 300_000;
  for (;;) {
    const ok = await fetch(`${url}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`server ${name} did not come up`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    url,
    child,
    rssMb: () => Number(/^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))![1]) / 1024,
    metrics: () => fetch(`${url}/metrics`).then((r) => r.text()),
    health: () => fetch(`${url}/health`).then((r) => r.json() as Promise<{ status: string; pool?: { ready: number } }>),
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.on('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/** one episode as slime plays the fixture: reset, list_tools, end_turn */
async function episode(url: string): Promise<{ resetMs: number; startedAt: number; timings: Record<string, number | boolean>; client: WsClient }> {
  const t0 = performance.now();
  const c = await WsClient.open(url);
  const r = await c.reset({ task_id: 'fx-echo-0' }, 900_000);
  if (r.type !== 'observation') throw new Error(`reset failed: ${JSON.stringify(r)}`);
  const startedAt = performance.now();
  return { resetMs: startedAt - t0, startedAt, timings: r.data.observation.timings, client: c };
}

async function finish(c: WsClient): Promise<void> {
  await c.listTools();
  const end = await c.call('end_turn', {});
  if (!end.data.done) throw new Error(`unexpected end ${JSON.stringify(end)}`);
  await c.close();
}

function ticker(what: string, count: () => number, total: number): () => void {
  const t = setInterval(() => progress(`  ${what}: ${count()}/${total}`), 5000);
  return () => clearInterval(t);
}

/** a bare container of the image: create, start, its address, readiness (the engine API, as the server uses it) */
async function bareStart(image: string, network?: string): Promise<{ id: string; ip: string }> {
  const c = await docker.createContainer({
    Image: image,
    Env: ['PORT=8000'],
    Labels: { bench: RUN },
    HostConfig: { Memory: 128 * 1024 * 1024, NanoCpus: 5e8, PidsLimit: 64, ...(network ? { NetworkMode: network } : {}) },
  });
  await c.start();
  const info = await c.inspect();
  const ip = Object.values(info.NetworkSettings.Networks)[0]!.IPAddress;
  await waitHttp(`http://${ip}:8000/health`, Date.now() + 120_000);
  return { id: c.id, ip };
}

async function bareRemove(id: string): Promise<void> {
  await docker.getContainer(id).remove({ force: true, v: true });
}

/** the image the server itself deploys (its content-hash tag), read off an env container it started */
async function imageTag(s: Server, instance: string): Promise<string> {
  const c = await WsClient.open(s.url);
  await c.reset({ task_id: 'fx-echo-0' });
  const [ctr] = await docker.listContainers({ filters: JSON.stringify({ label: [`io.openenv.bundle-server.instance=${instance}`] }) });
  await c.close();
  if (!ctr) throw new Error('no env container of the probe server');
  return ctr.Image;
}

/** one series' value in a Prometheus text (NaN when absent) */
function prom(text: string, name: string, labels: Record<string, string> = {}): number {
  return valueOf(parsePrometheusText(text), name, labels) ?? NaN;
}

async function sustainedServer(deploys: number): Promise<{ perS: number; wallS: number }> {
  const s = await startServer(`sustained-${deploys}`, [
    '--max-concurrent-envs',
    String(CONCURRENCY),
    '--max-concurrent-deploys',
    String(deploys),
    '--max-waiting',
    '4096',
  ]);
  try {
    let next = 0;
    let done = 0;
    const stop = ticker(`sustained, --max-concurrent-deploys ${deploys}`, () => done, EPISODES);
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < EPISODES) {
          next++;
          const e = await episode(s.url);
          await finish(e.client);
          done++;
        }
      }),
    );
    const wall = (performance.now() - t0) / 1000;
    stop();
    return { perS: EPISODES / wall, wallS: wall };
  } finally {
    await s.stop();
  }
}

/** bare run/rm at the same parallelism; withNetwork: each container in a fresh internal network of its own, as the server does */
async function sustainedBare(image: string, withNetwork = false): Promise<{ perS: number; wallS: number }> {
  let next = 0;
  let done = 0;
  const stop = ticker(`sustained, bare run/rm${withNetwork ? ' with a network each' : ''}`, () => done, EPISODES);
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < EPISODES) {
        const k = next++;
        const net = withNetwork ? await docker.createNetwork({ Name: `${RUN}-n${k}`, Driver: 'bridge', Internal: true, Labels: { bench: RUN } }) : null;
        const { id, ip } = await bareStart(image, net?.id);
        await fetch(`http://${ip}:8000/reset`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"task_id":"fx-echo-0","data":{},"seed":null}',
        }).then((r) => r.arrayBuffer());
        await bareRemove(id);
        if (net) await net.remove();
        done++;
      }
    }),
  );
  stop();
  const wall = (performance.now() - t0) / 1000;
  return { perS: EPISODES / wall, wallS: wall };
}

interface BurstResult {
  resetMs: number[];
  p50_s: number;
  p95_s: number;
  max_s: number;
  last_started_s: number;
  pooled: number;
  rss_live_mb?: number;
}

function summarize(resetMs: number[], lastStartedMs: number, pooled: number): BurstResult {
  return { resetMs, p50_s: sec(pct(resetMs, 50)), p95_s: sec(pct(resetMs, 95)), max_s: sec(Math.max(...resetMs)), last_started_s: sec(lastStartedMs), pooled };
}

async function burstServer(s: Server, label: string, rss = false): Promise<BurstResult> {
  let started = 0;
  const stop = ticker(`${label} burst of ${BURST}`, () => started, BURST);
  const t0 = performance.now();
  const eps = await Promise.all(
    Array.from({ length: BURST }, async () => {
      const e = await episode(s.url);
      started++;
      return e;
    }),
  );
  stop();
  const last = Math.max(...eps.map((e) => e.startedAt)) - t0;
  const rssLive = rss ? s.rssMb() : undefined;
  await Promise.all(eps.map((e) => finish(e.client)));
  const r = summarize(
    eps.map((e) => e.resetMs),
    last,
    eps.filter((e) => e.timings.pooled === true).length,
  );
  if (rssLive !== undefined) r.rss_live_mb = rssLive;
  return r;
}

async function burstBare(image: string): Promise<BurstResult & { remove_s: number }> {
  let started = 0;
  const stop = ticker(`bare burst of ${BURST}`, () => started, BURST);
  const t0 = performance.now();
  const runs = await Promise.all(
    Array.from({ length: BURST }, async () => {
      const r = await bareStart(image);
      started++;
      return { ...r, ms: performance.now() - t0 };
    }),
  );
  stop();
  const r0 = performance.now();
  await Promise.all(runs.map((r) => bareRemove(r.id)));
  return {
    ...summarize(
      runs.map((r) => r.ms),
      Math.max(...runs.map((r) => r.ms)),
      0,
    ),
    remove_s: sec(performance.now() - r0),
  };
}

async function waitPool(s: Server, n: number, what: string): Promise<number> {
  const t0 = performance.now();
  const stop = ticker(what, () => lastReady, n);
  let lastReady = 0;
  try {
    for (;;) {
      lastReady = (await s.health()).pool?.ready ?? 0;
      if (lastReady >= n) return (performance.now() - t0) / 1000;
      await new Promise((r) => setTimeout(r, 250));
    }
  } finally {
    stop();
  }
}

/** CDFs of reset latency on a log time axis */
function cdfSvg(series: { name: string; color: string; ms: number[] }[]): string {
  const W = 860,
    H = 480,
    L = 70,
    R = 20,
    T = 40,
    B = 60;
  const all = series.flatMap((s) => s.ms).filter((x) => x > 0);
  const lo = Math.log10(Math.max(1, Math.min(...all)) / 1.5);
  const hi = Math.log10(Math.max(...all) * 1.2);
  const x = (ms: number) => L + ((Math.log10(Math.max(ms, 1)) - lo) / (hi - lo)) * (W - L - R);
  const y = (p: number) => T + (1 - p) * (H - T - B);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15">Reset latency, burst of ${BURST} at once (CDF)</text>`,
  ];
  for (let e = Math.floor(lo); e <= Math.ceil(hi); e++) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e;
      if (Math.log10(v) < lo || Math.log10(v) > hi) continue;
      parts.push(`<line x1="${x(v)}" y1="${T}" x2="${x(v)}" y2="${H - B}" stroke="#ddd"/>`);
      parts.push(`<text x="${x(v)}" y="${H - B + 16}" text-anchor="middle">${v >= 1000 ? `${v / 1000} s` : `${v} ms`}</text>`);
    }
  }
  for (const p of [0, 0.25, 0.5, 0.75, 0.95, 1]) {
    parts.push(`<line x1="${L}" y1="${y(p)}" x2="${W - R}" y2="${y(p)}" stroke="#eee"/>`);
    parts.push(`<text x="${L - 8}" y="${y(p) + 4}" text-anchor="end">${p}</text>`);
  }
  parts.push(`<text x="${W / 2}" y="${H - 18}" text-anchor="middle">connect → reset observation (log scale)</text>`);
  parts.push(`<text x="18" y="${H / 2}" transform="rotate(-90 18 ${H / 2})" text-anchor="middle">fraction of resets</text>`);
  series.forEach((s, i) => {
    const sorted = [...s.ms].sort((a, b) => a - b);
    const pts = sorted.map((v, k) => `${x(v).toFixed(1)},${y((k + 1) / sorted.length).toFixed(1)}`);
    parts.push(`<polyline fill="none" stroke="${s.color}" stroke-width="2" points="${x(sorted[0]!).toFixed(1)},${y(0)} ${pts.join(' ')}"/>`);
    parts.push(`<rect x="${L + 12}" y="${T + 8 + i * 18}" width="14" height="4" fill="${s.color}"/>`);
    parts.push(
      `<text x="${L + 32}" y="${T + 14 + i * 18}">${s.name} (p50 ${(pct(s.ms, 50) / 1000).toFixed(2)} s, p95 ${(pct(s.ms, 95) / 1000).toFixed(2)} s)</text>`,
    );
  });
  parts.push('</svg>');
  return parts.join('\n');
}

async function cleanup(): Promise<void> {
  const left = await docker.listContainers({ all: true, filters: JSON.stringify({ label: [`bench=${RUN}`] }) });
  await Promise.all(
    left.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true })
        .catch(() => undefined),
    ),
  );
  const nets = await docker.listNetworks({ filters: JSON.stringify({ label: [`bench=${RUN}`] }) });
  await Promise.all(
    nets.map((n) =>
      docker
        .getNetwork(n.Id)
        .remove()
        .catch(() => undefined),
    ),
  );
}

async function main(): Promise<void> {
  progress(
    `bench: fixture env; sustained ${EPISODES} episodes at ${CONCURRENCY} concurrent for --max-concurrent-deploys ${DEPLOY_VALUES.join(', ')}; burst of ${BURST}; ${SINGLES} single warm resets`,
  );
  // the first server builds the image (or finds it)
  const probe = await startServer('probe', ['--max-concurrent-envs', '1']);
  const image = await imageTag(probe, `${RUN}-probe`).finally(() => probe.stop());
  progress(`image ${image}`);

  // 1. sustained
  progress('sustained: bare run/rm through the engine API');
  const bareSustained = await sustainedBare(image);
  progress(`  bare: ${bareSustained.perS.toFixed(2)} episodes/s`);
  progress('sustained: bare run/rm, each in a fresh network of its own (what the server does besides)');
  const bareNetSustained = await sustainedBare(image, true);
  progress(`  bare with networks: ${bareNetSustained.perS.toFixed(2)} episodes/s`);
  const sustained: Record<string, { perS: number; wallS: number; vsBare: number; vsBareNet: number }> = {};
  for (const d of DEPLOY_VALUES) {
    progress(`sustained: server, --max-concurrent-deploys ${d}`);
    const r = await sustainedServer(d);
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
  const bare = await burstBare(image);
  progress(`  bare p50 ${bare.p50_s} s p95 ${bare.p95_s} s max ${bare.max_s} s`);

  // cold
  const cold = await startServer('cold', ['--max-concurrent-envs', String(BURST), '--max-concurrent-deploys', String(picked), '--max-waiting', '4096']);
  let coldResult: BurstResult;
  let rssIdle: number;
  let slot: Record<string, number>;
  try {
    await new Promise((r) => setTimeout(r, 1000));
    rssIdle = cold.rssMb();
    progress(`burst: cold (no pool), server RSS idle ${rssIdle.toFixed(1)} MB`);
    coldResult = await burstServer(cold, 'cold', true);
    progress(
      `  cold p50 ${coldResult.p50_s} s p95 ${coldResult.p95_s} s max ${coldResult.max_s} s; RSS at ${BURST} live ${coldResult.rss_live_mb!.toFixed(1)} MB`,
    );
    // wait for every teardown to finish before reading where the slot time went
    for (let i = 0; i < 240; i++) {
      const m = await cold.metrics();
      if (prom(m, 'openenv_teardown_seconds_count', { outcome: 'ok' }) >= BURST) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    const m = await cold.metrics();
    const mean = (n: string, l: Record<string, string> = {}) => Number((prom(m, `${n}_sum`, l) / prom(m, `${n}_count`, l)).toFixed(3));
    slot = {
      deploy_s: mean('openenv_deploy_seconds'),
      env_removed_s: mean('openenv_teardown_stage_seconds', { stage: 'env_removed' }),
      network_removed_s: mean('openenv_teardown_stage_seconds', { stage: 'network_removed' }),
      teardown_s: mean('openenv_teardown_seconds', { outcome: 'ok' }),
    };
  } finally {
    await cold.stop();
  }

  // warm
  const warm = await startServer('warm', [
    '--max-concurrent-envs',
    String(BURST),
    '--warm-pool',
    String(BURST),
    '--max-concurrent-deploys',
    String(picked),
    '--max-waiting',
    '4096',
  ]);
  let warmResult: BurstResult;
  let fillS: number;
  const singleMs: number[] = [];
  let singlePooled = 0;
  try {
    progress(`burst: warm, filling the pool with ${BURST}`);
    fillS = await waitPool(warm, BURST, 'pool filling');
    progress(`  pool full after ${fillS.toFixed(1)} s`);
    // one reset at a time on an idle server with a full pool (each waits for the pool to be full again)
    progress(`single warm resets: ${SINGLES}, one at a time, the pool full before each`);
    for (let i = 0; i < SINGLES; i++) {
      const e = await episode(warm.url);
      singleMs.push(e.resetMs);
      if (e.timings.pooled === true) singlePooled++;
      await finish(e.client);
      await waitPool(warm, BURST, 'pool refilling');
    }
    progress(`  single warm reset p50 ${pct(singleMs, 50).toFixed(1)} ms (${singlePooled}/${SINGLES} pooled)`);
    progress(`burst: warm`);
    warmResult = await burstServer(warm, 'warm');
    progress(`  warm p50 ${warmResult.p50_s} s p95 ${warmResult.p95_s} s max ${warmResult.max_s} s (${warmResult.pooled}/${BURST} pooled)`);
  } finally {
    await warm.stop();
  }
  await cleanup();

  const rssPerEpisode = (coldResult.rss_live_mb! - rssIdle) / BURST;
  const figures = {
    when: new Date().toISOString(),
    machine: { cpus: (await import('node:os')).cpus().length, engine: (await docker.version()).Version },
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
    single_warm_reset: { n: SINGLES, pooled: singlePooled, p50_ms: Number(pct(singleMs, 50).toFixed(1)), p95_ms: Number(pct(singleMs, 95).toFixed(1)) },
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
      'single warm reset p50 <= 50 ms': pct(singleMs, 50) <= 50,
      'cold sustained >= 0.95x bare (picked value)': sustained[picked]!.vsBare >= 0.95,
      '<= 0.5 MB RSS per live episode': rssPerEpisode <= 0.5,
    },
    total_s: Number(((performance.now() - T0) / 1000).toFixed(0)),
  };

  const dir = path.join(ROOT, 'bench-results');
  mkdirSync(dir, { recursive: true });
  const stamp = figures.when.replace(/[:.]/g, '-');
  const jsonPath = path.join(dir, `bench-${stamp}.json`);
  const svgPath = path.join(dir, `bench-${stamp}.svg`);
  writeFileSync(jsonPath, JSON.stringify(figures, null, 2) + '\n');
  writeFileSync(
    svgPath,
    cdfSvg([
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
  await cleanup().catch(() => undefined);
  process.exit(1);
});
