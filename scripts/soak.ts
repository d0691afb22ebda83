/**
 * `npm run soak`: a long mixed run against real `node dist/serve.js` servers on Docker, then what
 * was left. Not part of CI (it takes minutes and wants a quiet engine). Two servers run side by side,
 * as a cluster would run them:
 *   - GridSim (bundles/gridsim-v1) with a warm pool refilling (--warm-pool) and --record on;
 *   - the shipped Harbor dataset (datasets/openenv-harbor-v1, imported here), shell envs scored by
 *     their verifiers, with --record on.
 * Episodes (--episodes, split by --shell-share) are played with a realistic mix, seeded:
 *   - played: GridSim calls get_situation/check_schedule then submits; a shell episode replays the
 *     task's golden solution (its verifier then scores it);
 *   - dropped: --drop-share of clients vanish, half mid-reset and half mid-step;
 *   - crashed: --crash-share of episodes have their env container killed from outside (docker kill)
 *     mid-episode, and must end `env_failed`.
 * Each server's console stream (/console/stream) stays open the whole run. Every few seconds the
 * soak reads each server's RSS, open file descriptors and event-loop lag p99 (from /metrics).
 * At the end: outcomes, RSS at start, middle and end (the end must be within 1.2x the middle),
 * fds, lag p99, slots still held, containers, networks and volumes of the instances left (all 0),
 * error lines. Exits 1 when something leaked or the memory bound failed.
 * Needs the offline bases (docker/make-local-node-base.sh, docker/make-local-debian-base.sh).
 * Options: --episodes N (2000), --concurrency N (8), --shell-share F (0.25), --drop-share F (0.2),
 * --crash-share F (0.05), --warm-pool N (8), --history N (100: the console's kept episodes, full
 * well before the middle, so the memory bound measures leaks rather than the history filling up),
 * --seed N (1), --node-image REF, --debian-image REF, --synthetic N (0: the shipped dataset; N: a
 * synthetic dataset of N Harbor tasks with an image each, scripts/lib/synthetic-dataset.ts, made and
 * imported here, its images built by the server as it serves and removed at the end).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { lineSplitter } from '../src/util/lines.js';
import { LABELS } from '../src/sandbox/sandbox.js';
import { forEachAtMost } from '../src/util/work-pool.js';
import { LOCAL_NODE_IMAGE } from './lib/local-node-image.js';
import { parsePrometheusText, sumOf } from './lib/prom-text.js';
import { WsClient } from './lib/ws-client.js';
import { spawnTiedNode } from './lib/tied-child.js';
import { writeSyntheticDataset } from './lib/synthetic-dataset.js';

const { values } = parseArgs({
  options: {
    episodes: { type: 'string', default: '2000' },
    concurrency: { type: 'string', default: '8' },
    'shell-share': { type: 'string', default: '0.25' },
    'drop-share': { type: 'string', default: '0.2' },
    'crash-share': { type: 'string', default: '0.05' },
    'warm-pool': { type: 'string', default: '8' },
    history: { type: 'string', default: '100' },
    seed: { type: 'string', default: '1' },
    'node-image': { type: 'string', default: LOCAL_NODE_IMAGE },
    'debian-image': { type: 'string', default: 'openenv-local/debian:bookworm' },
    synthetic: { type: 'string', default: '0' },
  },
});
const SYNTHETIC = Number(values.synthetic);
if (!Number.isInteger(SYNTHETIC) || SYNTHETIC < 0) throw new Error(`--synthetic must be a whole number, not ${JSON.stringify(values.synthetic)}`);
const EPISODES = Number(values.episodes);
const CONCURRENCY = Number(values.concurrency);
const SHELL_SHARE = Number(values['shell-share']);
const DROP_SHARE = Number(values['drop-share']);
const CRASH_SHARE = Number(values['crash-share']);
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SERVE = join(ROOT, 'dist/serve.js');
const CLI = join(ROOT, 'dist/cli/openenv-bundle.js');
const TOKEN = `soak-token-${process.pid}-${Date.now()}`;
const WORK = mkdtempSync(join(tmpdir(), 'openenv-soak-'));

/** a small deterministic PRNG (mulberry32), so a run can be repeated with --seed */
let state = Number(values.seed) >>> 0;
function random(): number {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}

function sh(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(cmd, args, { maxBuffer: 64 << 20 }, (err, out, errOut) =>
      err ? reject(new Error(`${cmd} ${args.join(' ')}: ${errOut || err.message}`)) : resolve(out.trim()),
    ),
  );
}

