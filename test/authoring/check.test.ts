/**
 * `openenv-bundle check` on envs run as child processes (the fast layer's ProcessSandbox behind
 * the server's own runtime): a fresh node bundle passes; each broken copy fails, naming the task
 * or tool and what to change. The same checks on real Docker: stranger.docker.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { checkDynamic, type DynamicResult } from '../../src/authoring/check/run.js';
import { checkStatic } from '../../src/authoring/check-static.js';
import type { Finding } from '../../src/authoring/findings.js';
import { checkReport, formatCheck } from '../../src/cli/check.js';
import { FIXTURE_BUNDLE } from '../support/app.js';
import { ProcessSandbox } from '../support/process-sandbox.js';
import { bufferIo, initTemp, run, type TempBundle } from './helpers.js';

const runCheck = run('check');

const made: TempBundle[] = [];
afterEach(async () => {
  await Promise.all(made.splice(0).map((b) => b.remove()));
});

async function fresh(): Promise<TempBundle> {
  const b = await initTemp();
  made.push(b);
  return b;
}

/** static, then (when it passes) dynamic on child processes: every finding, and the summary the command prints */
async function check(
  dir: string,
  tasks: number | 'all' = 'all',
  more: { concurrency?: number; freshEnvs?: boolean } = {},
): Promise<{ problems: Finding[]; warnings: Finding[]; golden?: unknown; empty?: unknown; summary?: string; envs?: DynamicResult['envs']; episodes?: number }> {
  const st = await checkStatic(dir);
  if (!st.bundle || st.findings.problems.length > 0) return { problems: st.findings.problems, warnings: st.findings.warnings };
  const sandbox = new ProcessSandbox();
  try {
    const dyn = await checkDynamic(st.bundle, st.validators, { tasks, sandbox, ...more });
    const all = [...st.findings.list, ...dyn.findings.list];
    return {
      problems: all.filter((f) => f.level === 'problem'),
      warnings: all.filter((f) => f.level === 'warning'),
      golden: dyn.golden,
      empty: dyn.empty,
      envs: dyn.envs,
      episodes: dyn.episodes,
      summary: formatCheck(checkReport(dir, '(files)', all, dyn)),
    };
  } finally {
    await sandbox.close();
    await st.bundle.cleanup();
  }
}

const text = (fs: Finding[]) => fs.map((f) => `${f.where}: ${f.message}`).join('\n');

/** `n` more train tasks, copies of the template's first two (one answers at once, one asks for a hint first), ids `<name>-train-more-<i>` */
async function moreTasks(b: TempBundle, n: number): Promise<void> {
  const file = path.join(b.dir, 'tasks/train.jsonl');
  const rows = (await readFile(file, 'utf8')).trim().split('\n');
  const extra = Array.from({ length: n }, (_, i) => {
    const row = JSON.parse(rows[i % 2]!) as { task_id: string };
    return JSON.stringify({ ...row, task_id: row.task_id.replace(/-train-\d+$/, `-train-more-${i}`) });
  });
  await writeFile(file, [...rows, ...extra].join('\n') + '\n');
}

/** bundle.json's env qa says a /reset on a used container starts a clean episode */
const CLEAN_RESET: [string, string] = [
  '"resources": { "memory_mb": 128, "cpus": 0.5, "pids": 64 }',
  '"resources": { "memory_mb": 128, "cpus": 0.5, "pids": 64 },\n      "clean_reset": true',
];

