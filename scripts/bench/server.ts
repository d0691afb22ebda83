/**
 * The server under test, as the bench drives it: `node dist/serve.js` on the fixture bundle as a
 * process of its own, episodes played as slime plays them, the burst and sustained runs through
 * it, and what it reports afterwards (the pool, where an episode's slot time went).
 */
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { freePort } from '../lib/free-port.js';
import { spawnTiedNode } from '../lib/tied-child.js';
import { fileURLToPath } from 'node:url';
import { parsePrometheusText, valueOf } from '../lib/prom-text.js';
import { waitFor } from '../lib/wait.js';
import { WsClient } from '../lib/ws-client.js';
import { ticker, type BenchContext } from './context.js';
import { burst, sustained, type SustainedRate } from './load.js';
import { engineMemory, envContainersMemory, type EngineMemory } from './engine.js';
import { seconds, summarizeBurst, type BurstSummary } from './stats.js';

const BUNDLE = fileURLToPath(new URL('../../test/fixtures/fixture-v1', import.meta.url));
const SERVE = fileURLToPath(new URL('../../dist/serve.js', import.meta.url));

/** the task every bench episode plays */
export const BENCH_TASK = 'fx-echo-0';

export interface BenchServer {
  url: string;
  /** the --instance it runs as: its envs carry it as a label */
  instance: string;
  child: ChildProcess;
  /** the V8 inspector's port when started with `inspect` (for a CPU profile of a window) */
  inspectPort: number | null;
  rssMb(): number;
  metrics(): Promise<string>;
  health(): Promise<{ status: string; pool?: { ready: number } }>;
  stop(): Promise<void>;
}

/**
 * starts the server with `args` besides the bench's own, and waits for /health (the first one
 * builds the env image); `inspect`: with the V8 inspector on a free loopback port; `bundle`: the
 * bundle it serves (default: the fixture)
 */