const lines = (s: string) => (s ? s.split('\n').length : 0);

function rssMb(pid: number): number {
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Math.round(Number(m[1]) / 1024) : NaN;
}

function openFds(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

async function leftOnEngine(instance: string): Promise<{ containers: number; networks: number; volumes: number }> {
  const filter = `label=${LABELS.instance}=${instance}`;
  const [c, n, v] = await Promise.all([
    sh('docker', ['ps', '-aq', '--filter', filter]),
    sh('docker', ['network', 'ls', '-q', '--filter', filter]),
    sh('docker', ['volume', 'ls', '-q', '--filter', filter]),
  ]);
  return { containers: lines(c), networks: lines(n), volumes: lines(v) };
}

interface Server {
  name: string;
  instance: string;
  url: string;
  pid: number;
  errors: () => number;
  stop: () => Promise<number | null>;
}

async function startServer(name: string, bundle: string, extra: string[]): Promise<Server> {
  const instance = `soak-${name}-${process.pid}`;
  const record = join(WORK, `record-${name}`);
  const args = [
    SERVE,
    bundle,
    '--port',
    '0',
    '--instance',
    instance,
    '--max-concurrent-envs',
    String(CONCURRENCY),
    '--record',
    record,
    '--history',
    values.history,
    ...extra,
  ];
  const child = spawnTiedNode(args, { env: { ...process.env, LOG_LEVEL: 'info', AGENTENV_TOKEN: TOKEN }, stdio: ['ignore', 'pipe', 'inherit'] });
  let errors = 0;
  const url = await new Promise<string>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${name}: the server did not start within 10 minutes`)), 600_000);
    const split = lineSplitter((line) => {
      if (line.includes('"level":50') || line.includes('"level":60')) {
        errors++;
        if (errors <= 5) console.log(`${name} server error line: ${line.slice(0, 300)}`);
      }
      const m = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(line);
      if (m) {
        clearTimeout(t);
        resolve(m[1]!);
      }
    });
    child.stdout!.on('data', (d: Buffer) => split.push(d));
    child.once('exit', (code) => reject(new Error(`${name}: the server exited ${code}`)));
  });
  // /health turns 200 once the env images are built
  for (let until = Date.now() + 900_000; ;) {
    if (
      await fetch(`${url}/health`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    if (Date.now() > until) throw new Error(`${name}: the server never became healthy`);
    await new Promise((r) => setTimeout(r, 500));
  }
  process.on('exit', () => child.kill('SIGKILL'));
  return {
    name,
    instance,
    url,
    pid: child.pid!,
    errors: () => errors,
    stop: () =>
      new Promise((resolve) => {
        child.once('exit', (code) => resolve(code));
        child.kill('SIGTERM');
      }),
  };
}

const auth = { authorization: `Bearer ${TOKEN}` };

/** keeps /console/stream open and counts its lines; `close` ends it and says whether it ever broke */
function openConsoleStream(server: Server): { lines: () => number; broke: () => string | null; close: () => void } {
  const ac = new AbortController();
  let count = 0;
  let broke: string | null = null;
  void (async () => {
    try {
      const res = await fetch(`${server.url}/console/stream`, { headers: auth, signal: ac.signal });
      if (!res.ok || !res.body) throw new Error(`status ${res.status}`);
      const decoder = new TextDecoder();
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) count += decoder.decode(chunk, { stream: true }).split('\n').length - 1;
      if (!ac.signal.aborted) broke = 'the stream ended while the server ran';
    } catch (e) {
      if (!ac.signal.aborted) broke = (e as Error).message;
    }
  })();
  return { lines: () => count, broke: () => broke, close: () => ac.abort() };
}

interface Sample {
  rss: number;
  fds: number;
  lagP99: number;
}

async function sample(server: Server): Promise<Sample> {
  const families = parsePrometheusText(await (await fetch(`${server.url}/metrics`, { headers: auth })).text());
  return { rss: rssMb(server.pid), fds: openFds(server.pid), lagP99: sumOf(families, 'nodejs_eventloop_lag_p99_seconds') * 1000 };
}

const outcomes: Record<string, Record<string, number>> = { gridsim: {}, shell: {} };
/** the shell episodes whose golden solution scored below the maximum: which task, and how it ended */
const belowMax: { task: string; ended: string }[] = [];
const count = (family: string, k: string) => (outcomes[family]![k] = (outcomes[family]![k] ?? 0) + 1);

type Kind = 'played' | 'dropped_mid_reset' | 'dropped_mid_step' | 'env_crash';
function pickKind(): Kind {
  const r = random();
  if (r < DROP_SHARE / 2) return 'dropped_mid_reset';
  if (r < DROP_SHARE) return 'dropped_mid_step';
  if (r < DROP_SHARE + CRASH_SHARE) return 'env_crash';
  return 'played';
}

async function killEnvOf(c: WsClient, server: Server): Promise<void> {
  const st = await c.state();
  const id = st.data?.episode_id as string | undefined;
  if (!id) throw new Error(`no episode id in ${JSON.stringify(st).slice(0, 200)}`);
  // the env's resources carry its env id: the episode's own, or a pooled env's pool-… (the console says which)
  const res = await fetch(`${server.url}/console/episodes/${id}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  const envId = res.ok ? ((await res.json()) as { env_id?: string | null }).env_id : null;
  if (!envId) throw new Error(`the console names no env for episode ${id} (${res.status})`);
  const ids = await sh('docker', ['ps', '-q', '--filter', `label=${LABELS.instance}=${server.instance}`, '--filter', `label=${LABELS.episode}=${envId}`]);
  if (!ids) throw new Error(`no container for episode ${id} (env ${envId})`);
  await sh('docker', ['kill', ...ids.split('\n')]);
}

const IDLE_SCHEDULE = Array.from({ length: 24 }, () => 0);

async function gridsimEpisode(server: Server, taskIds: string[], i: number): Promise<void> {
  const kind = pickKind();
  const task_id = taskIds[i % taskIds.length]!;
  const c = await WsClient.open(server.url, TOKEN);
  try {
    if (kind === 'dropped_mid_reset') {
      c.sendRaw(JSON.stringify({ type: 'reset', data: { task_id } }));
      await new Promise((res) => setTimeout(res, random() * 400));
      c.terminate();
      return void count('gridsim', kind);
    }
    const reset = await c.reset({ task_id });
    if (reset.type !== 'observation') return void count('gridsim', `reset_${reset.data?.code ?? 'error'}`);
    const situation = await c.call('get_situation', {});
    if (situation.type !== 'observation' || situation.data.done) return void count('gridsim', 'step_unexpected');
    if (kind === 'dropped_mid_step') {
      c.sendRaw(JSON.stringify({ type: 'step', data: { type: 'call_tool', tool_name: 'check_schedule', arguments: { schedule: IDLE_SCHEDULE } } }));
      await new Promise((res) => setTimeout(res, random() * 50));
      c.terminate();
      return void count('gridsim', kind);
    }
    if (kind === 'env_crash') {
      await killEnvOf(c, server);
      const out = await c.call('check_schedule', { schedule: IDLE_SCHEDULE });
      const reason = out.data?.observation?.end_reason ?? out.data?.code;
      return void count('gridsim', out.data?.done && reason === 'env_failed' ? 'env_crash' : `crash_unexpected_${reason}`);
    }
    await c.call('check_schedule', { schedule: IDLE_SCHEDULE });
    const end = await c.call('submit_schedule', { schedule: IDLE_SCHEDULE });
    count('gridsim', end.data?.done ? 'played' : 'end_unexpected');
  } finally {
    await c.close().catch(() => undefined);
  }
}

interface ShellTask {
  task_id: string;
  golden: { tool: string; arguments?: unknown }[];
}

async function shellEpisode(server: Server, tasks: ShellTask[], i: number): Promise<void> {
  const kind = pickKind();
  const task = tasks[i % tasks.length]!;
  const c = await WsClient.open(server.url, TOKEN);
  try {
    if (kind === 'dropped_mid_reset') {
      c.sendRaw(JSON.stringify({ type: 'reset', data: { task_id: task.task_id } }));
      await new Promise((res) => setTimeout(res, random() * 600));
      c.terminate();
      return void count('shell', kind);
    }
    const reset = await c.reset({ task_id: task.task_id });
    if (reset.type !== 'observation') return void count('shell', `reset_${reset.data?.code ?? 'error'}`);
    if (kind === 'dropped_mid_step') {
      c.sendRaw(JSON.stringify({ type: 'step', data: { type: 'call_tool', tool_name: 'bash', arguments: { command: 'sleep 5' } } }));
      await new Promise((res) => setTimeout(res, random() * 200));
      c.terminate();
      return void count('shell', kind);
    }
    if (kind === 'env_crash') {
      await killEnvOf(c, server);
      const out = await c.call('bash', { command: 'echo still here' });
      const reason = out.data?.observation?.end_reason ?? out.data?.code;
      return void count('shell', out.data?.done && reason === 'env_failed' ? 'env_crash' : `crash_unexpected_${reason}`);
    }
    let last: Awaited<ReturnType<WsClient['call']>> = null;
    for (const step of task.golden) {
      last = await c.call(step.tool, step.arguments ?? {});
      if (last.type !== 'observation') return void count('shell', `step_${last.data?.code ?? 'error'}`);
      if (last.data.done) break;
    }
    const scored = last?.data?.done ? (last.data.reward >= 1 ? 'played' : 'played_below_max') : 'end_unexpected';
    if (scored !== 'played') belowMax.push({ task: task.task_id, ended: JSON.stringify(last?.data ?? null).slice(0, 1500) });
    count('shell', scored);
  } finally {
    await c.close().catch(() => undefined);
  }
}

function readJsonl<T>(path: string): T[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as T);
}

