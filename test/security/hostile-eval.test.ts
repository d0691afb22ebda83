/**
 * Issue 26, what a hostile (or broken) model endpoint and a careless user did to `eval`, run as
 * users run it (the built binary, a child process) against a process-backed server:
 * - a reply of endless bytes is read up to a bound and is the model's bad reply, not
 *   `model_unreachable` after gigabytes of memory;
 * - the model's own mistakes (an empty tool name, 10 MB of arguments) are its tool errors: the
 *   episode goes on and is scored, no env failure counted;
 * - SIGTERM writes summary.json; Ctrl-C while a /ws handshake hangs ends the run at once;
 * - `--out` at an earlier run's folder is refused and its episodes.jsonl kept.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MODEL_REPLY_MAX_BYTES } from '../../src/eval/model.js';
import type { EpisodeRecord } from '../../src/eval/play.js';
import { fixtureGolden } from '../support/fixture-policy.js';
import { processSuiteServer } from '../support/process-server.js';
import { startScriptedModel, turnsTaken, type Policy, type ScriptedModel } from '../support/scripted-model.js';
import { waitFor } from '../../scripts/lib/wait.js';

const CLI = join(process.cwd(), 'dist/cli/openenv-bundle.js');

interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

function evalProcess(args: string[]): { child: ChildProcess; done: Promise<Ran> } {
  const t0 = Date.now();
  const child = spawn(process.execPath, [CLI, 'eval', ...args], { env: { PATH: process.env.PATH! }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  const done = new Promise<Ran>((resolve) => child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr, ms: Date.now() - t0 })));
  return { child, done };
}

function episodes(out: string): EpisodeRecord[] {
  return readFileSync(join(out, 'episodes.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as EpisodeRecord);
}

/** a chat-completions endpoint that answers 200 and then streams bytes without end: to the chat request, or to `GET /models` as well */
async function endlessModel(at: 'chat' | 'models' = 'chat'): Promise<{ url: string; sent: () => number; close: () => Promise<void> }> {
  let sent = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    if (at === 'chat' && req.method === 'GET') return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write('{"choices":[{"message":{"content":"');
    const chunk = Buffer.alloc(256 * 1024, 'a');
    const more = () => {
      while (!res.destroyed && res.write(chunk)) sent += chunk.length;
      if (!res.destroyed) res.once('drain', more);
    };
    more();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    sent: () => sent,
    close: () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

describe('eval against a hostile model endpoint and a careless user', () => {
  const s = processSuiteServer({ maxConcurrentEnvs: 2 });
  const tmp = mkdtempSync(join(tmpdir(), 'openenv-hostile-eval-'));
  let model: ScriptedModel;
  let policy: Policy = fixtureGolden;
  beforeAll(async () => {
    model = await startScriptedModel((req) => policy(req));
  });
  afterAll(async () => {
    await model.close();
    rmSync(tmp, { recursive: true, force: true });
  });
  const args = (out: string, modelUrl = model.url, ...more: string[]) => [
    s.url,
    '--model-url',
    modelUrl,
    '--model',
    'm',
    '--split',
    'eval',
    '--out',
    out,
    ...more,
  ];

  it("a reply that never ends is read up to the bound and is the model's bad reply; the process stays small", async () => {
    const endless = await endlessModel();
    try {
      const out = join(tmp, 'endless');
      const r = await evalProcess(args(out, endless.url, '--tasks', '1')).done;
      expect(r.code, r.stderr).toBe(1);
      const [e] = episodes(out);
      expect(e!.failure).toMatchObject({ kind: 'model', reason: 'model_bad_reply' });
      expect(e!.failure!.message).toContain(`more than ${MODEL_REPLY_MAX_BYTES / 1024 / 1024} MiB`);
      // it stopped reading near the bound, not after gigabytes
      expect(endless.sent()).toBeLessThan(MODEL_REPLY_MAX_BYTES * 8);
      const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
      expect(summary.failures).toMatchObject({ total: 1 });
      expect(JSON.stringify(summary.failures)).not.toMatch(/env_failed|model_unreachable/);
    } finally {
      await endless.close();
    }
  });

  it('a check of the endpoint (GET /models) that never ends is refused before anything is deployed', async () => {
    const endless = await endlessModel('models');
    try {
      const r = await evalProcess(args(join(tmp, 'endless-models'), endless.url, '--tasks', '1')).done;
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`more than ${MODEL_REPLY_MAX_BYTES / 1024 / 1024} MiB: not read (model_bad_reply; nothing was deployed)`);
      expect(endless.sent()).toBeLessThan(MODEL_REPLY_MAX_BYTES * 8);
    } finally {
      await endless.close();
    }
  });

  it("the model's mistakes are its tool errors: an empty tool name and 10 MB of arguments are answered to it, the episodes are scored", async () => {
    policy = (req) => {
      const turn = turnsTaken(req);
      if (turn === 0) return { tool_calls: [{ name: '', arguments: {} }] };
      if (turn === 1) return { tool_calls: [{ name: 'echo', arguments: { text: 'x'.repeat(10 * 1024 * 1024) } }] };
      // then the golden play, as if it had started now
      return fixtureGolden({ ...req, messages: req.messages.filter((m, i) => i < 2 || m.role === 'user' || i >= 6) });
    };
    const out = join(tmp, 'mistakes');
    const r = await evalProcess(args(out)).done;
    expect(r.code, r.stderr).toBe(0);
    for (const e of episodes(out)) {
      expect(e.failure).toBeNull();
      expect(e.reward).not.toBeNull();
      expect(e.tool_calls[0]).toMatchObject({ name: '', is_error: true, error_type: 'invalid_args' });
      expect(e.tool_calls[1]).toMatchObject({
        name: 'echo',
        is_error: true,
        error_type: 'invalid_args',
        arguments: expect.stringMatching(/^\[\d+ bytes, not sent\]$/),
      });
      // the model was told what it got wrong
      const told = e.messages.filter((m) => m.role === 'tool').map((m) => (m as { content: string }).content);
      expect(told[0]).toContain('tool_name must be a non-empty string');
      expect(told[1]).toMatch(/over the 4 MiB a step may have: not sent/);
    }
    policy = fixtureGolden;
  });

  it('SIGTERM ends the run as Ctrl-C does: the sessions closed, summary.json written', async () => {
    policy = () => 'hang';
    const out = join(tmp, 'sigterm');
    const { child, done } = evalProcess(args(out));
    await waitFor(() => model.hanging() >= 1, 20_000, 'the model asked');
    child.kill('SIGTERM');
    const r = await done;
    expect(r.signal).toBeNull();
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('closing the episodes in play');
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
    expect(summary).toMatchObject({ interrupted: true });
    await waitFor(() => s.sandbox.live().length === 0, 10_000, "the run's envs torn down");
    policy = fixtureGolden;
  });

  it('Ctrl-C while the /ws handshake hangs ends the run at once, not at the reset timeout', async () => {
    // in front of the server: HTTP passes, an upgrade is never answered
    const held: Socket[] = [];
    let upgrades = 0;
    const front = http.createServer(async (req, res) => {
      const r = await fetch(`${s.url}${req.url}`);
      res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'application/json' }).end(Buffer.from(await r.arrayBuffer()));
    });
    front.on('upgrade', (_req, socket: Socket) => {
      upgrades++;
      held.push(socket);
    });
    await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
    try {
      const out = join(tmp, 'handshake');
      const url = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
      const { child, done } = evalProcess([url, '--model-url', model.url, '--model', 'm', '--split', 'eval', '--out', out, '--reset-timeout', '600']);
      await waitFor(() => upgrades >= 1, 20_000, 'a handshake started');
      const t0 = Date.now();
      child.kill('SIGINT');
      const r = await done;
      const tookMs = Date.now() - t0;
      console.log(`[eval] Ctrl-C during a hung handshake: the process ended ${tookMs} ms later`);
      expect(r.code).toBe(1);
      expect(tookMs).toBeLessThan(15_000);
      expect(JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'))).toMatchObject({ interrupted: true });
    } finally {
      for (const sock of held) sock.destroy();
      await new Promise((r) => front.close(r));
    }
  });

  it("--out at an earlier run's folder is refused before anything runs; its episodes.jsonl is kept", async () => {
    const out = join(tmp, 'earlier');
    mkdirSync(out);
    writeFileSync(join(out, 'episodes.jsonl'), '{"task_id":"from an earlier run"}\n');
    const asked = model.requests.length;
    const r = await evalProcess(args(out)).done;
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${out} holds an earlier run's episodes.jsonl: pass another --out`);
    expect(readFileSync(join(out, 'episodes.jsonl'), 'utf8')).toBe('{"task_id":"from an earlier run"}\n');
    expect(existsSync(join(out, 'summary.json'))).toBe(false);
    expect(model.requests.length).toBe(asked);
  });
});