export async function startServer(
  ctx: BenchContext,
  name: string,
  args: string[],
  opts: { inspect?: boolean; bundle?: string; serve?: string } = {},
): Promise<BenchServer> {
  const port = await freePort();
  const inspectPort = opts.inspect ? await freePort() : null;
  const instance = `${ctx.run}-${name}`;
  const child = spawnTiedNode(
    [
      ...(inspectPort === null ? [] : [`--inspect=127.0.0.1:${inspectPort}`]),
      opts.serve ?? SERVE,
      opts.bundle ?? BUNDLE,
      '--port',
      String(port),
      '--instance',
      instance,
      '--build-arg',
      `NODE_IMAGE=${ctx.nodeImage}`,
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
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`server ${name} exited (${child.exitCode}) before it answered /health`);
      return fetch(`${url}/health`).then(
        (r) => r.ok,
        () => false,
      );
    },
    300_000,
    `server ${name} answering /health`,
    200,
  );
  return {
    url,
    instance,
    child,
    inspectPort,
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

export interface StartedEpisode {
  /** connect → reset observation */
  resetMs: number;
  /** performance.now() at the reset observation */
  startedAt: number;
  timings: Record<string, number | boolean>;
  client: WsClient;
}

/** the start of an episode as slime plays the fixture: connect, reset (BENCH_TASK unless told) */
export async function startEpisode(url: string, taskId = BENCH_TASK): Promise<StartedEpisode> {
  const t0 = performance.now();
  const c = await WsClient.open(url);
  const r = await c.reset({ task_id: taskId }, 900_000);
  if (r.type !== 'observation') throw new Error(`reset failed: ${JSON.stringify(r)}`);
  const startedAt = performance.now();
  return { resetMs: startedAt - t0, startedAt, timings: r.data.observation.timings, client: c };
}

/** the rest of it: list_tools, end_turn, close */
export async function finishEpisode(c: WsClient): Promise<void> {
  await c.listTools();
  const end = await c.call('end_turn', {});
  if (!end.data.done) throw new Error(`unexpected end ${JSON.stringify(end)}`);
  await c.close();
}

/**
 * `episodes` whole episodes, `concurrency` at a time, on a cold server (no pool) with
 * --max-concurrent-deploys `deploys` and `args` besides, once its network stock holds `stock`
 */
export async function sustainedServer(
  ctx: BenchContext,
  name: string,
  deploys: number,
  load: { episodes: number; concurrency: number },
  { args, stock }: { args: string[]; stock: number },
): Promise<SustainedRate> {
  const s = await startServer(ctx, name, [
    '--max-concurrent-envs',
    String(load.concurrency),
    '--max-concurrent-deploys',
    String(deploys),
    '--max-waiting',
    '4096',
    ...args,
  ]);
  try {
    await waitNetworkStock(ctx, s, stock);
    return await sustained(ctx, name, load, async () => {
      const e = await startEpisode(s.url);
      await finishEpisode(e.client);
    });
  } finally {
    await s.stop();
  }
}

/** what the bench reads while every episode of a burst is live */
export interface LiveFigures {
  /** episodes whose echo call came back with its own text */
  answered: number;
  /** the instance's env containers running (pooled ones included) */
  containers_running: number;
  server_rss_mb: number;
  /** the instance's running env containers' memory, summed from the engine's stats */
  env_containers_mb: number;
  engine: EngineMemory;
}

export interface ServerBurst extends BurstSummary {
  /**
   * the mean of each reset's time outside the server's queue and deploy: its latency (connect to
   * observation) less the observation's queued_s and deploy_s (the socket, the frames, the turns
   * of the server's event loop)
   */
  outside_deploy_s: number;
  /** read just before the burst */
  before: { server_rss_mb: number; engine: EngineMemory };
  live: LiveFigures;
  /** from ending every episode at once until the server had finished every teardown (env and network removed) */
  teardown_all_s: number;
}

/**
 * `size` resets at once; once all are live, each episode calls `echo` (all at once) while the
 * bench reads the server's and the engine's memory; then every episode ends at once and the
 * bench waits for the server's teardowns (its teardown histogram's count).
 */
/** `onResetsAnswered`: called once every reset of the burst has answered (before the tool calls and teardowns), awaited */
export async function burstServer(
  ctx: BenchContext,
  s: BenchServer,
  label: string,
  size: number,
  onResetsAnswered?: () => Promise<void>,
): Promise<ServerBurst> {
  const before = { server_rss_mb: s.rssMb(), engine: engineMemory() };
  const { results: eps, t0 } = await burst(ctx, `${label} burst of ${size}`, size, () => startEpisode(s.url));
  await onResetsAnswered?.();
  const last = Math.max(...eps.map((e) => e.startedAt)) - t0;
  const answers = await Promise.all(
    eps.map((e, i) =>
      e.client.call('echo', { text: `live-${i}` }).then(
        (r) => r?.data?.observation?.result?.data?.text === `live-${i}`,
        () => false,
      ),
    ),
  );
  const env = await envContainersMemory(ctx, s.instance);
  const live: LiveFigures = {
    answered: answers.filter(Boolean).length,
    containers_running: env.containers,
    server_rss_mb: s.rssMb(),
    env_containers_mb: env.mb,
    engine: engineMemory(),
  };
  const tornDown = await teardownCount(s);
  const e0 = performance.now();
  await Promise.all(eps.map((e) => finishEpisode(e.client)));
  await waitFor(async () => (await teardownCount(s)) >= tornDown + size, 600_000, `${label}: every teardown`, 100);
  return {
    ...summarizeBurst(
      eps.map((e) => e.resetMs),
      last,
      eps.filter((e) => e.timings.pooled === true).length,
    ),
    outside_deploy_s: seconds(
      eps.reduce((a, e) => a + e.resetMs - 1000 * (Number(e.timings.queued_s ?? 0) + Number(e.timings.deploy_s ?? 0)), 0) / Math.max(1, eps.length),
    ),
    before,
    live,
    teardown_all_s: seconds(performance.now() - e0),
  };
}

async function teardownCount(s: BenchServer): Promise<number> {
  return prom(await s.metrics(), 'openenv_teardown_seconds_count', { outcome: 'ok' }) || 0;
}

/** waits until the warm pool holds `n` ready envs; the seconds it took */
export async function waitPool(ctx: BenchContext, s: BenchServer, n: number, what: string): Promise<number> {
  const t0 = performance.now();
  let lastReady = 0;
  const stop = ticker(ctx, what, () => lastReady, n);
  try {
    await waitFor(
      async () => {
        lastReady = (await s.health()).pool?.ready ?? 0;
        return lastReady >= n;
      },
      1_800_000,
      `${n} envs ready in the pool`,
      250,
    );
    return (performance.now() - t0) / 1000;
  } finally {
    stop();
  }
}

/** waits until the server's network stock holds `n` ready networks (as a server that started well before its trainer would); the seconds it took */
export async function waitNetworkStock(ctx: BenchContext, s: BenchServer, n: number): Promise<number> {
  const t0 = performance.now();
  if (n === 0) return 0;
  // full by the stock's own measure: with recycling, networks out with live episodes (the pool's
  // envs) count towards its size, so `ready` alone stays short of it while they are out
  await waitFor(
    async () => {
      const m = await s.metrics();
      return prom(m, 'openenv_network_stock_ready') + prom(m, 'openenv_network_stock_out') >= n;
    },
    300_000,
    `${n} networks in the stock (ready or out with an episode)`,
    100,
  );
  return (performance.now() - t0) / 1000;
}

/** one series' value in a Prometheus text (NaN when absent) */
function prom(text: string, name: string, labels: Record<string, string> = {}): number {
  return valueOf(parsePrometheusText(text), name, labels) ?? NaN;
}

export interface SlotTime {
  deploy_s: number;
  /** the mean of each stage of the episodes' own deploys (openenv_deploy_stage_seconds), in the order the server ran them */
  deploy_stages_s: Record<string, number>;
  env_removed_s: number;
  network_removed_s: number;
  teardown_s: number;
}

/** where an episode's slot time went (means from the server's histograms), once `episodes` teardowns have finished (or after 60 s) */
export async function slotTime(ctx: BenchContext, s: BenchServer, episodes: number): Promise<SlotTime> {
  await waitFor(async () => prom(await s.metrics(), 'openenv_teardown_seconds_count', { outcome: 'ok' }) >= episodes, 60_000, 'every teardown', 250).catch(() =>
    ctx.progress(`  not every teardown of the ${episodes} had finished after 60 s: the means are of those that had`),
  );
  const m = await s.metrics();
  const mean = (n: string, l: Record<string, string> = {}) => Number((prom(m, `${n}_sum`, l) / prom(m, `${n}_count`, l)).toFixed(3));
  const stages = (parsePrometheusText(m).get('openenv_deploy_stage_seconds')?.samples ?? []).filter((x) => x.name === 'openenv_deploy_stage_seconds_count');
  const order = ['turn', 'network', 'create', 'start', 'ready', 'env_reset'];
  const rank = (s: string) => (order.includes(s) ? order.indexOf(s) : order.length);
  const names = stages.map((x) => x.labels.stage!).sort((a, b) => rank(a) - rank(b));
  return {
    deploy_s: mean('openenv_deploy_seconds'),
    deploy_stages_s: Object.fromEntries(names.map((stage) => [stage, mean('openenv_deploy_stage_seconds', { stage })])),
    env_removed_s: mean('openenv_teardown_stage_seconds', { stage: 'env_removed' }),
    network_removed_s: mean('openenv_teardown_stage_seconds', { stage: 'network_removed' }),
    teardown_s: mean('openenv_teardown_seconds', { outcome: 'ok' }),
  };
}
