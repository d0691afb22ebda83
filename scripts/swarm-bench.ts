/**
 * The burst benchmark of the swarm backend on the swarm lab (scripts/swarm-lab.sh), every figure a
 * ratio against a baseline taken in the same run on the same machine:
 *
 *   0. baseline: the same server and bundle on one host (`--sandbox docker`, the main engine, a
 *      process of its own), B resets at once, cold (no pool);
 *   1. per swarm configuration (1 node, then 3): the lab comes up with that many nodes and the
 *      server runs as a container on the manager n1 (scripts/lib/swarm-lab.ts, as the swarm tests
 *      run it) with --max-concurrent-envs B:
 *      - cold: B resets at once, every episode deleted, nothing left on any node;
 *      - warm: a server with --warm-pool B, the pool full, B resets at once, every episode deleted,
 *        then the pool refilled to B (and where the refilled envs run);
 *      in both, every container start and die on every node is read from the nodes' own events, so
 *      the most envs alive at once (summed over nodes, and per node) is exact.
 *   The cold deploys' stages (node listing, overlay, connect, service, scheduling, task start,
 *   address, readiness; from the server's `env ready` lines) and the deploy-limiter wait (the
 *   reset's deploy_s minus the sandbox's own deploy time) are summed up per configuration.
 *
 *   npm run bench:swarm                    # B = 64, nodes 1 and 3, cold and warm
 *   npm run bench:swarm -- --burst 16 --nodes 1 --phases cold --deploys 32
 *
 * The bench bundle is a copy of test/fixtures/fixture-v1 whose env reserves little (memory_mb 64,
 * cpus 0.02), so B envs fit the nodes' reservations, and whose deploy_timeout_s is 600 s, so a
 * slow deploy is measured rather than failed; the one-host baseline runs the same copy. Needs
 * root, the lab's tools and the main engine (run it under the Docker lock). Writes
 * bench-results/swarm-burst.json and swarm-burst.svg (reset-latency CDFs).
 */
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { followContainerLives } from './lib/container-lives.js';
import {
  bearerJsonCall,
  fixtureCopy,
  footprint,
  lab,
  LAB_PROBLEM,
  nodeIds,
  prepareServerImage,
  removeServers,
  REPO,
  runningContainers,
  sock,
  startServer,
  type LabServer,
} from './lib/swarm-lab.js';
import { cdfSvg, type CdfSeries } from './bench/charts.js';
import { percentile, seconds } from './bench/stats.js';
import { freePort } from './lib/free-port.js';
import { LOCAL_NODE_IMAGE } from './lib/local-node-image.js';
import { waitFor } from './lib/wait.js';
import { parsePrometheusText, valueOf } from './lib/prom-text.js';
import { spawnTiedNode } from './lib/tied-child.js';
import { NETWORK_STOCK } from '../src/defaults.js';
import { STOCK_KEY_PREFIX } from '../src/sandbox/engine/network-stock.js';
import { LABELS } from '../src/sandbox/sandbox.js';
import { DEPLOY_STAGES } from '../src/sandbox/swarm/deploy-stages.js';

const run = promisify(execFile);
const { values } = parseArgs({
  options: {
    burst: { type: 'string', default: '64' },
    nodes: { type: 'string', default: '1,3' },
    phases: { type: 'string', default: 'cold,warm' },
    /** --max-concurrent-deploys of the swarm servers (default: the server's own) */
    deploys: { type: 'string' },
    'no-baseline': { type: 'boolean', default: false },
  },
});
const BURST = Number(values.burst);
const CONFIGS = values.nodes.split(',').map(Number);
const PHASES = new Set(values.phases.split(','));
const DEPLOY_ARGS = values.deploys ? ['--max-concurrent-deploys', values.deploys] : [];
if (
  !Number.isInteger(BURST) ||
  BURST < 1 ||
  CONFIGS.some((n) => !Number.isInteger(n) || n < 1 || n > 9) ||
  [...PHASES].some((p) => p !== 'cold' && p !== 'warm')
) {
  console.error('usage: tsx scripts/swarm-bench.ts [--burst N] [--nodes 1,3] [--phases cold,warm] [--deploys N] [--no-baseline]');
  process.exit(2);
}
if (LAB_PROBLEM) {
  console.error(`the swarm lab cannot run here: ${LAB_PROBLEM}`);
  process.exit(1);
}

