/**
 * The bench's `harness` phase: a burst of N harness episodes at once (the server runs the shipped
 * harness in each env, its two model calls going through the gateway to a scripted upstream in
 * this process), against a same-run baseline: the same burst of the same task played by the
 * client instead (the same bash call and end_turn, stepped over /ws). Both on a bundle written
 * here: one shell env of the local Debian base (python3), one verifier. Reports each run's p50,
 * p95 and all-done seconds (reset sent to the reward), and the harness/stepped ratios.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { HARNESS } from '../../src/defaults.js';
import { freePort } from '../lib/free-port.js';
import { WsClient } from '../lib/ws-client.js';
import { spawnTiedNode } from '../lib/tied-child.js';

const SERVE = fileURLToPath(new URL('../../dist/serve.js', import.meta.url));
const ANSWER = 'echo 42 > /app/answer.txt';

export interface HarnessBurstRun {
  p50_s: number;
  p95_s: number;
  all_done_s: number;
  scored_1: number;
}

export interface HarnessBurstFigures {
  size: number;
  harness: HarnessBurstRun;
  stepped: HarnessBurstRun;
  harness_p95_vs_stepped: number;
  harness_all_done_vs_stepped: number;
  model_calls: number;
}

const round = (v: number) => Math.round(v * 1000) / 1000;
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] ?? NaN;
};

function writeBundle(dir: string, image: string): void {
  const task = (id: string, extra: Record<string, unknown>) =>
    JSON.stringify({
      task_id: id,
      toolset: 'shell',
      env: 'box',
      system_prompt: 'Work in the shell.',
      turns: ['Write 42 to /app/answer.txt.'],
      verifier: { tests: 'tests' },
      ...extra,
    });
  const files: Record<string, string> = {
    'bundle.json': JSON.stringify({
      name: 'harness-bench',
      version: '1.0.0',
      description: 'The bench harness phase: one task, run by the shipped harness or stepped by the client.',
      default_split: 'train',
      splits: { train: 'tasks/train.jsonl' },
      envs: { box: { kind: 'shell', image, workdir: '/app', resources: { memory_mb: 128, cpus: 0.25, pids: 64 } } },
      toolsets: { shell: { builtin: ['shell'] } },
      scores: { reward: { min: 0, max: 1 } },
    }),
    'tasks/train.jsonl': [task('harness', { harness: { command: ['python3', HARNESS.shippedPath] } }), task('stepped', {})].join('\n') + '\n',
    'tests/test.sh': 'if [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n',
  };
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    writeFileSync(path.join(dir, rel), text);
  }
}

/** the policy: the bash call, then (once its result came back) a stop; counts the calls */
async function startUpstream(): Promise<{ url: string; calls: () => number; close: () => Promise<void> }> {
  let calls = 0;
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      calls++;
      const msgs = (JSON.parse(body || '{}').messages ?? []) as { role: string }[];
      const done = msgs.some((m) => m.role === 'tool');
      const message = done
        ? { role: 'assistant', content: 'Done.' }
        : {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: JSON.stringify({ command: ANSWER }) } }],
          };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ id: 'x', object: 'chat.completion', model: 'bench', choices: [{ index: 0, message, finish_reason: done ? 'stop' : 'tool_calls' }] }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/v1`, calls: () => calls, close: () => new Promise((r) => server.close(() => r())) };
}

async function playOne(url: string, taskId: string): Promise<{ s: number; reward: number | null }> {
  const t0 = performance.now();
  const c = await WsClient.open(url);
  try {
    const reset = await c.reset({ task_id: taskId, reset_timeout_s: 900 }, 960_000);
    if (reset.type !== 'observation') throw new Error(`reset: ${JSON.stringify(reset.data)}`);
    let r: { type: string; data: { done?: boolean; reward: number | null } };
    if (taskId === 'harness') {
      do r = await c.call('wait', { timeout_s: 30 });
      while (r.type === 'observation' && !r.data.done);
    } else {
      await c.call('bash', { command: ANSWER });
      r = await c.call('end_turn', {});
    }
    if (r.type !== 'observation') throw new Error(`${taskId}: ${JSON.stringify(r.data)}`);
    return { s: (performance.now() - t0) / 1000, reward: r.data.reward };
  } finally {
    await c.close();
  }
}

async function burstOf(url: string, taskId: string, n: number): Promise<HarnessBurstRun> {
  const t0 = performance.now();
  const runs = await Promise.all(Array.from({ length: n }, () => playOne(url, taskId)));
  const all = (performance.now() - t0) / 1000;
  const s = runs.map((r) => r.s);
  return { p50_s: round(pct(s, 50)), p95_s: round(pct(s, 95)), all_done_s: round(all), scored_1: runs.filter((r) => r.reward === 1).length };
}

/** the phase: a server of its own (instance `<run>-harness`), the stepped burst, then the harness burst */
export async function harnessBurst(opts: { run: string; size: number; image: string; progress: (m: string) => void }): Promise<HarnessBurstFigures> {
  const dir = mkdtempSync(path.join(tmpdir(), 'harness-bench-'));
  writeBundle(dir, opts.image);
  const upstream = await startUpstream();
  const port = await freePort();
  const child = spawnTiedNode(
    [
      SERVE,
      dir,
      '--port',
      String(port),
      '--instance',
      `${opts.run}-harness`,
      '--max-concurrent-envs',
      String(opts.size),
      '--model-url',
      upstream.url,
      '--model',
      'bench',
      '--gateway-port',
      '0',
      '--ping-interval',
      '0',
    ],
    { env: { ...process.env, LOG_LEVEL: 'warn' }, stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const url = `http://127.0.0.1:${port}`;
  try {
    for (let i = 0; ; i++) {
      if (child.exitCode !== null) throw new Error(`the harness bench server exited (${child.exitCode})`);
      if (
        await fetch(`${url}/health`).then(
          (r) => r.ok,
          () => false,
        )
      )
        break;
      if (i > 1200) throw new Error('the harness bench server did not answer /health in 120 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    opts.progress(`  harness: a burst of ${opts.size} stepped episodes (the baseline)`);
    const stepped = await burstOf(url, 'stepped', opts.size);
    opts.progress(`  harness: a burst of ${opts.size} harness episodes`);
    const before = upstream.calls();
    const harness = await burstOf(url, 'harness', opts.size);
    return {
      size: opts.size,
      harness,
      stepped,
      harness_p95_vs_stepped: round(harness.p95_s / stepped.p95_s),
      harness_all_done_vs_stepped: round(harness.all_done_s / stepped.all_done_s),
      model_calls: upstream.calls() - before,
    };
  } finally {
    child.kill('SIGTERM');
    await exited;
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

export function printHarnessBurst(h: HarnessBurstFigures): void {
  console.log('');
  console.log(`Harness: a burst of ${h.size} episodes at once (seconds, reset sent to the reward)`);
  console.log('| run | p50 | p95 | all done | scored 1 |');
  console.log('|---|---|---|---|---|');
  console.log(`| stepped by the client (baseline) | ${h.stepped.p50_s} | ${h.stepped.p95_s} | ${h.stepped.all_done_s} | ${h.stepped.scored_1}/${h.size} |`);
  console.log(`| run by the server's harness | ${h.harness.p50_s} | ${h.harness.p95_s} | ${h.harness.all_done_s} | ${h.harness.scored_1}/${h.size} |`);
  console.log(
    `harness / stepped: p95 ${h.harness_p95_vs_stepped}x, all done ${h.harness_all_done_vs_stepped}x; ${h.model_calls} model calls through the gateway`,
  );
}
