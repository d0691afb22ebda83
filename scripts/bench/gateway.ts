/**
 * The bench's gateway phase: the model gateway's overhead per call, the same calls to the same
 * upstream directly and through an episode's door, in the same run (no Docker needed).
 *
 *   1. sequential: `calls` pairs, one call at a time, direct and gateway alternating (their order
 *      flips every pair, so drift hits both alike), for a whole reply (~500 bytes) and a streamed
 *      one (`chunks` events; time to the last byte and to the first);
 *   2. concurrent: `concurrency` harnesses at once, `perWorker` calls each, direct then gateway then
 *      again both, on as many episodes' doors (as that many harness episodes would be).
 *
 * The upstream runs in a process of its own (gateway-upstream.mjs); the client and the gateway
 * share the bench's, as the server and a harness would not, so the figures are an upper bound of
 * what the gateway adds.
 */
import { spawn } from 'node:child_process';
import { Agent, request } from 'node:http';
import { fileURLToPath } from 'node:url';
import { ModelGateway, type Issued } from '../../src/gateway/index.js';
import type { BenchContext } from './context.js';
import { percentile } from './stats.js';

export interface GatewayLoad {
  calls: number;
  chunks: number;
  concurrency: number;
  perWorker: number;
}

interface Timing {
  totalMs: number;
  firstByteMs: number;
}

export interface GatewayRow {
  phase: string;
  reply: 'whole' | 'stream';
  measure: 'total' | 'first_byte';
  direct: { p50: number; p95: number };
  gateway: { p50: number; p95: number };
  added_ms: { p50: number; p95: number };
  ratio: { p50: number; p95: number };
  calls_per_s?: { direct: number; gateway: number };
}

export interface GatewayFigures {
  load: GatewayLoad;
  /** calls the gateway recorded (every gateway call, warm-up included) */
  records: number;
  rows: GatewayRow[];
}

const UPSTREAM = fileURLToPath(new URL('./gateway-upstream.mjs', import.meta.url));
const r3 = (x: number) => Number(x.toFixed(3));

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

interface Path {
  name: 'direct' | 'gateway';
  base: string;
  key: string;
}

/** one chat call, read to its last byte */
function chatCall(agent: Agent, p: Path, stream: boolean): Promise<Timing> {
  const u = new URL(`${p.base}/chat/completions`);
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
        headers: { authorization: `Bearer ${p.key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
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

function row(phase: string, reply: 'whole' | 'stream', measure: 'total' | 'first_byte', d: Timing[], g: Timing[]): GatewayRow {
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

export async function gatewayPhase(ctx: BenchContext, load: GatewayLoad): Promise<GatewayFigures> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1024 });
  const child = spawn(process.execPath, [UPSTREAM], { env: { ...process.env, STREAM_CHUNKS: String(load.chunks) }, stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.once('data', (c: Buffer) => resolve(Number(c.toString().trim())));
    child.once('exit', (code) => reject(new Error(`the gateway bench's upstream exited (${code})`)));
  });
  let records = 0;
  const upstream = `http://127.0.0.1:${port}/v1`;
  const gw = new ModelGateway({ defaultUpstream: { base_url: upstream }, observer: { call: () => records++ }, limits: { port: 0 } });
  try {
    const doors: Issued[] = [];
    for (let i = 0; i < load.concurrency; i++) doors.push(await gw.issue(`bench-${i}`, { door: { address: '127.0.0.1', subnet: '127.0.0.0/8' } }));
    const direct: Path = { name: 'direct', base: upstream, key: 'none' };
    const gateways = doors.map((x): Path => ({ name: 'gateway', base: x.env.OPENAI_BASE_URL, key: x.credential }));
    const rows: GatewayRow[] = [];
    ctx.progress('gateway: warming up');
    for (let i = 0; i < 200; i++) for (const s of [false, true]) for (const p of [direct, gateways[0]!]) await chatCall(agent, p, s);
    for (const reply of ['whole', 'stream'] as const) {
      ctx.progress(`gateway: sequential, ${reply}: ${load.calls} pairs`);
      const d: Timing[] = [];
      const g: Timing[] = [];
      for (let i = 0; i < load.calls; i++) {
        const order = i % 2 === 0 ? [direct, gateways[0]!] : [gateways[0]!, direct];
        for (const p of order) (p.name === 'direct' ? d : g).push(await chatCall(agent, p, reply === 'stream'));
      }
      rows.push(row('sequential', reply, 'total', d, g));
      if (reply === 'stream') rows.push(row('sequential', reply, 'first_byte', d, g));
    }
    /** each path a worker, `perWorker` calls each, all at once */
    const concurrent = async (paths: Path[], stream: boolean) => {
      const timings: Timing[] = [];
      const t0 = performance.now();
      await Promise.all(
        paths.map(async (p) => {
          for (let i = 0; i < load.perWorker; i++) timings.push(await chatCall(agent, p, stream));
        }),
      );
      return { timings, seconds: (performance.now() - t0) / 1000 };
    };
    for (const reply of ['whole', 'stream'] as const) {
      ctx.progress(`gateway: concurrent, ${reply}: ${load.concurrency} x ${load.perWorker}, twice each`);
      const d: Timing[] = [];
      const g: Timing[] = [];
      let ds = 0;
      let gs = 0;
      for (let round = 0; round < 2; round++) {
        const a = await concurrent(
          gateways.map(() => direct),
          reply === 'stream',
        );
        d.push(...a.timings);
        ds += a.seconds;
        const b = await concurrent(gateways, reply === 'stream');
        g.push(...b.timings);
        gs += b.seconds;
      }
      const r = row(`concurrent ${load.concurrency}`, reply, 'total', d, g);
      r.calls_per_s = { direct: Math.round(d.length / ds), gateway: Math.round(g.length / gs) };
      rows.push(r);
    }
    return { load, records, rows };
  } finally {
    await gw.close();
    agent.destroy();
    child.kill('SIGTERM');
  }
}

export function printGateway(f: GatewayFigures): void {
  console.log('');
  console.log(`Model gateway: the same calls directly and through an episode's door (ms; ${f.records} calls recorded by the gateway)`);
  console.log('| calls | reply | measure | direct p50 / p95 | gateway p50 / p95 | added p50 / p95 | ratio p50 / p95 | calls/s direct / gateway |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const x of f.rows)
    console.log(
      `| ${x.phase} | ${x.reply} | ${x.measure} | ${x.direct.p50} / ${x.direct.p95} | ${x.gateway.p50} / ${x.gateway.p95} | ${x.added_ms.p50} / ${x.added_ms.p95} | ${x.ratio.p50} / ${x.ratio.p95} | ${x.calls_per_s ? `${x.calls_per_s.direct} / ${x.calls_per_s.gateway}` : ''} |`,
    );
}
