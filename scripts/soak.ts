/**
 * `npm run soak`: many episodes against a real `node dist/serve.js` on Docker (the fixture
 * bundle), with random client drops (mid-episode, mid-step, mid-reset) and env crashes, then what
 * was left: containers and networks of its instance (should be 0), slots still held (should be 0),
 * and the server's resident memory at the start, the middle and the end. Not part of CI.
 * Needs a Docker engine and the offline base image (docker/make-local-node-base.sh).
 * Options: --episodes N (2000), --concurrency N (8), --seed N (1), --node-image REF.
 */
import { execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { lineSplitter } from '../src/lines.js';
import { LOCAL_NODE_IMAGE } from './lib/local-node-image.js';
import { parsePrometheusText, sumOf } from './lib/prom-text.js';
import { WsClient } from './lib/ws-client.js';
import { forEachAtMost } from '../src/work-pool.js';

const { values } = parseArgs({
  options: {
    episodes: { type: 'string', default: '2000' },
    concurrency: { type: 'string', default: '8' },
    seed: { type: 'string', default: '1' },
    'node-image': { type: 'string', default: LOCAL_NODE_IMAGE },
  },
});
const EPISODES = Number(values.episodes);
const CONCURRENCY = Number(values.concurrency);
const BUNDLE = fileURLToPath(new URL('../test/fixtures/fixture-v1', import.meta.url));
const SERVE = fileURLToPath(new URL('../dist/serve.js', import.meta.url));
const INSTANCE = `soak-${process.pid}`;
const TOKEN = `soak-token-${process.pid}-${Date.now()}`;
const LABEL = 'io.openenv.bundle-server.instance';

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
    execFile(cmd, args, (err, out, errOut) => (err ? reject(new Error(`${cmd} ${args.join(' ')}: ${errOut || err.message}`)) : resolve(out.trim()))),
  );
}

function rssMb(pid: number): number {
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Math.round(Number(m[1]) / 1024) : NaN;
}

async function leftOnEngine(): Promise<{ containers: number; networks: number }> {
  const c = await sh('docker', ['ps', '-aq', '--filter', `label=${LABEL}=${INSTANCE}`]);
  const n = await sh('docker', ['network', 'ls', '-q', '--filter', `label=${LABEL}=${INSTANCE}`]);
  return { containers: c ? c.split('\n').length : 0, networks: n ? n.split('\n').length : 0 };
}

