/**
 * `openenv-bundle eval` against a running server (envs as processes) and a real HTTP server
 * speaking the chat-completions wire shape whose model is a scripted policy: the golden solutions
 * read from the bundles' task files, and GridSim's greedy rule, so the means it must report are
 * known in advance.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { greedySchedule } from '../../bundles/gridsim-v1/envs/gridsim/src/greedy.js';
import { parseTaskData } from '../../bundles/gridsim-v1/envs/gridsim/src/task.js';
import { baseline, type Row } from '../../scripts/gridsim/stats.js';
import type { CliIo } from '../../src/cli/command.js';
import { cli } from '../../src/cli/openenv-bundle.js';
import type { EvalSummary } from '../../src/eval/summary.js';
import type { EpisodeRecord } from '../../src/eval/play.js';
import { FIXTURE_BUNDLE, processSuiteServer } from '../support/process-server.js';
import { fixtureGolden } from '../support/fixture-policy.js';
import { firstPrompt, startScriptedModel, usageOf, type Policy, type ScriptedModel } from '../support/scripted-model.js';
import { waitFor } from '../../scripts/lib/wait.js';

const GRIDSIM = join(import.meta.dirname, '../../bundles/gridsim-v1');

interface TaskLine {
  task_id: string;
  turns: string[];
  data: Record<string, unknown>;
  meta: Record<string, unknown>;
}

function taskLines(bundle: string, split: string): TaskLine[] {
  return readFileSync(join(bundle, `tasks/${split}.jsonl`), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as TaskLine);
}

/** `openenv-bundle eval …` in-process; `signal` stops it as Ctrl-C does */
const evalMain = (argv: string[], io: CliIo, opts: { signal?: AbortSignal } = {}) => cli(['eval', ...argv], { ...io, signal: opts.signal });

function bufferIo(env: NodeJS.ProcessEnv = {}) {
  const out: string[] = [];
  const err: string[] = [];
  return {
    io: { stdout: { write: (s: string) => out.push(s) }, stderr: { write: (s: string) => err.push(s) }, env },
    out: () => out.join(''),
    err: () => err.join(''),
  };
}

