/**
 * `npm run bench`: figures measured in one run on the fixture env, each against a baseline taken
 * in the same run on the same engine:
 *   - reset latency (connect → reset observation) p50/p95 vs a bare `docker run` + readiness;
 *   - step round trip p50 through the server vs a direct HTTP call to the env;
 *   - wall time of 32 concurrent full episodes with --max-concurrent-envs 8.
 * Needs a Docker engine and the offline base image (docker/make-local-node-base.sh).
 * Options: --resets N (20), --steps N (200), --episodes N (32), --concurrency N (8).
 */
import { execFile, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { WsClient } from '../test/support/ws-client.js';

const { values } = parseArgs({
  options: {
    resets: { type: 'string', default: '20' },
    steps: { type: 'string', default: '200' },
    episodes: { type: 'string', default: '32' },
    concurrency: { type: 'string', default: '8' },
    'node-image': { type: 'string', default: process.env.OPENENV_TEST_NODE_IMAGE ?? 'openenv-local/node:20' },
  },
});
const RESETS = Number(values.resets);
const STEPS = Number(values.steps);
const EPISODES = Number(values.episodes);
const CONCURRENCY = Number(values.concurrency);
const BUNDLE = fileURLToPath(new URL('../test/fixtures/fixture-v1', import.meta.url));
const SERVE = fileURLToPath(new URL('../dist/serve.js', import.meta.url));
const INSTANCE = `bench-${process.pid}`;

function sh(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => execFile(cmd, args, (err, out, errOut) => (err ? reject(new Error(`${cmd} ${args.join(' ')}: ${errOut || err.message}`)) : resolve(out.trim()))));
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

const ms = (x: number) => `${x.toFixed(1)} ms`;

async function waitReady(url: string, deadline: number): Promise<void> {
  while (Date.now() < deadline) {
    try {
      const r = await fetch(url, { signal: AbortSignal.timeout(1000) });
      if (r.ok) return;
    } catch {
      // not yet
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`${url} not ready`);
}

/** the server under test, as a user runs it */
async function startServer(maxConcurrent: number): Promise<{ url: string; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, [SERVE, BUNDLE, '--port', '0', '--instance', INSTANCE, '--max-concurrent-envs', String(maxConcurrent), '--build-arg', `NODE_IMAGE=${values['node-image']}`, '--ping-interval', '0', '--max-steps', String(STEPS + 10)], {
    env: { ...process.env, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  // at warn level the address line is not logged: ask the OS which port the child listens on
  let out = '';
  child.stdout!.on('data', (d) => (out += d.toString()));
  const until = Date.now() + 120_000;
  let url: string | null = null;
  while (!url && Date.now() < until) {
    const ss = await sh('ss', ['-ltnpH']).catch(() => '');
    const line = ss.split('\n').find((l) => l.includes(`pid=${child.pid},`));
    const port = line?.match(/127\.0\.0\.1:(\d+)/)?.[1];
    if (port) {
      const candidate = `http://127.0.0.1:${port}`;
      const h = await fetch(`${candidate}/health`).then((r) => r.ok, () => false);
      if (h) url = candidate;
    }
    if (!url) await new Promise((r) => setTimeout(r, 200));
  }
  if (!url) throw new Error(`server did not come up: ${out}`);
  return {
    url,
    stop: () =>
      new Promise((resolve) => {
        child.on('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

async function imageTag(url: string): Promise<string> {
  void url;
  const tags = (await sh('docker', ['images', '--format', '{{.Repository}}:{{.Tag}} {{.CreatedAt}}', 'openenv-bundle/fixture-v1-echo'])).split('\n');
  return tags[0]!.split(' ')[0]!;
}

async function main(): Promise<void> {
  console.log(`bench: fixture env, ${RESETS} resets, ${STEPS} steps, ${EPISODES} episodes at --max-concurrent-envs ${CONCURRENCY}`);
  const server = await startServer(CONCURRENCY);
  try {
    const image = await imageTag(server.url);

    // 1. reset latency through the server
    const resetMs: number[] = [];
    for (let i = 0; i < RESETS; i++) {
      const t0 = performance.now();
      const c = await WsClient.open(server.url);
      const r = await c.reset({ task_id: 'fx-echo-0' });
      resetMs.push(performance.now() - t0);
      if (r.type !== 'observation') throw new Error(JSON.stringify(r));
      await c.close();
    }
    // baseline: a bare `docker run` of the same image and readiness on its address
    const bareMs: number[] = [];
    for (let i = 0; i < RESETS; i++) {
      const t0 = performance.now();
      const id = await sh('docker', ['run', '-d', '-e', 'PORT=8000', '--label', `bench=${INSTANCE}`, image]);
      const ip = await sh('docker', ['inspect', '-f', '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}', id]);
      await waitReady(`http://${ip}:8000/health`, Date.now() + 30_000);
      bareMs.push(performance.now() - t0);
      await sh('docker', ['rm', '-f', id]);
    }

    // second baseline: the same, but into a fresh internal network of its own, as the server does
    const bareNetMs: number[] = [];
    for (let i = 0; i < RESETS; i++) {
      const t0 = performance.now();
      const net = await sh('docker', ['network', 'create', '--internal', '--label', `bench=${INSTANCE}`, `bench-${INSTANCE}-${i}`]);
      const id = await sh('docker', ['run', '-d', '-e', 'PORT=8000', '--network', net, '--label', `bench=${INSTANCE}`, image]);
      const ip = await sh('docker', ['inspect', '-f', '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}', id]);
      await waitReady(`http://${ip}:8000/health`, Date.now() + 30_000);
      bareNetMs.push(performance.now() - t0);
      await sh('docker', ['rm', '-f', id]);
      await sh('docker', ['network', 'rm', net]);
    }

    // 2. step round trip: through the server vs straight to an env
    const c = await WsClient.open(server.url);
    await c.reset({ task_id: 'fx-echo-0' });
    const stepMs: number[] = [];
    for (let i = 0; i < STEPS; i++) {
      const t0 = performance.now();
      const r = await c.call('echo', { text: 'x' });
      stepMs.push(performance.now() - t0);
      if (r.data?.observation?.result?.content?.[0]?.text !== 'x') throw new Error(`unexpected step reply ${JSON.stringify(r)}`);
    }
    await c.close();
    const id = await sh('docker', ['run', '-d', '-e', 'PORT=8000', '--label', `bench=${INSTANCE}`, image]);
    const ip = await sh('docker', ['inspect', '-f', '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}', id]);
    const env = `http://${ip}:8000`;
    await waitReady(`${env}/health`, Date.now() + 30_000);
    await fetch(`${env}/reset`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ task_id: 'fx-echo-0', data: { finish_score: 0.5 }, seed: null }) });
    const directMs: number[] = [];
    for (let i = 0; i < STEPS; i++) {
      const t0 = performance.now();
      const r = await fetch(`${env}/tools/call`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'echo', arguments: { text: 'x' } }) });
      await r.json();
      directMs.push(performance.now() - t0);
    }
    await sh('docker', ['rm', '-f', id]);

    // 3. concurrent full episodes
    const t0 = performance.now();
    const waits: number[] = [];
    await Promise.all(
      Array.from({ length: EPISODES }, async () => {
        const k = await WsClient.open(server.url);
        const r = await k.reset({ task_id: 'fx-echo-0' }, 600_000);
        waits.push(r.data.observation.timings.queued_s);
        await k.call('echo', { text: 'hello' });
        const end = await k.call('end_turn', {});
        if (end.data.reward !== 0.5) throw new Error(`unexpected end ${JSON.stringify(end)}`);
        await k.close();
      }),
    );
    const wall = (performance.now() - t0) / 1000;

    // baseline: the same number of bare runs, as many at a time, each run → ready → one call → rm -f
    const b0 = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < EPISODES) {
          next++;
          const bid = await sh('docker', ['run', '-d', '-e', 'PORT=8000', '--label', `bench=${INSTANCE}`, image]);
          const bip = await sh('docker', ['inspect', '-f', '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}', bid]);
          await waitReady(`http://${bip}:8000/health`, Date.now() + 60_000);
          await fetch(`http://${bip}:8000/reset`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"task_id":"fx-echo-0","data":{},"seed":null}' });
          await fetch(`http://${bip}:8000/tools/call`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"echo","arguments":{"text":"hello"}}' });
          await sh('docker', ['rm', '-f', bid]);
        }
      }),
    );
    const bareWall = (performance.now() - b0) / 1000;

    const p50r = pct(resetMs, 50);
    const p50b = pct(bareMs, 50);
    console.log('');
    console.log(`reset latency (connect → observation)  p50 ${ms(p50r)}  p95 ${ms(pct(resetMs, 95))}`);
    console.log(`bare docker run + readiness            p50 ${ms(p50b)}  p95 ${ms(pct(bareMs, 95))}`);
    console.log(`  ratio (server / bare), p50           ${(p50r / p50b).toFixed(2)}x`);
    console.log(`bare network create + run + readiness  p50 ${ms(pct(bareNetMs, 50))}  p95 ${ms(pct(bareNetMs, 95))}`);
    console.log(`  ratio (server / bare with network)   ${(p50r / pct(bareNetMs, 50)).toFixed(2)}x  (what isolation costs is in the baseline here)`);
    console.log(`step round trip through the server     p50 ${ms(pct(stepMs, 50))}  p95 ${ms(pct(stepMs, 95))}`);
    console.log(`direct HTTP call to the env            p50 ${ms(pct(directMs, 50))}  p95 ${ms(pct(directMs, 95))}`);
    console.log(`  ratio (server / direct), p50         ${(pct(stepMs, 50) / pct(directMs, 50)).toFixed(2)}x`);
    console.log(`${EPISODES} full episodes, ${CONCURRENCY} at a time     wall ${wall.toFixed(2)} s  (${(wall / Math.ceil(EPISODES / CONCURRENCY)).toFixed(2)} s per wave of ${CONCURRENCY}; max queue wait ${Math.max(...waits).toFixed(2)} s)`);
    console.log(`same with bare docker run/rm, ${CONCURRENCY} at a time  wall ${bareWall.toFixed(2)} s`);
    console.log(`  ratio (server / bare)                ${(wall / bareWall).toFixed(2)}x  (the server adds a network per episode and tears both down before the slot frees)`);
  } finally {
    await server.stop();
    const left = await sh('docker', ['ps', '-aq', '--filter', `label=bench=${INSTANCE}`]).catch(() => '');
    if (left) await sh('docker', ['rm', '-f', ...left.split('\n')]);
    const nets = await sh('docker', ['network', 'ls', '-q', '--filter', `label=bench=${INSTANCE}`]).catch(() => '');
    if (nets) await sh('docker', ['network', 'rm', ...nets.split('\n')]);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
