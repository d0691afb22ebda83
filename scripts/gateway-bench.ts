/**
 * The model gateway's overhead per call: the same calls to the same upstream, directly and
 * through an episode's door, in the same run (tsx scripts/gateway-bench.ts; no Docker needed, but
 * run it on a quiet machine, under the team's Docker lock when others benchmark).
 *
 *   1. sequential: --calls (2000) pairs, one call at a time, direct and gateway alternating (their
 *      order flips every pair, so drift hits both alike), for a whole reply (~500 bytes) and a
 *      streamed one (--chunks, 64 events, time to the last byte and to the first);
 *   2. concurrent: --concurrency (32) harnesses at once, --per-worker (50) calls each, direct then
 *      gateway then again both, the 32 on 32 episodes' doors (as 32 harness episodes would be).
 *
 * The upstream runs in a process of its own (scripts/gateway-bench/upstream.mjs); the client and
 * the gateway share this one, as the server and a harness would not, so the figures are an upper
 * bound of what the gateway adds. Prints a table and writes bench-results/gateway-<time>.json.
 * Targets are reported, never asserted.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { cpus } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ModelGateway, type Issued } from '../src/gateway/index.js';
import { percentile } from './bench/stats.js';

const { values } = parseArgs({
  options: {
    calls: { type: 'string', default: '2000' },
    chunks: { type: 'string', default: '64' },
    concurrency: { type: 'string', default: '32' },
    'per-worker': { type: 'string', default: '50' },
  },
});
const CALLS = Number(values.calls);
const CONCURRENCY = Number(values.concurrency);
const PER_WORKER = Number(values['per-worker']);
const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');

interface Timing {
  totalMs: number;
  firstByteMs: number;
}

const agent = new Agent({ keepAlive: true, maxSockets: 1024 });
const body = (stream: boolean) =>
  JSON.stringify({
    model: 'bench',
    stream,
    messages: [
      { role: 'system', content: 'x'.repeat(400) },
      { role: 'user', content: 'y'.repeat(600) },
    ],
  });
const BODIES = { whole: body(false), stream: body(true) };

/** one chat call, read to its last byte */
function chatCall(base: string, key: string, stream: boolean): Promise<Timing> {
  const u = new URL(`${base}/chat/completions`);
  const payload = stream ? BODIES.stream : BODIES.whole;
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        agent,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
      },
      (res) => {
        let first = 0;
        res.on('data', () => {
          if (!first) first = performance.now();
        });
        res.on('end', () => {
          if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode}`));
          else resolve({ totalMs: performance.now() - t0, firstByteMs: first - t0 });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

interface Path {
  name: 'direct' | 'gateway';
  base: string;
  key: string;
}

interface Row {
  phase: string;
  reply: 'whole' | 'stream';
  measure: 'total' | 'first_byte';
  direct: { p50: number; p95: number };
  gateway: { p50: number; p95: number };
  added_ms: { p50: number; p95: number };
  ratio: { p50: number; p95: number };
  calls_per_s?: { direct: number; gateway: number };
}

const r3 = (x: number) => Number(x.toFixed(3));

function row(phase: string, reply: 'whole' | 'stream', measure: 'total' | 'first_byte', d: Timing[], g: Timing[]): Row {
  const pick = (t: Timing) => (measure === 'total' ? t.totalMs : t.firstByteMs);
  const q = (ts: Timing[]) => ({ p50: r3(percentile(ts.map(pick), 50)), p95: r3(percentile(ts.map(pick), 95)) });
  const dq = q(d);
  const gq = q(g);
  return {
    phase,
    reply,
    measure,
    direct: dq,
    gateway: gq,
    added_ms: { p50: r3(gq.p50 - dq.p50), p95: r3(gq.p95 - dq.p95) },
    ratio: { p50: r3(gq.p50 / dq.p50), p95: r3(gq.p95 / dq.p95) },
  };
}

async function sequential(direct: Path, gateway: Path, stream: boolean): Promise<{ d: Timing[]; g: Timing[] }> {
  const d: Timing[] = [];
  const g: Timing[] = [];
  for (let i = 0; i < CALLS; i++) {
    const order = i % 2 === 0 ? [direct, gateway] : [gateway, direct];
    for (const p of order) (p.name === 'direct' ? d : g).push(await chatCall(p.base, p.key, stream));
  }
  return { d, g };
}

/** CONCURRENCY workers at once, each PER_WORKER calls on its own path (its own door for the gateway) */
async function concurrent(paths: Path[], stream: boolean): Promise<{ timings: Timing[]; seconds: number }> {
  const timings: Timing[] = [];
  const t0 = performance.now();
  await Promise.all(
    paths.map(async (p) => {
      for (let i = 0; i < PER_WORKER; i++) timings.push(await chatCall(p.base, p.key, stream));
    }),
  );
  return { timings, seconds: (performance.now() - t0) / 1000 };
}

async function main(): Promise<void> {
  const child = spawn(process.execPath, [path.join(ROOT, 'scripts/gateway-bench/upstream.mjs')], {
    env: { ...process.env, STREAM_CHUNKS: values.chunks },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.once('data', (c: Buffer) => resolve(Number(c.toString().trim())));
    child.once('exit', (code) => reject(new Error(`the upstream exited (${code})`)));
  });
  let records = 0;
  const gw = new ModelGateway({ defaultUpstream: { base_url: `http://127.0.0.1:${port}/v1` }, observer: { call: () => records++ }, limits: { port: 0 } });
  try {
    const upstream = `http://127.0.0.1:${port}/v1`;
    const doors: Issued[] = [];
    for (let i = 0; i < CONCURRENCY; i++) doors.push(await gw.issue(`bench-${i}`, { door: { address: '127.0.0.1', subnet: '127.0.0.0/8' } }));
    const direct: Path = { name: 'direct', base: upstream, key: 'none' };
    const gateway: Path = { name: 'gateway', base: doors[0]!.env.OPENAI_BASE_URL, key: doors[0]!.credential };
    const rows: Row[] = [];
    process.stderr.write(`warming up\n`);
    for (let i = 0; i < 200; i++) for (const s of [false, true]) for (const p of [direct, gateway]) await chatCall(p.base, p.key, s);
    for (const reply of ['whole', 'stream'] as const) {
      process.stderr.write(`sequential, ${reply}: ${CALLS} pairs\n`);
      const { d, g } = await sequential(direct, gateway, reply === 'stream');
      rows.push(row('sequential', reply, 'total', d, g));
      if (reply === 'stream') rows.push(row('sequential', reply, 'first_byte', d, g));
    }
    for (const reply of ['whole', 'stream'] as const) {
      process.stderr.write(`concurrent, ${reply}: ${CONCURRENCY} x ${PER_WORKER}, twice each\n`);
      const d: Timing[] = [];
      const g: Timing[] = [];
      let ds = 0;
      let gs = 0;
      const directs = Array.from({ length: CONCURRENCY }, () => direct);
      const gateways = doors.map((x): Path => ({ name: 'gateway', base: x.env.OPENAI_BASE_URL, key: x.credential }));
      for (let round = 0; round < 2; round++) {
        const a = await concurrent(directs, reply === 'stream');
        d.push(...a.timings);
        ds += a.seconds;
        const b = await concurrent(gateways, reply === 'stream');
        g.push(...b.timings);
        gs += b.seconds;
      }
      const r = row(`concurrent ${CONCURRENCY}`, reply, 'total', d, g);
      r.calls_per_s = { direct: Math.round(d.length / ds), gateway: Math.round(g.length / gs) };
      rows.push(r);
    }
    const result = {
      at: new Date().toISOString(),
      cpus: cpus().length,
      node: process.version,
      calls: CALLS,
      chunks: Number(values.chunks),
      concurrency: CONCURRENCY,
      per_worker: PER_WORKER,
      records,
      rows,
    };
    console.log('\nphase            reply   measure      direct p50/p95 ms   gateway p50/p95 ms   added p50/p95 ms   ratio p50/p95   calls/s d/g');
    for (const x of rows) {
      console.log(
        [
          x.phase.padEnd(16),
          x.reply.padEnd(7),
          x.measure.padEnd(12),
          `${x.direct.p50} / ${x.direct.p95}`.padEnd(19),
          `${x.gateway.p50} / ${x.gateway.p95}`.padEnd(20),
          `${x.added_ms.p50} / ${x.added_ms.p95}`.padEnd(18),
          `${x.ratio.p50} / ${x.ratio.p95}`.padEnd(15),
          x.calls_per_s ? `${x.calls_per_s.direct} / ${x.calls_per_s.gateway}` : '',
        ].join(' '),
      );
    }
    mkdirSync(path.join(ROOT, 'bench-results'), { recursive: true });
    const file = path.join(ROOT, 'bench-results', `gateway-${result.at.replace(/[:.]/g, '-')}.json`);
    writeFileSync(file, JSON.stringify(result, null, 2));
    console.log(`\nwrote ${path.relative(process.cwd(), file)}`);
  } finally {
    await gw.close();
    agent.destroy();
    child.kill('SIGTERM');
  }
}

await main();