async function startServer(): Promise<{ url: string; pid: number; stop: () => Promise<number | null> }> {
  const child = spawn(
    process.execPath,
    [
      SERVE,
      BUNDLE,
      '--port',
      '0',
      '--instance',
      INSTANCE,
      '--max-concurrent-envs',
      String(CONCURRENCY),
      '--build-arg',
      `NODE_IMAGE=${values['node-image']}`,
      '--ping-interval',
      '5',
      '--idle-timeout',
      '60',
      '--tool-timeout',
      '20',
    ],
    { env: { ...process.env, LOG_LEVEL: 'info', AGENTENV_TOKEN: TOKEN }, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let errors = 0;
  const url = await new Promise<string>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('the server did not start within 5 minutes')), 300_000);
    const lines = lineSplitter((line) => {
      if (line.includes('"level":50') || line.includes('"level":60')) {
        errors++;
        if (errors <= 5) console.log(`server error line: ${line.slice(0, 300)}`);
      }
      const m = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(line);
      if (m) {
        clearTimeout(t);
        resolve(m[1]!);
      }
    });
    child.stdout!.on('data', (d: Buffer) => lines.push(d));
    child.once('exit', (code) => reject(new Error(`the server exited ${code}`)));
  });
  // /health turns 200 once the env image is built
  for (let until = Date.now() + 600_000; ;) {
    if (
      await fetch(`${url}/health`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    if (Date.now() > until) throw new Error('the server never became healthy');
    await new Promise((r) => setTimeout(r, 500));
  }
  process.on('exit', () => child.kill('SIGKILL'));
  return {
    url,
    pid: child.pid!,
    stop: () =>
      new Promise((resolve) => {
        child.once('exit', (code) => {
          console.log(`server error lines (level >= 50) during the soak: ${errors}`);
          resolve(code);
        });
        child.kill('SIGTERM');
      }),
  };
}

type Kind = 'played' | 'dropped_mid_episode' | 'dropped_mid_step' | 'dropped_mid_reset' | 'env_crash';
const outcomes: Record<string, number> = {};
const count = (k: string) => (outcomes[k] = (outcomes[k] ?? 0) + 1);

async function episode(url: string, i: number): Promise<void> {
  const r = random();
  const kind: Kind = r < 0.55 ? 'played' : r < 0.67 ? 'dropped_mid_episode' : r < 0.77 ? 'dropped_mid_step' : r < 0.85 ? 'dropped_mid_reset' : 'env_crash';
  const steps = 1 + Math.floor(random() * 4);
  const c = await WsClient.open(url, TOKEN);
  try {
    if (kind === 'dropped_mid_reset') {
      c.sendRaw(JSON.stringify({ type: 'reset', data: { task_id: 'fx-echo-0' } }));
      await new Promise((res) => setTimeout(res, random() * 400));
      c.terminate();
      count(kind);
      return;
    }
    const reset = await c.reset({ task_id: `fx-echo-${i % 2}` });
    if (reset.type !== 'observation') {
      count(`reset_${reset.data?.code ?? 'error'}`);
      return;
    }
    for (let s = 0; s < steps; s++) {
      const out = await c.call('echo', { text: `soak ${i} ${s}` });
      if (out.type !== 'observation' || out.data.done) {
        count('step_unexpected');
        return;
      }
    }
    if (kind === 'dropped_mid_episode') {
      c.terminate();
    } else if (kind === 'dropped_mid_step') {
      c.sendRaw(JSON.stringify({ type: 'step', data: { type: 'call_tool', tool_name: 'sleep', arguments: { seconds: 1 } } }));
      await new Promise((res) => setTimeout(res, random() * 200));
      c.terminate();
    } else if (kind === 'env_crash') {
      const out = await c.call('crash', {});
      if (!(out.data?.done && out.data.observation?.end_reason === 'env_failed')) count('crash_unexpected');
    } else {
      const end = await c.call('end_turn', {});
      if (!end.data?.done) count('end_unexpected');
    }
    count(kind);
  } finally {
    await c.close().catch(() => undefined);
  }
}

async function main(): Promise<void> {
  console.log(`soak: ${EPISODES} episodes, ${CONCURRENCY} at a time, seed ${values.seed}, instance ${INSTANCE}`);
  const t0 = Date.now();
  const server = await startServer();
  const rss: Record<string, number> = { start: rssMb(server.pid) };
  let done = 0;
  let failed = 0;
  await forEachAtMost(
    Array.from({ length: EPISODES }, (_, i) => i),
    CONCURRENCY,
    async (i) => {
      await episode(server.url, i).catch((e: Error) => {
        failed++;
        if (failed <= 5) console.log(`episode ${i}: ${e.message}`);
      });
      done++;
      if (done === Math.floor(EPISODES / 2)) rss.middle = rssMb(server.pid);
      if (done % 100 === 0) console.log(`  ${done}/${EPISODES} episodes, ${((Date.now() - t0) / 1000).toFixed(0)} s, server RSS ${rssMb(server.pid)} MB`);
    },
  );
  // teardowns finish after their clients have gone: wait for the server to be idle
  const auth = { authorization: `Bearer ${TOKEN}` };
  let slots = -1;
  let waiting = -1;
  for (let until = Date.now() + 120_000; Date.now() < until;) {
    const eps = (await (await fetch(`${server.url}/episodes`, { headers: auth })).json()) as { active: unknown[]; waiting: number };
    slots = eps.active.length;
    waiting = eps.waiting;
    if (slots === 0 && waiting === 0 && (await leftOnEngine()).containers === 0) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  const metrics = await (await fetch(`${server.url}/metrics`, { headers: auth })).text();
  const families = parsePrometheusText(metrics);
  const gauge = (name: string) => sumOf(families, name);
  rss.end = rssMb(server.pid);
  const whileUp = await leftOnEngine();
  const code = await server.stop();
  const afterStop = await leftOnEngine();
  const wall = (Date.now() - t0) / 1000;
  console.log('');
  console.log(`episodes: ${done} in ${wall.toFixed(0)} s; outcomes ${JSON.stringify(outcomes)}; client-side failures ${failed}`);
  console.log(
    `slot leaks: ${slots} episodes still listed, ${waiting} waiting; openenv_episodes_running=${gauge('openenv_episodes_running')}, openenv_episode_networks=${gauge('openenv_episode_networks')} (after the clients were done)`,
  );
  console.log(`leaks on the engine while the server ran: containers ${whileUp.containers}, networks ${whileUp.networks}`);
  console.log(`leaks on the engine after SIGTERM (exit ${code}): containers ${afterStop.containers}, networks ${afterStop.networks}`);
  console.log(`server RSS: start ${rss.start} MB, middle ${rss.middle ?? NaN} MB, end ${rss.end} MB`);
  if (slots !== 0 || whileUp.containers !== 0 || whileUp.networks !== 0 || afterStop.containers !== 0 || afterStop.networks !== 0) process.exitCode = 1;
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