const began = performance.now();
const progress = (msg: string) => process.stderr.write(`[${((performance.now() - began) / 1000).toFixed(0).padStart(4)} s] ${msg}\n`);
const secs = (ms: number) => seconds(ms, 1);
/** the servers' --network-stock: their default (the cap, at most NETWORK_STOCK.defaultMax) */
const STOCK = Math.min(BURST, NETWORK_STOCK.defaultMax);
const s3 = (ms: number) => seconds(ms, 3);

/** what the bench needs of a server, wherever it runs */
type Target = Pick<LabServer, 'call'>;

interface Reset {
  ms: number;
  status: number;
  at: number;
  id?: string;
  reason?: string;
  deployS?: number;
  pooled?: boolean;
}

async function burst(server: Target, n: number): Promise<{ results: Reset[]; t0: number }> {
  const t0 = performance.now();
  const results = await Promise.all(
    Array.from({ length: n }, async (): Promise<Reset> => {
      const started = performance.now();
      const r = await server.call('POST', '/episodes', { task_id: 'fx-echo-0' });
      const at = performance.now();
      const timings = r.body?.observation?.timings;
      return {
        ms: at - started,
        status: r.status,
        at,
        id: r.body?.episode_id,
        reason: r.body?.failure?.reason ?? r.body?.error,
        deployS: timings?.deploy_s,
        pooled: timings?.pooled,
      };
    }),
  );
  return { results, t0 };
}

interface BurstFigures {
  started: number;
  failed: Array<string | number>;
  p50_s: number | null;
  p95_s: number | null;
  max_s: number | null;
  /** from the first request to the last episode started */
  last_started_s: number | null;
  pooled: number;
  resetMs: number[];
}

function figures(results: Reset[], t0: number): BurstFigures {
  const ok = results.filter((r) => r.status === 201 && r.id);
  const ms = ok.map((r) => r.ms);
  return {
    started: ok.length,
    failed: results.filter((r) => r.status !== 201).map((r) => r.reason ?? r.status),
    p50_s: ms.length ? s3(percentile(ms, 50)) : null,
    p95_s: ms.length ? s3(percentile(ms, 95)) : null,
    max_s: ms.length ? s3(Math.max(...ms)) : null,
    last_started_s: ok.length ? secs(Math.max(...ok.map((r) => r.at)) - t0) : null,
    pooled: ok.filter((r) => r.pooled).length,
    resetMs: ms.map(Math.round),
  };
}

/**
 * Waits until the server's network stock holds `STOCK` networks: a cold burst is measured on a
 * server that has had the time to make its networks ahead of demand (its envs are not deployed).
 */
async function stockFull(server: Target, what: string): Promise<number> {
  const t = performance.now();
  await waitFor(
    async () => {
      const m = await server.call('GET', '/metrics');
      return (valueOf(parsePrometheusText(String(m.body)), 'openenv_network_stock_ready') ?? 0) >= STOCK;
    },
    900_000,
    `${what}: ${STOCK} networks in the stock`,
    500,
  );
  return secs(performance.now() - t);
}

// --- the one-host baseline --------------------------------------------------------------------