async function waitIdle(server: Server): Promise<{ slots: number; waiting: number }> {
  let slots = -1;
  let waiting = -1;
  for (let until = Date.now() + 120_000; Date.now() < until;) {
    const eps = (await (await fetch(`${server.url}/episodes`, { headers: auth })).json()) as { active: unknown[]; waiting: number };
    slots = eps.active.length;
    waiting = eps.waiting;
    const engine = await leftOnEngine(server.instance);
    // a warm pool's envs stay deployed while the server lives: only the active episodes count here
    if (slots === 0 && waiting === 0 && (server.name !== 'shell' || engine.containers === 0)) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  return { slots, waiting };
}

function recordedLines(name: string): number {
  const dir = join(WORK, `record-${name}`);
  return readdirSync(dir).reduce((n, f) => n + lines(readFileSync(join(dir, f), 'utf8').trim()), 0);
}

async function main(): Promise<void> {
  const shellEpisodes = Math.round(EPISODES * SHELL_SHARE);
  const gridEpisodes = EPISODES - shellEpisodes;
  console.log(
    `soak: ${EPISODES} episodes (${gridEpisodes} GridSim, ${shellEpisodes} shell), ${CONCURRENCY} at a time per server, drops ${DROP_SHARE}, crashes ${CRASH_SHARE}, warm pool ${values['warm-pool']}, seed ${values.seed}`,
  );
  const harbor = join(WORK, 'harbor-v1');
  // the shipped dataset, or a synthetic one of --synthetic tasks with an image each (built FROM the local base)
  const source = SYNTHETIC > 0 ? join(WORK, 'synthetic') : join(ROOT, 'datasets/openenv-harbor-v1');
  if (SYNTHETIC > 0) await writeSyntheticDataset({ count: SYNTHETIC, out: source, base: values['debian-image'], seed: Number(values.seed) });
  const bundleName = SYNTHETIC > 0 ? `soak-synthetic-${SYNTHETIC}-${values.seed}` : 'harbor-v1';
  await sh(process.execPath, [
    CLI,
    'import',
    'harbor',
    source,
    '--out',
    harbor,
    '--name',
    bundleName,
    ...(SYNTHETIC > 0 ? [] : ['--base-image', `debian:bookworm=${values['debian-image']}`]),
  ]);
  const shellTasks = readJsonl<ShellTask>(join(harbor, 'tasks/train.jsonl'));
  const gridTasks = readJsonl<{ task_id: string }>(join(ROOT, 'bundles/gridsim-v1/tasks/train.jsonl'))
    .slice(0, 200)
    .map((t) => t.task_id);

  const t0 = Date.now();
  const servers = await Promise.all([
    startServer('gridsim', join(ROOT, 'bundles/gridsim-v1'), ['--warm-pool', values['warm-pool'], '--build-arg', `NODE_IMAGE=${values['node-image']}`]),
    startServer('shell', harbor, []),
  ]);
  const [grid, shell] = servers as [Server, Server];
  console.log(`servers up in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  const streams = servers.map(openConsoleStream);
  const start = await Promise.all(servers.map(sample));
  const samples: Sample[][] = servers.map(() => []);
  const middle: Sample[] = [];
  const sampler = setInterval(() => {
    void Promise.all(servers.map(sample)).then(
      (s) => s.forEach((x, k) => samples[k]!.push(x)),
      () => undefined,
    );
  }, 5000);

  const t1 = Date.now();
  let done = 0;
  let failed = 0;
  const work = [
    ...Array.from({ length: gridEpisodes }, (_, i) => () => gridsimEpisode(grid, gridTasks, i)),
    ...Array.from({ length: shellEpisodes }, (_, i) => () => shellEpisode(shell, shellTasks, i)),
  ];
  // interleaved, so both servers are busy all along: every (1/SHELL_SHARE)th slot is a shell episode
  const order = work
    .map((_, k) => k)
    .sort(
      (a, b) =>
        (a < gridEpisodes ? a / gridEpisodes : (a - gridEpisodes) / Math.max(1, shellEpisodes)) -
        (b < gridEpisodes ? b / gridEpisodes : (b - gridEpisodes) / Math.max(1, shellEpisodes)),
    );
  await forEachAtMost(order, CONCURRENCY * 2, async (k) => {
    await work[k]!().catch((e: Error) => {
      failed++;
      if (failed <= 5) console.log(`episode ${k}: ${e.message}`);
    });
    done++;
    if (done === Math.floor(EPISODES / 2)) middle.push(...(await Promise.all(servers.map(sample))));
    if (done % 100 === 0)
      console.log(
        `  ${done}/${EPISODES} episodes, ${((Date.now() - t1) / 1000).toFixed(0)} s, RSS ${servers.map((s) => `${s.name} ${rssMb(s.pid)} MB`).join(', ')}`,
      );
  });
  const playWall = (Date.now() - t1) / 1000;
  const idle = await Promise.all(servers.map(waitIdle));
  clearInterval(sampler);
  const end = await Promise.all(servers.map(sample));
  const lag = samples.map((s) => Math.max(...s.map((x) => x.lagP99)));
  const fdsMax = samples.map((s) => Math.max(...s.map((x) => x.fds)));
  const streamLines = streams.map((s) => s.lines());
  const streamBroke = streams.map((s) => s.broke());
  streams.forEach((s) => s.close());
  const recorded = servers.map((s) => recordedLines(s.name));
  const whileUp = await Promise.all(servers.map((s) => leftOnEngine(s.instance)));
  const codes = await Promise.all(servers.map((s) => s.stop()));
  const afterStop = await Promise.all(servers.map((s) => leftOnEngine(s.instance)));

  console.log('');
  console.log(`episodes: ${done} in ${playWall.toFixed(0)} s (${(done / playWall).toFixed(2)}/s); client-side failures ${failed}`);
  let bad = failed > 0;
  servers.forEach((s, k) => {
    const rssBound = end[k]!.rss <= 1.2 * middle[k]!.rss;
    const left = afterStop[k]!;
    const leaked = idle[k]!.slots !== 0 || idle[k]!.waiting !== 0 || left.containers + left.networks + left.volumes !== 0;
    if (!rssBound || leaked || streamBroke[k]) bad = true;
    console.log(`[${s.name}] outcomes ${JSON.stringify(outcomes[s.name])}`);
    console.log(
      `[${s.name}] RSS start ${start[k]!.rss} MB, middle ${middle[k]!.rss} MB, end ${end[k]!.rss} MB (end/middle ${(end[k]!.rss / middle[k]!.rss).toFixed(2)}, bound 1.2: ${rssBound ? 'met' : 'MISSED'})`,
    );
    console.log(
      `[${s.name}] open fds start ${start[k]!.fds}, end ${end[k]!.fds}, at most ${fdsMax[k]}; event-loop lag p99 at most ${lag[k]!.toFixed(1)} ms over ${samples[k]!.length} samples`,
    );
    console.log(
      `[${s.name}] console stream: ${streamLines[k]} lines, ${streamBroke[k] ? `BROKE: ${streamBroke[k]}` : 'open throughout'}; --record: ${recorded[k]} episodes recorded`,
    );
    console.log(
      `[${s.name}] after the clients: ${idle[k]!.slots} episodes listed, ${idle[k]!.waiting} waiting; on the engine while up ${JSON.stringify(whileUp[k])}`,
    );
    console.log(`[${s.name}] after SIGTERM (exit ${codes[k]}): ${JSON.stringify(left)}; error lines ${s.errors()}`);
  });
  for (const b of belowMax) console.log(`[shell] golden below the maximum: ${b.task}: ${b.ended}`);
  if (SYNTHETIC > 0) {
    // the synthetic dataset's images are the soak's own: nothing else builds them
    const images = (await sh('docker', ['images', '-q', '--filter', `label=${LABELS.bundle}=${bundleName}`])).split('\n').filter(Boolean);
    if (images.length) await sh('docker', ['rmi', '-f', ...new Set(images)]);
    console.log(`[shell] removed the synthetic dataset's ${new Set(images).size} image(s)`);
  }
  rmSync(WORK, { recursive: true, force: true });
  if (bad) process.exitCode = 1;
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
