/**
 * The bench's verify phase (--phases verify): what a verified episode's end costs, the verifier
 * and everything the server does before it, in the same run on the same engine.
 *
 *   - `in-place`: the stop (freeze, list, kill, thaw), the toolchain check (the engine's changes),
 *     the tests installed and run in the agent's container, the reward read;
 *   - `clean`: the same stop, then a fresh container of the env's image (create, start, first
 *     exec), the agent's outputs copied into it, the tests there, its removal;
 *   - `baseline` (with --verify-baseline DIR, a checkout of an earlier version, built): that
 *     version's server playing the same task in place, its own way.
 *
 * Each sample is one episode of a task of the local Debian base whose agent leaves 8 background
 * processes and a file in its workdir (one bash call), then `end_turn`: the time of the end_turn
 * call is the sample (the verifier's own test.sh is one line). The kinds alternate, one episode
 * at a time, each server with its own instance and --max-concurrent-envs 1.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { WsClient } from '../lib/ws-client.js';
import type { BenchContext } from './context.js';
import { startServer, type BenchServer } from './server.js';
import { pair as pairOf, percentile, round, type Pair } from './stats.js';

export interface VerifyLoad {
  episodes: number;
  debianImage: string;
  /** a built checkout of an earlier version: its dist/serve.js plays the in-place task as it did */
  baseline: string | null;
}

export interface VerifyFigures {
  episodes: number;
  in_place: Pair;
  clean: Pair;
  /** the earlier version's in-place end, when --verify-baseline named one */
  baseline: Pair | null;
  clean_over_in_place_p50: number;
  in_place_over_baseline_p50: number | null;
}

const pair = (xs: number[]): Pair => pairOf(xs, 1);

const AGENT = 'for i in 1 2 3 4 5 6 7 8; do sleep 1000 & done; echo 42 > /app/answer.txt';
const TEST = 'if [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n';

/** a bundle of the task in place and (unless `baselineShape`) clean; the earlier version knows no `mode` */
function writeBundle(dir: string, image: string, baselineShape: boolean): void {
  const row = (id: string, mode?: string) => ({
    task_id: id,
    toolset: 'shell',
    env: 'box',
    system_prompt: 'Bench.',
    turns: ['Write 42 to /app/answer.txt.'],
    verifier: { tests: 'verifiers/answer', timeout_s: 60, ...(mode ? { mode } : {}) },
  });
  const files: Record<string, string> = {
    'bundle.json': JSON.stringify({
      name: baselineShape ? 'bench-verify-baseline' : 'bench-verify',
      version: '1.0.0',
      description: 'The cost of a verified episode end.',
      default_split: 'train',
      splits: { train: 'tasks/train.jsonl' },
      envs: { box: { kind: 'shell', image, workdir: '/app' } },
      toolsets: { shell: { builtin: ['shell'] } },
      reward: 'mean',
      scores: { reward: { min: 0, max: 1 } },
    }),
    'tasks/train.jsonl': (baselineShape ? [row('in-place')] : [row('in-place'), row('clean', 'clean')]).map((r) => JSON.stringify(r)).join('\n') + '\n',
    'verifiers/answer/test.sh': TEST,
  };
  for (const [rel, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    writeFileSync(path.join(dir, rel), content);
  }
}

/** one episode: the agent's call, then end_turn; the milliseconds end_turn took (its reward must be 1) */
async function verifiedEnd(s: BenchServer, task: string): Promise<number> {
  const client = await WsClient.open(`${s.url.replace(/^http/, 'ws')}/ws`);
  try {
    const reset = await client.reset({ task_id: task }, 300_000);
    if (reset.type !== 'observation') throw new Error(`reset of ${task}: ${JSON.stringify(reset).slice(0, 300)}`);
    const made = await client.call('bash', { command: AGENT });
    if (made.type !== 'observation' || made.data.done) throw new Error(`the agent's call: ${JSON.stringify(made).slice(0, 300)}`);
    const started = performance.now();
    const end = await client.call('end_turn', {});
    const ms = performance.now() - started;
    if (end.type !== 'observation' || end.data.reward !== 1) throw new Error(`${task} ended without reward 1: ${JSON.stringify(end).slice(0, 500)}`);
    return ms;
  } finally {
    await client.close().catch(() => undefined);
  }
}

export async function verifyPhase(ctx: BenchContext, load: VerifyLoad): Promise<VerifyFigures> {
  const out = mkdtempSync(path.join(tmpdir(), 'bench-verify-'));
  const servers: BenchServer[] = [];
  try {
    const bundle = path.join(out, 'now');
    writeBundle(bundle, load.debianImage, false);
    const now = await startServer(ctx, 'verify', ['--max-concurrent-envs', '1', '--network-stock', '0'], { bundle });
    servers.push(now);
    let before: BenchServer | null = null;
    if (load.baseline) {
      const old = path.join(out, 'baseline');
      writeBundle(old, load.debianImage, true);
      before = await startServer(ctx, 'verify-baseline', ['--max-concurrent-envs', '1', '--network-stock', '0'], {
        bundle: old,
        serve: path.join(load.baseline, 'dist/serve.js'),
      });
      servers.push(before);
    }
    // one of each, not timed: images, first connections
    await verifiedEnd(now, 'in-place');
    await verifiedEnd(now, 'clean');
    if (before) await verifiedEnd(before, 'in-place');
    const samples = { inPlace: [] as number[], clean: [] as number[], baseline: [] as number[] };
    for (let i = 0; i < load.episodes; i++) {
      ctx.progress(`verify: episode ${i + 1} of ${load.episodes}`);
      const order: (() => Promise<void>)[] = [
        async () => void samples.inPlace.push(await verifiedEnd(now, 'in-place')),
        async () => void samples.clean.push(await verifiedEnd(now, 'clean')),
        ...(before ? [async () => void samples.baseline.push(await verifiedEnd(before!, 'in-place'))] : []),
      ];
      // rotate which goes first
      for (let k = 0; k < order.length; k++) await order[(i + k) % order.length]!();
    }
    const p50 = (xs: number[]) => percentile(xs, 50);
    return {
      episodes: load.episodes,
      in_place: pair(samples.inPlace),
      clean: pair(samples.clean),
      baseline: before ? pair(samples.baseline) : null,
      clean_over_in_place_p50: round(p50(samples.clean) / p50(samples.inPlace)),
      in_place_over_baseline_p50: before ? round(p50(samples.inPlace) / p50(samples.baseline)) : null,
    };
  } finally {
    for (const s of servers) await s.stop().catch(() => undefined);
    rmSync(out, { recursive: true, force: true });
  }
}