async function hostBaseline(bundleDir: string): Promise<BurstFigures & { cap_peak: number }> {
  const port = await freePort();
  const instance = `swarm-bench-host-${process.pid}`;
  const token = `tok-${instance}`;
  const label = `${LABELS.instance}=${instance}`;
  const child = spawnTiedNode(
    [
      join(REPO, 'dist/serve.js'),
      bundleDir,
      '--port',
      String(port),
      '--instance',
      instance,
      '--sandbox',
      'docker',
      '--build-arg',
      `NODE_IMAGE=${LOCAL_NODE_IMAGE}`,
      '--max-concurrent-envs',
      String(BURST),
      '--reset-timeout',
      '900',
      '--ping-interval',
      '0',
    ],
    { env: { ...process.env, LOG_LEVEL: 'warn', AGENTENV_TOKEN: token }, stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const url = `http://127.0.0.1:${port}`;
  const server: Target = { call: bearerJsonCall(url, token) };
  /** the instance's containers and networks on the main engine; with `stocked` false, not counting its network stock */
  const left = async (stocked: boolean) => {
    const ps = await run('docker', ['ps', '-aq', '--filter', `label=${label}`]);
    const nets = await run('docker', ['network', 'ls', '--filter', `label=${label}`, '--format', `{{.Label "${LABELS.episode}"}}`]);
    const networks = nets.stdout.split('\n').filter((e) => e && (stocked || !e.startsWith(STOCK_KEY_PREFIX)));
    return ps.stdout.trim().split('\n').filter(Boolean).length + networks.length;
  };
  let f: BurstFigures & { cap_peak: number };
  try {
    await waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`the one-host server exited (${child.exitCode}) before it answered /health`);
        return fetch(`${url}/health`).then(
          (r) => r.ok,
          () => false,
        );
      },
      300_000,
      'the one-host server answering /health',
      200,
    );
    const stockS = await stockFull(server, 'one host');
    progress(`one host: ${STOCK} networks stocked in ${stockS} s; ${BURST} resets at once, cold…`);
    const watch = followContainerLives(label, { host: undefined });
    const { results, t0 } = await burst(server, BURST);
    await Promise.all(results.filter((r) => r.id).map((r) => server.call('DELETE', `/episodes/${r.id}`)));
    await waitFor(async () => (await left(false)) === 0, 600_000, 'every env of the one-host burst gone', 500);
    f = { ...figures(results, t0), cap_peak: (await watch.stop()).peak };
  } finally {
    if (child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
  }
  if ((await left(true)) !== 0) throw new Error(`the one-host server left env containers or networks of ${instance} behind`);
  return f;
}

// --- the swarm runs ---------------------------------------------------------------------------

interface StageSummary {
  /** episodes whose `env ready` line was read */
  count: number;
  /** of those, the deploys that took an overlay from the stock */
  stocked: number;
  /** per stage (and the sandbox's whole deploy): mean and p95 in seconds */
  stages: Record<string, { mean_s: number; p95_s: number }>;
  /** the deploy-limiter wait: the reset's deploy_s minus the sandbox's own deploy time */
  limiter_wait: { mean_s: number; p95_s: number } | null;
}

/** the cold deploys' stages, from the server's `env ready` lines of these episodes */
function stageSummary(logs: string, results: Reset[]): StageSummary {
  const mine = new Map(results.filter((r) => r.id).map((r) => [r.id!, r]));
  const rows: Array<Record<string, number> & { episode?: string; stockedOverlay?: boolean }> = [];
  for (const line of logs.split('\n')) {
    if (!line.includes('"env ready"')) continue;
    try {
      const o = JSON.parse(line);
      if (o.msg === 'env ready' && mine.has(o.episode)) rows.push(o);
    } catch {
      // not a JSON line
    }
  }
  const sum = (xs: number[]) => ({ mean_s: s3(xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length)), p95_s: s3(percentile(xs, 95)) });
  const stages: StageSummary['stages'] = {};
  for (const k of [...DEPLOY_STAGES.map((s) => `${s}Ms`), 'deployMs', 'connectMs']) {
    const xs = rows.map((r) => r[k]).filter((v): v is number => typeof v === 'number');
    if (xs.length) stages[k.replace(/Ms$/, '')] = sum(xs);
  }
  const waits = rows
    .map((r) => {
      const deployS = mine.get(r.episode!)?.deployS;
      return deployS === undefined ? NaN : Math.max(0, deployS * 1000 - r.deployMs!);
    })
    .filter((x) => Number.isFinite(x));
  return { count: rows.length, stocked: rows.filter((r) => r.stockedOverlay === true).length, stages, limiter_wait: waits.length ? sum(waits) : null };
}

interface ColdRun extends BurstFigures {
  /** from the server's /health to its overlay stock full */
  stock_s: number;
  /** envs per node while every episode was live */
  per_node: Record<string, number>;
  cap_peak: number;
  cap_peak_per_node: Record<string, number>;
  teardown_s: number;
  stages: StageSummary;
}