describe('check (envs as child processes)', () => {
  it('passes a bundle fresh from init: every golden solution at the max, every empty one at the floor', async () => {
    const b = await fresh();
    const r = await check(b.dir);
    expect(text(r.problems)).toBe('');
    // the template scores "correct": 1 for the golden answer, 0 for doing nothing
    expect(r.golden).toEqual({ passed: 5, played: 5, reward: 1, scores: { correct: 1 } });
    expect(r.empty).toEqual({ passed: 5, played: 5, reward: 0, scores: { correct: 0 } });
  });

  it('finds in the fixture only its deliberately broken task: fx-bad-scores reports NaN', async () => {
    const r = await check(FIXTURE_BUNDLE);
    expect(r.problems).toHaveLength(1);
    expect(text(r.problems)).toMatch(/task fx-bad-scores .*the empty solution .*failed the env: invalid_scores.*"NaN"/);
  });

  it('fails a golden solution that scores less than the max, naming the task and the score', async () => {
    const b = await fresh();
    await b.edit('tasks/train.jsonl', '"arguments":{"answer":"Paris"}', '"arguments":{"answer":"Lyon"}');
    const r = await check(b.dir);
    expect(text(r.problems)).toMatch(
      /task probe-v1-train-0 \(tasks\/train\.jsonl line 1\): the golden solution scored correct = 0, expected its declared max 1/,
    );
    expect(r.problems).toHaveLength(1);
  });

  it('fails a golden solution whose step got an env error, though it reached the max', async () => {
    const b = await fresh();
    // the hint store is down: get_hint answers HTTP 500, and probe-v1-train-1's golden calls it before answering right
    await b.edit('envs/qa/server.mjs', 'episode.hints += 1;', "throw new Error('the hint store is down');");
    const r = await check(b.dir);
    expect(r.problems).toHaveLength(1);
    expect(text(r.problems)).toMatch(
      /^task probe-v1-train-1 \(tasks\/train\.jsonl line 2\): the golden solution's step 1 \(get_hint\) got an error \(execution_error: the env answered HTTP 500: .*the hint store is down.*\); a golden solution plays without errors/,
    );
    // not counted at the max: 4 of the 5 golden solutions passed
    expect(r.golden).toMatchObject({ passed: 4, played: 5 });
  });

  it('groups one mistake repeated over many tasks into one line, after the distinct ones, naming a few of the tasks', async () => {
    const b = await fresh();
    // every answer is scored wrong (5 tasks share that problem), and the hint store is down (probe-v1-train-1 has a problem of its own)
    await b.edit('envs/qa/server.mjs', 'normalise(episode.answer) === normalise(episode.data.answer)', "normalise(episode.answer) === 'never'");
    await b.edit('envs/qa/server.mjs', 'episode.hints += 1;', "throw new Error('the hint store is down');");
    const r = await check(b.dir);
    expect(r.problems).toHaveLength(6);
    const lines = r.summary!.split('\n');
    const findings = lines.filter((l) => /^ {2}(problem|warning): /.test(l));
    expect(findings).toHaveLength(2);
    expect(findings[0]).toMatch(/^ {2}problem: task probe-v1-train-1 \(tasks\/train\.jsonl line 2\): the golden solution's step 1 \(get_hint\) got an error/);
    expect(findings[1]).toMatch(
      /^ {2}problem: 5 tasks: the golden solution scored correct = 0, expected its declared max 1; .*, e\.g\. probe-v1-train-0; probe-v1-train-1 …$/,
    );
    expect(lines.at(-1)).toBe('6 problem(s), 0 warning(s)');
    // the means of each kind of play beside the counts
    expect(r.summary).toContain('  golden solutions: mean reward 0.000 (correct 0.000)');
    expect(r.summary).toContain('  empty solutions: mean reward 0.000 (correct 0.000)');
  });

  it('fails an env that ignores its seed without saying so, and accepts it once bundle.json says so', async () => {
    const b = await fresh();
    // a hint drawn at random on every call: the same task and seed no longer replay alike
    await b.edit(
      'envs/qa/server.mjs',
      "return { text: String(episode.data.hint ?? 'No hint for this one.') };",
      'return { text: `${episode.data.hint} (${Math.random()})` };',
    );
    const r = await check(b.dir);
    expect(text(r.problems)).toMatch(
      /task probe-v1-train-1 .*played twice with seed 1234, the golden solution gave different results \(first at step 1: .*declare "ignores_seed": true/,
    );
    await b.edit('bundle.json', '"reward": "correct",', '"reward": "correct",\n  "ignores_seed": true,');
    expect(text((await check(b.dir)).problems)).toBe('');
  });

  it('fails a tool schema that does not compile, naming the tool and the field', async () => {
    const b = await fresh();
    await b.edit('bundle.json', '"properties": { "answer": { "type": "string"', '"properties": { "answer": { "type": "text"');
    const r = await check(b.dir);
    expect(text(r.problems)).toMatch(
      /bundle\.json, field "toolsets\.qa\.tools\[1\]\.input_schema" \(tool submit_answer\): expected a JSON Schema that compiles: schema is invalid/,
    );
  });

  it('fails an env that crashes on the empty solution, with its reason and log', async () => {
    const b = await fresh();
    await b.edit(
      'envs/qa/server.mjs',
      "if (key === 'POST /finish') {",
      "if (key === 'POST /finish') {\n    console.log('finishing: about to fall over');\n    process.exit(3);",
    );
    const r = await check(b.dir, 1);
    expect(text(r.problems)).toMatch(
      /the empty solution \(end_turn on every turn, no tool call\) failed the env: env_crashed in phase finish.*about to fall over/s,
    );
  });

  it('fails a score out of its declared range: the server ends the episode invalid_scores', async () => {
    const b = await fresh();
    await b.edit('envs/qa/server.mjs', 'return { correct };', 'return { correct: correct * 100 };');
    const r = await check(b.dir, 1);
    expect(text(r.problems)).toMatch(
      /the golden solution failed the episode: invalid_scores .*score "correct" is 100, outside its declared range \[0, 1\] \(bundle\.json scores\.correct\)/,
    );
  });

  it("fails an env that takes a call violating a tool's schema as valid", async () => {
    const b = await fresh();
    await b.edit(
      'envs/qa/server.mjs',
      'if (extra.length > 0) throw new InvalidArgs(`unknown argument(s)',
      'if (false) throw new InvalidArgs(`unknown argument(s)',
    );
    await b.edit('envs/qa/server.mjs', "if (typeof args.answer !== 'string') throw new InvalidArgs('\"answer\" must be a string');", '');
    const r = await check(b.dir, 1);
    expect(text(r.problems)).toMatch(
      /tool submit_answer \(toolset qa\): the env accepted \{"openenv_check_unknown_field":true\}, which violates the input_schema/,
    );
    expect(text(r.problems)).toMatch(/tool submit_answer \(toolset qa\): a call that violates the input_schema ended the episode/);
  });

  it('finds malformed golden solutions and an undeclared reward score without deploying anything', async () => {
    const b = await fresh();
    await b.edit('tasks/eval.jsonl', '"golden":[{"tool":"submit_answer","arguments":{"answer":"144"}}]', '"golden":[{"tool":"answer","arguments":{}}]');
    await b.edit('tasks/train.jsonl', '"arguments":{"answer":"8"}', '"arguments":{"answer":8}');
    await b.edit('bundle.json', '"reward": "correct"', '"reward": "right"');
    const st = await checkStatic(b.dir);
    await st.bundle?.cleanup();
    const t = text(st.findings.problems);
    expect(t).toMatch(
      /task probe-v1-eval-0 \(tasks\/eval\.jsonl line 1\), field "golden\[0\]": expected a tool of toolset "qa" \(get_hint, submit_answer, end_turn\), got "answer"/,
    );
    expect(t).toMatch(/task probe-v1-train-1 .*field "golden\[1\]": the arguments do not match submit_answer's input_schema: \/answer must be string/);
    expect(t).toMatch(/bundle\.json, field "reward": the reward is the score "right", which "scores" does not declare \(declared: correct\)/);
  });

  it('the command line: --static exits 0 on a good bundle, 1 on problems, 2 on a bad flag; --json for machines', async () => {
    const b = await fresh();
    const ok = bufferIo();
    expect(await runCheck([b.dir, '--static', '--json'], ok.io)).toBe(0);
    expect(JSON.parse(ok.out())).toMatchObject({ ok: true, problems: [], played: null });
    await b.edit('bundle.json', '"floor": 0', '"floor": 2');
    const bad = bufferIo();
    expect(await runCheck([b.dir, '--static'], bad.io)).toBe(1);
    expect(bad.out()).toMatch(/bundle\.json, field "scores\.correct\.floor": expected a floor within \[min, max\] = \[0, 1\], got 2/);
    const usage = bufferIo();
    expect(await runCheck([b.dir, '--tasks', '0'], usage.io)).toBe(2);
    expect(usage.err()).toContain('error: --tasks: ');
  });
});

describe('check on an env that says clean_reset (its containers reused between plays)', () => {
  it('plays 45 tasks on a few containers, and still fails the one broken golden solution among them, on its own line', async () => {
    const b = await fresh();
    await moreTasks(b, 40);
    await b.edit('bundle.json', ...CLEAN_RESET);
    // one golden solution of the 45 answers wrong: probe-v1-train-more-17 (a copy of train-1, hint first)
    await b.edit('tasks/train.jsonl', /("task_id":"probe-v1-train-more-17".*?"answer":)"8"\}\}\]/, '$1"9"}}]');
    const r = await check(b.dir, 'all', { concurrency: 3 });
    expect(text(r.problems)).toMatch(
      /^task probe-v1-train-more-17 \(tasks\/train\.jsonl line 21\): the golden solution scored correct = 0, expected its declared max 1/,
    );
    expect(r.problems).toHaveLength(1);
    expect(r.golden).toMatchObject({ passed: 44, played: 45 });
    expect(r.empty).toMatchObject({ passed: 45, played: 45 });
    // 45 golden + 45 empty + 1 schema-violating play, then a share of the reused plays again on fresh containers (at least 3)
    const [qa] = r.envs!;
    expect(qa!.reused).toBeGreaterThan(80);
    expect(qa!.deploys).toBeLessThan(12);
    expect(qa!.deploys + qa!.reused).toBe(r.episodes);
    expect(r.summary).toMatch(
      /^ {2}env qa: deploy \+ \/reset mean .* over \d+ deploy\(s\); \/reset on a reused container mean \d+\.\d{3} s over \d+ episode\(s\) \(clean_reset\)$/m,
    );
  });

  it('with --fresh-envs, deploys a fresh container for every episode all the same', async () => {
    const b = await fresh();
    await b.edit('bundle.json', ...CLEAN_RESET);
    const r = await check(b.dir, 'all', { freshEnvs: true });
    expect(text(r.problems)).toBe('');
    expect(r.envs).toEqual([expect.objectContaining({ env: 'qa', deploys: r.episodes, reused: 0, reused_mean_s: null })]);
  });

  it('fails an env that keeps something across /reset: plays on a reused container and on a fresh one differ', async () => {
    const b = await fresh();
    await moreTasks(b, 10);
    await b.edit('bundle.json', ...CLEAN_RESET);
    // as GridSim: no seed replay, so only the fresh replays can tell
    await b.edit('bundle.json', '"reward": "correct",', '"reward": "correct",\n  "ignores_seed": true,');
    // what it answers counts the episodes the container has served
    await b.edit('envs/qa/server.mjs', 'let episode = null;', 'let episode = null;\nlet served = 0;');
    await b.edit(
      'envs/qa/server.mjs',
      'episode = { data, seed: seed ?? null, hints: 0, answer: null };',
      'episode = { data, seed: seed ?? null, hints: 0, answer: null };\n    served += 1;',
    );
    await b.edit('envs/qa/server.mjs', 'return { text: `Submitted "${args.answer}".`', 'return { text: `Submitted "${args.answer}" (episode ${served}).`');
    const r = await check(b.dir, 'all', { concurrency: 2 });
    expect(r.problems.length).toBeGreaterThanOrEqual(3);
    for (const p of r.problems) {
      expect(p.message).toMatch(
        /^the golden solution gave different results on a container of env qa that had served \d+ episode\(s\) before and on a fresh one \(first at step \d: .*\(episode \d+\).* then .*\(episode 1\).*\); a \/reset must start a clean episode whatever the container served before: fix the env or drop "clean_reset" from envs\.qa$/,
      );
    }
    // every golden and empty solution passed as such: only the reuse gives it away
    expect(r.golden).toMatchObject({ passed: 15, played: 15 });
  });

  it('plays again on a fresh container a play that failed on a reused one: the fresh play counts, and the failure is put on clean_reset', async () => {
    const b = await fresh();
    await b.edit('bundle.json', ...CLEAN_RESET);
    // a container takes one /reset only
    await b.edit('envs/qa/server.mjs', 'let episode = null;', 'let episode = null;\nlet resets = 0;');
    await b.edit(
      'envs/qa/server.mjs',
      "  if (key === 'POST /reset') {",
      "  if (key === 'POST /reset') {\n    if (++resets > 1) return send(res, 500, { error: 'used', message: 'this container served an episode already' });",
    );
    const r = await check(b.dir, 1, { concurrency: 1 });
    expect(r.golden).toMatchObject({ passed: 2, played: 2 });
    expect(r.empty).toMatchObject({ passed: 2, played: 2 });
    expect(r.problems.length).toBeGreaterThan(0);
    for (const p of r.problems) {
      expect(p.message).toMatch(
        /^the (golden|empty) solution failed on a container of env qa that had served 1 episode\(s\) before \(env_crashed|env_unreachable|env_failed|bad_response.*this container served an episode already.*\), not on a fresh one: its \/reset does not start a clean episode; fix the env or drop "clean_reset" from envs\.qa$/s,
      );
    }
  });
});