async function readOut(dir: string): Promise<{ summary: EvalSummary; episodes: EpisodeRecord[] }> {
  const summary = JSON.parse(await readFile(join(dir, 'summary.json'), 'utf8')) as EvalSummary;
  const episodes = (await readFile(join(dir, 'episodes.jsonl'), 'utf8'))
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as EpisodeRecord);
  return { summary, episodes };
}

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'openenv-eval-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describe('eval on the fixture bundle', () => {
  const TOKEN = 'eval-test-token-8c2e';
  const s = processSuiteServer({ maxConcurrentEnvs: 3, token: TOKEN }, { bundle: FIXTURE_BUNDLE });
  const env = { EVAL_TOKEN: TOKEN };
  let model: ScriptedModel;
  let policy: Policy = fixtureGolden;
  beforeAll(async () => {
    model = await startScriptedModel((req) => policy(req));
  });
  afterAll(() => model.close());
  const argv = (out: string, ...more: string[]) => [s.url, '--model-url', model.url, '--model', 'scripted', '--token-var', 'EVAL_TOKEN', '--out', out, ...more];

  it('plays the eval split with the golden policy: the known mean, its standard error, the files', async () => {
    policy = fixtureGolden;
    const out = join(tmp, 'fixture-eval');
    const b = bufferIo(env);
    const asked = model.requests.length;
    expect(await evalMain(argv(out, '--concurrency', '2', '--temperature', '0.5', '--chat-template-kwargs', '{"enable_thinking": false}'), b.io)).toBe(0);
    const { summary, episodes } = await readOut(out);
    // fx-eval-0 scores 0.9, fx-eval-1 0.1
    expect(summary).toMatchObject({ split: 'eval', bundle: 'fixture-v1', tasks: 2, played: 2, interrupted: false, failures: { total: 0 } });
    expect(summary.scored.n).toBe(2);
    expect(summary.scored.mean).toBeCloseTo(0.5, 12);
    expect(summary.scored.stderr).toBeCloseTo(0.4, 12);
    expect(summary.scored.zero_share).toBe(0);
    const byTask = Object.fromEntries(episodes.map((e) => [e.task_id, e]));
    expect(byTask['fx-eval-0']).toMatchObject({ reward: 0.9, end_reason: 'turns_ended', failure: null, model_turns: 2 });
    expect(byTask['fx-eval-0']!.tool_calls.map((c) => c.name)).toEqual(['echo', 'end_turn']);
    // the messages are the row's, then the model's calls and the tools' answers
    expect(byTask['fx-eval-0']!.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'assistant', 'tool']);
    expect(byTask['fx-eval-0']!.messages[3]).toMatchObject({ role: 'tool', content: 'eval' });
    // the plain reply ended the turn with its text as end_turn's answer
    expect(byTask['fx-eval-1']).toMatchObject({ reward: 0.1, model_turns: 2 });
    expect(byTask['fx-eval-1']!.tool_calls).toEqual([
      expect.objectContaining({ name: 'fail', is_error: true }),
      expect.objectContaining({ name: 'end_turn', arguments: { answer: 'I called it.' } }),
    ]);
    // what the endpoint was sent: the row's tools as function tools (end_turn last), the temperature
    const sent = model.requests.slice(asked);
    expect(sent[0]!.tools!.map((t) => t.function.name)).toEqual(['echo', 'finish_now', 'sleep', 'crash', 'fail', 'end_turn']);
    expect(sent.every((r) => r.temperature === 0.5 && r.model === 'scripted')).toBe(true);
    expect(sent.every((r) => JSON.stringify(r.chat_template_kwargs) === '{"enable_thinking":false}')).toBe(true);
    const tokens = sent.reduce((a, r) => a + usageOf(r).prompt_tokens, 0);
    expect(summary.tokens).toEqual({ prompt: tokens, completion: 7 * sent.length, episodes_reporting: 2 });
    expect(b.out()).toContain('mean reward  0.5000 ± 0.4000 (± standard error) over 2 scored episodes; zero scores 0.0 %');
    expect(b.out()).toContain('failures     none');
    await waitFor(() => s.sandbox.live().length === 0, 10_000, 'every env torn down');
  });

  it('env and model failures are reported apart, by reason, never scored; the run goes on and exits 1', async () => {
    policy = (req) => {
      const p = firstPrompt(req);
      if (p.startsWith('Call finish_now')) return { tool_calls: [{ name: 'crash', arguments: { code: 3 } }] }; // the env dies
      if (p.startsWith('Echo three words')) return { status: 500, body: '{"error":{"message":"CUDA out of memory"}}' };
      if (p === 'first prompt') return 'hang'; // past --model-timeout
      return fixtureGolden(req); // fx-echo-0 0.5, fx-echo-1 1; fx-bad-scores ends with invalid scores
    };
    const out = join(tmp, 'fixture-failures');
    const b = bufferIo(env);
    expect(await evalMain(argv(out, '--split', 'train', '--concurrency', '3', '--model-timeout', '1'), b.io)).toBe(1);
    const { summary, episodes } = await readOut(out);
    expect(summary.played).toBe(6);
    expect(summary.scored.n).toBe(2);
    expect(summary.scored.mean).toBeCloseTo(0.75, 12);
    expect(summary.failures).toMatchObject({ env: { env_crashed: 1, invalid_scores: 1 }, model: { model_http_error: 1, model_timeout: 1 }, total: 4 });
    // each reason's first message, in the summary and on the terminal
    expect(Object.keys(summary.failures.first).sort()).toEqual(['env_crashed', 'invalid_scores', 'model_http_error', 'model_timeout']);
    expect(summary.failures.first.model_http_error).toMatchObject({ task_id: 'fx-echo-3' });
    expect(summary.failures.first.model_http_error!.message).toContain('CUDA out of memory');
    expect(b.out()).toMatch(/^ {4}model_http_error {2}first: fx-echo-3: the model endpoint answered HTTP 500: .*CUDA out of memory/m);
    const failed = episodes.filter((e) => e.failure);
    expect(failed.every((e) => e.reward === null)).toBe(true);
    expect(episodes.find((e) => e.task_id === 'fx-echo-3')!.failure).toMatchObject({ kind: 'model', reason: 'model_http_error' });
    expect(episodes.find((e) => e.task_id === 'fx-echo-3')!.failure!.message).toContain('CUDA out of memory');
    expect(episodes.find((e) => e.task_id === 'fx-two-turn')!.failure!.message).toContain('model_timeout (1 s)');
    expect(b.out()).toContain('failures     4, not scored (env: ');
    // the model's failures closed their sessions: the server tore those episodes down
    await waitFor(() => s.sandbox.live().length === 0, 10_000, 'every env torn down');
  });

  it("arguments that are not a JSON object are the model's error and the episode goes on; past --max-turns the turns end empty and the env scores", async () => {
    policy = (req) => {
      const turn = req.messages.filter((m) => m.role === 'assistant').length;
      if (turn === 0) return { tool_calls: [{ name: 'echo', arguments: 'text=hello' }] };
      return { tool_calls: [{ name: 'echo', arguments: { text: 'hello' } }] };
    };
    const out = join(tmp, 'fixture-model-errors');
    expect(await evalMain(argv(out, '--split', 'train', '--tasks', '1', '--max-turns', '2'), bufferIo(env).io)).toBe(0);
    const { summary, episodes } = await readOut(out);
    expect(summary).toMatchObject({ tasks: 1, played: 1, failures: { total: 0 } });
    const [e] = episodes;
    // fx-echo-0: finish_score 0.5, scored though the model never ended its turn
    expect(e).toMatchObject({ task_id: 'fx-echo-0', reward: 0.5, model_turns: 2, turns_exhausted: true, end_reason: 'turns_ended' });
    expect(e!.tool_calls.map((c) => [c.name, c.error_type])).toEqual([
      ['echo', 'invalid_args'],
      ['echo', null],
      ['end_turn', null],
    ]);
    expect(e!.messages[3]).toMatchObject({ role: 'tool' });
    expect((e!.messages[3] as { content: string }).content).toContain('JSON object');
  });

  it('an interrupt writes what finished and tears every episode in play down', async () => {
    policy = (req) => (firstPrompt(req) === 'Echo the word hello, then end your turn.' ? fixtureGolden(req) : 'hang');
    const out = join(tmp, 'fixture-interrupted');
    const b = bufferIo(env);
    const stop = new AbortController();
    const run = evalMain(argv(out, '--split', 'train', '--concurrency', '3'), b.io, { signal: stop.signal });
    // fx-echo-0 finished, and three episodes (the worker that played it took the next) wait on the model with their envs deployed
    await waitFor(() => model.hanging() === 3 && readFileSync(join(out, 'episodes.jsonl'), 'utf8').trim() !== '', 20_000, 'one done, three in play');
    expect(s.sandbox.live()).toHaveLength(3);
    stop.abort();
    expect(await run).toBe(1);
    const { summary, episodes } = await readOut(out);
    expect(summary).toMatchObject({ interrupted: true, tasks: 6, played: 1 });
    expect(episodes.map((e) => e.task_id)).toEqual(['fx-echo-0']);
    expect(b.out()).toContain('1 of 6 tasks played');
    await waitFor(() => s.sandbox.live().length === 0, 10_000, 'the interrupted episodes torn down');
  });

  it('the built command on Ctrl-C (SIGINT): what finished is written, the episodes in play torn down, exit 1', async () => {
    const bin = join(import.meta.dirname, '../../dist/cli/openenv-bundle.js');
    expect(existsSync(bin), 'run `npm run build` first').toBe(true);
    policy = (req) => (firstPrompt(req) === 'Echo the word hello, then end your turn.' ? fixtureGolden(req) : 'hang');
    const out = join(tmp, 'fixture-sigint');
    const child = spawn(process.execPath, [bin, 'eval', ...argv(out, '--split', 'train', '--concurrency', '2')], {
      env: { PATH: process.env.PATH, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    await waitFor(
      () => model.hanging() === 2 && existsSync(join(out, 'episodes.jsonl')) && readFileSync(join(out, 'episodes.jsonl'), 'utf8') !== '',
      20_000,
      'one done, two in play',
    );
    child.kill('SIGINT');
    expect(await exited).toBe(1);
    const { summary, episodes } = await readOut(out);
    expect(summary).toMatchObject({ interrupted: true, played: 1 });
    expect(episodes).toHaveLength(1);
    expect(stdout).toContain('(interrupted)');
    await waitFor(() => s.sandbox.live().length === 0, 10_000, 'the interrupted episodes torn down');
  });

  it('checks the model endpoint before it deploys anything: a dead URL, a refused key, a model it does not serve exit 1 at once', async () => {
    const spawned = s.sandbox.spawned;
    const dead = bufferIo(env);
    // a port nothing listens on: the scripted model's, closed
    const gone = await startScriptedModel(() => 'hang');
    const goneUrl = gone.url;
    await gone.close();
    expect(await evalMain([s.url, '--model-url', goneUrl, '--model', 'x', '--token-var', 'EVAL_TOKEN', '--out', join(tmp, 'dead')], dead.io)).toBe(1);
    expect(dead.err()).toMatch(
      /^error: cannot reach the model at http:\/\/127\.0\.0\.1:\d+\/v1\/models: .*ECONNREFUSED.* \(model_unreachable; nothing was deployed\)\n$/,
    );
    const listing = await startScriptedModel(fixtureGolden, { models: ['Qwen/Qwen3-4B'] });
    try {
      const wrong = bufferIo(env);
      expect(await evalMain([s.url, '--model-url', listing.url, '--model', 'qwen3', '--token-var', 'EVAL_TOKEN', '--out', join(tmp, 'wrong')], wrong.io)).toBe(
        1,
      );
      expect(wrong.err()).toContain('error: the model endpoint serves "Qwen/Qwen3-4B", not "qwen3": pass one of them as --model');
      expect(listing.requests).toHaveLength(0);
      // the model it lists plays
      const right = bufferIo(env);
      const out = join(tmp, 'listed');
      expect(
        await evalMain([s.url, '--model-url', listing.url, '--model', 'Qwen/Qwen3-4B', '--token-var', 'EVAL_TOKEN', '--out', out, '--tasks', '1'], right.io),
      ).toBe(0);
    } finally {
      await listing.close();
    }
    // two refusals deployed nothing; the run that played deployed its one task
    expect(s.sandbox.spawned - spawned).toBe(1);
    expect(existsSync(join(tmp, 'dead'))).toBe(false);
  });

  it('command-line mistakes exit 2; an unreachable server or a missing token exits 1 with one line', async () => {
    const b = bufferIo(env);
    expect(await evalMain([s.url, '--model', 'x'], b.io)).toBe(2);
    expect(b.err()).toContain('--model-url and --model go together');
    expect(await evalMain([s.url, '--model-url', model.url], b.io)).toBe(2);
    expect(b.err()).toContain('--model is required with --model-url');
    // neither: fine for harness tasks only; these are played by the client, so it needs a model (exit 1, nothing deployed)
    const spawnedBefore = s.sandbox.spawned;
    const none = bufferIo(env);
    expect(await evalMain([s.url, '--token-var', 'EVAL_TOKEN', '--out', join(tmp, 'no-model')], none.io)).toBe(1);
    expect(none.err()).toMatch(/are not harness tasks: the client plays them with a model, so give --model-url and --model/);
    expect(s.sandbox.spawned).toBe(spawnedBefore);
    expect(await evalMain([s.url, '--model-url', model.url, '--model', 'x', '--tasks', '0'], b.io)).toBe(2);
    expect(await evalMain([s.url, '--model-url', 'ftp://x', '--model', 'x'], b.io)).toBe(2);
    expect(await evalMain([s.url, '--model-url', model.url, '--model', 'x', '--max-turns', 'many'], b.io)).toBe(2);
    expect(await evalMain([s.url, '--model-url', model.url, '--model', 'x', '--chat-template-kwargs', '[1]'], b.io)).toBe(2);
    expect(b.err()).toContain('--chat-template-kwargs must be a JSON object');
    const noToken = bufferIo({});
    expect(await evalMain([s.url, '--model-url', model.url, '--model', 'x', '--out', join(tmp, 'x')], noToken.io)).toBe(1);
    expect(noToken.err()).toContain('needs a token');
    const unknownSplit = bufferIo(env);
    expect(await evalMain(argv(join(tmp, 'y'), '--split', 'nope'), unknownSplit.io)).toBe(1);
    expect(unknownSplit.err()).toContain('serves no split "nope"');
  });
});

describe('eval on GridSim with the greedy rule as the model', () => {
  const s = processSuiteServer({ maxConcurrentEnvs: 8 }, { bundle: GRIDSIM, sandbox: { entry: { gridsim: 'app/server.mjs' } } });
  const evalLines = taskLines(GRIDSIM, 'eval');
  const byPrompt = new Map(evalLines.map((t) => [t.turns[0], t]));
  let model: ScriptedModel;
  beforeAll(async () => {
    model = await startScriptedModel((req) => {
      const task = byPrompt.get(firstPrompt(req));
      if (!task) return { status: 400, body: '{"error":{"message":"unknown task"}}' };
      const { b, pricesCents } = parseTaskData(task.data);
      return { tool_calls: [{ name: 'submit_schedule', arguments: { schedule: greedySchedule(b, pricesCents) } }] };
    });
  });
  afterAll(() => model.close());

  it("reports the greedy mean on the 200 eval days (the bundle README's 0.7664), per battery size too", { timeout: 600_000 }, async () => {
    const expected = baseline(evalLines as unknown as Row[]);
    const out = join(tmp, 'gridsim-eval');
    const b = bufferIo();
    expect(await evalMain([s.url, '--model-url', model.url, '--model', 'greedy', '--split', 'eval', '--concurrency', '8', '--out', out], b.io)).toBe(0);
    const { summary, episodes } = await readOut(out);
    expect(episodes).toHaveLength(200);
    expect(summary.failures.total).toBe(0);
    expect(summary.scored.n).toBe(200);
    expect(summary.scored.mean).toBeCloseTo(expected.greedy, 9);
    expect(Math.abs(summary.scored.mean! - 0.7664)).toBeLessThan(0.00005);
    expect(summary.baselines).toMatchObject({ greedy: 0.7664 });
    for (const [duration, g] of Object.entries(expected.greedyByDuration)) {
      const group = summary.groups.battery_h![duration.replace(/h$/, '')]!;
      expect(group.n).toBe(g.days);
      expect(group.mean).toBeCloseTo(g.mean, 9);
    }
    expect(episodes.every((e) => e.end_reason === 'finished' && e.model_turns === 1)).toBe(true);
    expect(b.out()).toMatch(/mean reward {2}0\.766\d ± 0\.0\d{3}/);
    expect(b.out()).toContain('by battery_h');
    await waitFor(() => s.sandbox.live().length === 0, 10_000, 'every env torn down');
  });
});