interface WarmRun extends BurstFigures {
  /** the pool full for the first time, from the server's start */
  fill_s: number;
  cap_peak: number;
  cap_peak_per_node: Record<string, number>;
  /** from the last DELETE to the pool full again */
  refill_s: number;
  /** where the refilled pool's envs run */
  refilled_per_node: Record<string, number>;
  /** the pool's ready count after the refill (B: refilled) */
  refilled_ready: number;
}

interface SwarmResult {
  nodes: number;
  burst: number;
  cold?: ColdRun;
  warm?: WarmRun;
  lab_up_s: number;
  image_s: number;
  config_s: number;
}

/** nothing of the instance's episodes left on any node, and at most `stocked` overlays of its stock */
async function allGone(instance: string, nodes: number, stocked = STOCK): Promise<void> {
  const t = performance.now();
  for (;;) {
    const left = await footprint(instance, nodes);
    if (left.services.length + left.networks.length + left.tasks.length + runningContainers(left) === 0 && left.stocked.length <= stocked) return;
    if (performance.now() - t > 600_000) throw new Error(`not everything of ${instance} gone after 600 s: ${JSON.stringify(left)}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

function peaks(perNode: Record<string, { peak: number }>): Record<string, number> {
  return Object.fromEntries(Object.entries(perNode).map(([k, v]) => [k, v.peak]));
}

function hostsOf(nodes: number): Record<string, string> {
  return Object.fromEntries(Array.from({ length: nodes }, (_, i) => [`n${i + 1}`, sock(i + 1)]));
}

async function stopServer(name: string): Promise<void> {
  // SIGTERM, then the drain (--shutdown-timeout 120): every env on every node torn down
  await run('docker', ['-H', sock(1), 'stop', '-t', '150', name]);
}

async function coldRun(nodes: number, bundleDir: string): Promise<ColdRun> {
  const server = await startServer({
    instance: `bench-cold-${nodes}n`,
    port: 18600 + nodes,
    bundleDir,
    args: ['--max-concurrent-envs', String(BURST), '--reset-timeout', '900', ...DEPLOY_ARGS],
  });
  const label = `${LABELS.instance}=${server.instance}`;
  const stock_s = await stockFull(server, `${nodes} node(s)`);
  progress(`${nodes} node(s), cold: ${STOCK} overlays stocked in ${stock_s} s; ${BURST} resets at once…`);
  const watch = followContainerLives(label, hostsOf(nodes));
  const { results, t0 } = await burst(server, BURST);
  const f = figures(results, t0);
  const live = await footprint(server.instance, nodes);
  const per_node = Object.fromEntries(Object.entries(live.containers).map(([k, v]) => [k, v.length]));
  const t = performance.now();
  await Promise.all(results.filter((r) => r.id).map((r) => server.call('DELETE', `/episodes/${r.id}`)));
  await allGone(server.instance, nodes);
  const teardown_s = secs(performance.now() - t);
  const cap = await watch.stop();
  const stages = stageSummary(await server.logs(), results);
  await stopServer(server.name);
  await allGone(server.instance, nodes, 0);
  return { ...f, stock_s, per_node, cap_peak: cap.peak, cap_peak_per_node: peaks(cap.perNode), teardown_s, stages };
}

async function poolReady(server: Target): Promise<number> {
  const h = await server.call('GET', '/health');
  return (h.body?.pool?.ready as number | undefined) ?? 0;
}

async function warmRun(nodes: number, bundleDir: string): Promise<WarmRun> {
  const instance = `bench-warm-${nodes}n`;
  const watch = followContainerLives(`${LABELS.instance}=${instance}`, hostsOf(nodes));
  const t0 = performance.now();
  const server = await startServer({
    instance,
    port: 18610 + nodes,
    bundleDir,
    args: ['--max-concurrent-envs', String(BURST), '--warm-pool', String(BURST), '--reset-timeout', '900', ...DEPLOY_ARGS],
  });
  progress(`${nodes} node(s), warm: waiting for a full pool of ${BURST}…`);
  await waitFor(async () => (await poolReady(server)) >= BURST, 1_800_000, `${BURST} envs ready in the pool`, 500);
  const fill_s = secs(performance.now() - t0);
  progress(`${nodes} node(s), warm: pool full after ${fill_s} s; ${BURST} resets at once…`);
  const { results, t0: b0 } = await burst(server, BURST);
  const f = figures(results, b0);
  await Promise.all(results.filter((r) => r.id).map((r) => server.call('DELETE', `/episodes/${r.id}`)));
  const t = performance.now();
  progress(`${nodes} node(s), warm: episodes deleted; waiting for the pool to refill…`);
  await waitFor(async () => (await poolReady(server)) >= BURST, 1_800_000, `the pool refilled to ${BURST}`, 500);
  const refill_s = secs(performance.now() - t);
  // the refilled envs are the instance's only live containers now (the episodes' are gone)
  await waitFor(async () => runningContainers(await footprint(server.instance, nodes)) === BURST, 120_000, 'the episodes’ containers gone', 1000);
  const refilled = await footprint(server.instance, nodes);
  const refilled_per_node = Object.fromEntries(Object.entries(refilled.containers).map(([k, v]) => [k, v.length]));
  const refilled_ready = await poolReady(server);
  const cap = await watch.stop();
  await stopServer(server.name);
  await allGone(server.instance, nodes, 0);
  return { ...f, fill_s, cap_peak: cap.peak, cap_peak_per_node: peaks(cap.perNode), refill_s, refilled_per_node, refilled_ready };
}

async function runConfig(nodes: number, bundleDir: string): Promise<SwarmResult> {
  const began = performance.now();
  await lab('down', 9);
  let t = performance.now();
  await lab('up', nodes);
  const lab_up_s = secs(performance.now() - t);
  const ids = await nodeIds(nodes);
  if (ids.size !== nodes) throw new Error(`the lab came up with ${ids.size} node(s), not ${nodes}`);
  t = performance.now();
  await prepareServerImage();
  const image_s = secs(performance.now() - t);
  const out: SwarmResult = { nodes, burst: BURST, lab_up_s, image_s, config_s: 0 };
  try {
    if (PHASES.has('cold')) out.cold = await coldRun(nodes, bundleDir);
    if (PHASES.has('warm')) out.warm = await warmRun(nodes, bundleDir);
  } finally {
    await removeServers().catch(() => {});
    await lab('down', 9);
  }
  out.config_s = secs(performance.now() - began);
  return out;
}

// --- the run ----------------------------------------------------------------------------------

const bundle = fixtureCopy((manifest) => {
  manifest.envs.echo.resources.memory_mb = 64;
  manifest.envs.echo.resources.cpus = 0.02;
  manifest.envs.echo.deploy_timeout_s = 600;
});
let baseline: (BurstFigures & { cap_peak: number }) | null = null;
const out: SwarmResult[] = [];
try {
  if (!values['no-baseline']) {
    baseline = await hostBaseline(bundle.dir);
    progress(`one host, cold: p50 ${baseline.p50_s} s, p95 ${baseline.p95_s} s`);
  }
  for (const nodes of CONFIGS) {
    const r = await runConfig(nodes, bundle.dir);
    progress(
      `${nodes} node(s): ${JSON.stringify({ ...r, cold: r.cold && { ...r.cold, resetMs: undefined }, warm: r.warm && { ...r.warm, resetMs: undefined } })}`,
    );
    out.push(r);
  }
} finally {
  bundle.cleanup();
  await lab('down', 9).catch(() => {});
}

const row = (cells: Array<string | number>) => `| ${cells.join(' | ')} |`;
const sec = (v: number | null) => (v === null ? '-' : `${v.toFixed(2)} s`);
const ratio = (v: number | null) => (v === null || !baseline?.p95_s ? '-' : `${(v / baseline.p95_s).toFixed(2)}×`);
const nodesCell = (m: Record<string, number>) =>
  Object.entries(m)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
console.log(
  `\nSwarm burst: ${BURST} resets at once, cap ${BURST}, fixture env (memory_mb 64, cpus 0.02); ${cpus().length} CPUs, ${Math.round(totalmem() / 2 ** 30)} GiB, every node on this one machine; cold runs start once the server's network stock (${STOCK}) is full\n`,
);
console.log(
  row(['run', 'started', 'failed', 'reset p50', 'reset p95', 'p95 / one-host cold p95', 'last started', 'most envs alive (per node)', 'envs per node']),
);
console.log(row(Array(9).fill('---')));
if (baseline)
  console.log(
    row([
      'one host, cold',
      baseline.started,
      baseline.failed.length,
      sec(baseline.p50_s),
      sec(baseline.p95_s),
      '1.00×',
      `${baseline.last_started_s} s`,
      baseline.cap_peak,
      '-',
    ]),
  );
for (const r of out) {
  if (r.cold) {
    const c = r.cold;
    console.log(
      row([
        `${r.nodes} node(s), cold`,
        c.started,
        c.failed.length ? `${c.failed.length} ${JSON.stringify(c.failed)}` : 0,
        sec(c.p50_s),
        sec(c.p95_s),
        ratio(c.p95_s),
        `${c.last_started_s} s`,
        `${c.cap_peak} (${nodesCell(c.cap_peak_per_node)})`,
        nodesCell(c.per_node),
      ]),
    );
  }
  if (r.warm) {
    const w = r.warm;
    console.log(
      row([
        `${r.nodes} node(s), warm`,
        `${w.started} (${w.pooled} pooled)`,
        w.failed.length ? `${w.failed.length} ${JSON.stringify(w.failed)}` : 0,
        sec(w.p50_s),
        sec(w.p95_s),
        ratio(w.p95_s),
        `${w.last_started_s} s`,
        `${w.cap_peak} (${nodesCell(w.cap_peak_per_node)})`,
        `refilled ${w.refilled_ready}/${BURST} in ${w.refill_s} s: ${nodesCell(w.refilled_per_node)}`,
      ]),
    );
  }
}
const withStages = out.filter((r) => r.cold && r.cold.stages.count > 0);
if (withStages.length) {
  const keys = [...DEPLOY_STAGES, 'deploy', 'connect'];
  console.log(
    `\nWhere a cold swarm deploy's time goes (mean / p95 per episode, seconds; deploy: the sandbox's whole deploy; connect: the server container's join, which runs beside service…address; limiter: waiting for a --max-concurrent-deploys turn)\n`,
  );
  console.log(row(['nodes', 'stocked overlays', ...keys, 'limiter wait']));
  console.log(row(Array(keys.length + 3).fill('---')));
  for (const r of withStages) {
    const st = r.cold!.stages;
    const cell = (v?: { mean_s: number; p95_s: number } | null) => (v ? `${v.mean_s.toFixed(2)} / ${v.p95_s.toFixed(2)}` : '-');
    console.log(row([r.nodes, `${st.stocked}/${st.count}`, ...keys.map((k) => cell(st.stages[k])), cell(st.limiter_wait)]));
  }
}
const warm = out.filter((r) => r.warm);
if (warm.length) console.log(`\nWarm pool: filled in ${warm.map((r) => `${r.warm!.fill_s} s (${r.nodes} node(s))`).join(', ')}`);

mkdirSync(join(REPO, 'bench-results'), { recursive: true });
const file = join(REPO, 'bench-results/swarm-burst.json');
writeFileSync(
  file,
  JSON.stringify(
    {
      date: new Date().toISOString(),
      cpus: cpus().length,
      memory_gib: Math.round(totalmem() / 2 ** 30),
      burst: BURST,
      network_stock: STOCK,
      baseline,
      results: out,
    },
    null,
    2,
  ) + '\n',
);
const colors = ['#555', '#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b'];
const series: CdfSeries[] = [];
if (baseline?.resetMs.length) series.push({ name: 'one host, cold', color: colors[0]!, ms: baseline.resetMs });
for (const r of out) {
  if (r.cold?.resetMs.length) series.push({ name: `swarm ${r.nodes} node(s), cold`, color: colors[series.length % colors.length]!, ms: r.cold.resetMs });
  if (r.warm?.resetMs.length) series.push({ name: `swarm ${r.nodes} node(s), warm`, color: colors[series.length % colors.length]!, ms: r.warm.resetMs });
}
const svg = join(REPO, 'bench-results/swarm-burst.svg');
if (series.length) writeFileSync(svg, cdfSvg(`Swarm burst of ${BURST}: reset latency (POST /episodes → answer)`, series));
console.log(`\nwrote ${file}${series.length ? ` and ${svg}` : ''}`);