describe('check interrupted', () => {
  it('tears down every env it deployed and rejects, saying so', async () => {
    const st = await checkStatic(FIXTURE_BUNDLE);
    const sandbox = new ProcessSandbox();
    const stop = new AbortController();
    try {
      const run = checkDynamic(st.bundle!, st.validators, {
        tasks: 'all',
        sandbox,
        signal: stop.signal,
        onProgress: (done, _total, what) => what === 'playing tasks' && done === 1 && stop.abort(),
      });
      await expect(run).rejects.toThrow('interrupted: every env it deployed was removed');
      expect(sandbox.held()).toEqual([]);
    } finally {
      await sandbox.close();
      await st.bundle?.cleanup();
    }
  });

  it('stopped while the env images are made: rejects saying nothing was played, and deploys nothing', async () => {
    const st = await checkStatic(FIXTURE_BUNDLE);
    const sandbox = new ProcessSandbox();
    const stop = new AbortController();
    let deploys = 0;
    const deploy = sandbox.deploy.bind(sandbox);
    sandbox.deploy = (req) => {
      deploys++;
      return deploy(req);
    };
    try {
      const run = checkDynamic(st.bundle!, st.validators, {
        tasks: 'all',
        sandbox,
        signal: stop.signal,
        onProgress: (_d, _t, what) => what.startsWith('env images') && stop.abort(),
      });
      await expect(run).rejects.toThrow('interrupted before any task was played');
      expect(deploys).toBe(0);
      expect(sandbox.held()).toEqual([]);
    } finally {
      await sandbox.close();
      await st.bundle?.cleanup();
    }
  });

  it('with clean_reset, removes the containers it kept for the next plays too', async () => {
    const b = await fresh();
    await moreTasks(b, 20);
    await b.edit('bundle.json', ...CLEAN_RESET);
    const st = await checkStatic(b.dir);
    const sandbox = new ProcessSandbox();
    const stop = new AbortController();
    try {
      const run = checkDynamic(st.bundle!, st.validators, {
        tasks: 'all',
        sandbox,
        signal: stop.signal,
        concurrency: 3,
        onProgress: (done, _total, what) => what === 'playing tasks' && done === 6 && stop.abort(),
      });
      await expect(run).rejects.toThrow('interrupted: every env it deployed was removed');
      expect(sandbox.held()).toEqual([]);
    } finally {
      await sandbox.close();
      await st.bundle?.cleanup();
    }
  });
});
