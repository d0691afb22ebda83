/** The slime prompt-row writer (`node dist/rows.js URL OUT`) against real servers. */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCommand } from '../src/cli/command.js';
import { UsageError } from '../src/cli/options.js';
import { rowsCommand } from '../src/cli/rows.js';
import { promptRow } from '../src/rows/build.js';
import { writeAtomically } from '../src/rows/write.js';
import type { TestServer } from './support/app.js';
import { FIXTURE_BUNDLE, startProcessServer, type ProcessServer } from './support/process-server.js';
import { http } from './routes/http.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const GRIDSIM = path.join(ROOT, 'bundles/gridsim-v1');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** the command in-process (as `node dist/rows.js` runs it), with a terminal or not */
async function rows(argv: string[], env: NodeJS.ProcessEnv = {}, tty = false): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const code = await runCommand(
    rowsCommand,
    argv,
    {
      stdout: { write: (s: string) => (stdout += s) },
      stderr: { isTTY: tty, write: (s: string) => (stderr += s) },
      env,
    },
    'node dist/rows.js',
  );
  return { code, stdout, stderr };
}

const tmp = () => mkdtemp(path.join(tmpdir(), 'rows-test-'));
const readJsonl = async (file: string) =>
  (await readFile(file, 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
const oneLine = (r: Run) => {
  expect(r.stderr.endsWith('\n')).toBe(true);
  expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
  expect(r.stderr).toMatch(/^error: /);
};

/** Checks the files the writer made in `out` against the server's own /bundle, /tasks and /toolsets. */
async function checkRows(
  s: TestServer,
  out: string,
  opts: { url: string; tokenVar: string | null; maxTurns: number; toolTimeout: number; resetTimeout: number; modelTimeout: number },
  headers: Record<string, string> = {},
) {
  const bundle = (await http(s.url, 'GET', '/bundle', undefined, headers)).body;
  const toolsets = (await http(s.url, 'GET', '/toolsets', undefined, headers)).body.toolsets;
  const splits = Object.keys(bundle.splits);
  expect((await readdir(out)).sort()).toEqual(['all.jsonl', ...splits.map((sp) => `${sp}.jsonl`)].sort());
  const all: any[] = [];
  for (const split of splits) {
    const rowsOf = await readJsonl(path.join(out, `${split}.jsonl`));
    expect(rowsOf).toHaveLength(bundle.splits[split]);
    all.push(...rowsOf);
    for (const [i, row] of rowsOf.entries()) {
      expect(Object.keys(row).sort()).toEqual(['messages', 'metadata', 'tools']);
      expect(row.metadata.split).toBe(split);
      expect(row.metadata.index).toBe(i);
    }
    // spot-check rows against the server's task rows
    for (const index of [0, bundle.splits[split] - 1]) {
      const page = (await http(s.url, 'GET', `/tasks?split=${split}&offset=${index}&limit=1`, undefined, headers)).body;
      const task = page.tasks[0];
      const row = rowsOf[index];
      expect(row.messages).toEqual(task.messages);
      expect(row.messages.map((m: { role: string }) => m.role)).toEqual(['system', 'user']);
      const tools = toolsets[task.toolset];
      expect(row.tools).toEqual(
        tools.map((t: any) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.input_schema } })),
      );
      expect(row.tools.at(-1).function.name).toBe('end_turn');
      expect(row.metadata).toEqual({
        split,
        index,
        task_id: task.task_id,
        toolset: task.toolset,
        // the task's groups, as GET /tasks serves them; the tools' definitions, as in `tools`
        groups: task.groups,
        tools: row.tools.map((t: any) => t.function),
        server: {
          url: opts.url,
          max_turns: opts.maxTurns,
          tool_timeout: opts.toolTimeout,
          reset_timeout: opts.resetTimeout,
          model_timeout: opts.modelTimeout,
          token_var: opts.tokenVar,
        },
      });
    }
  }
  const allRows = await readJsonl(path.join(out, 'all.jsonl'));
  expect(allRows).toEqual(all);
  expect(new Set(allRows.map((r) => r.metadata.task_id)).size).toBe(allRows.length);
  return { bundle, allRows };
}

describe('rows: arguments, rows, progress, atomic writes', () => {
  it('parses the command line with the documented defaults', () => {
    expect(rowsCommand.parse(['http://h:8200/', 'data'])).toEqual({
      url: 'http://h:8200',
      out: 'data',
      maxTurns: 4,
      toolTimeout: 60,
      resetTimeout: 600,
      modelTimeout: 600,
    });
    const a = rowsCommand.parse([
      'https://envs.internal',
      'o',
      '--max-turns',
      '2',
      '--tool-timeout',
      '30',
      '--reset-timeout',
      '90.5',
      '--model-timeout',
      '120',
      '--token-var',
      'AGENTENV_TOKEN',
      '--split',
      'eval',
    ]);
    expect(a).toMatchObject({ maxTurns: 2, toolTimeout: 30, resetTimeout: 90.5, modelTimeout: 120, tokenVar: 'AGENTENV_TOKEN', split: ['eval'] });
    for (const bad of [
      [],
      ['http://h'],
      ['ftp://h', 'o'],
      ['not a url', 'o'],
      ['http://h', 'o', '--max-turns', '0'],
      ['http://h', 'o', '--tool-timeout', 'x'],
      ['http://h', 'o', '--token-var', 'A-B'],
      ['http://h', 'o', '--nope'],
    ]) {
      expect(() => rowsCommand.parse(bad), bad.join(' ')).toThrow(UsageError);
    }
  });

  it('a command line to fix exits 2 saying what is missing and where the help is', async () => {
    const r = await rows(['http://h']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("error: missing OUT (the folder to write the rows into)\nRun 'node dist/rows.js --help' for its arguments and options.\n");
    const help = await rows(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('--token-var');
  });

  it('makes a row: messages, OpenAI function tools with end_turn, metadata', () => {
    const server = { url: 'http://h', max_turns: 4, tool_timeout: 60, reset_timeout: 600, model_timeout: 600, token_var: 'T' };
    const task = {
      task_id: 't1',
      split: 'train',
      index: 3,
      toolset: 'ts',
      messages: [
        { role: 'system', content: 's' },
        { role: 'user', content: 'u' },
      ] as [{ role: 'system'; content: string }, { role: 'user'; content: string }],
      turns: 1,
      max_turns: 4,
      groups: {},
    };
    const row = promptRow(task, [{ name: 'a', description: 'does a', input_schema: { type: 'object' } }], server);
    expect(row).toEqual({
      messages: task.messages,
      tools: [
        { type: 'function', function: { name: 'a', description: 'does a', parameters: { type: 'object' } } },
        { type: 'function', function: { name: 'end_turn', description: expect.any(String), parameters: expect.objectContaining({ type: 'object' }) } },
      ],
      metadata: {
        split: 'train',
        index: 3,
        task_id: 't1',
        toolset: 'ts',
        groups: {},
        tools: [
          { name: 'a', description: 'does a', parameters: { type: 'object' } },
          { name: 'end_turn', description: expect.any(String), parameters: expect.objectContaining({ type: 'object' }) },
        ],
        server,
      },
    });
  });

  it("carries the task's groups into its row's metadata, for slime's per-group logging", () => {
    const server = { url: 'http://h', max_turns: 4, tool_timeout: 60, reset_timeout: 600, model_timeout: 600, token_var: null };
    const messages = [
      { role: 'system', content: 's' },
      { role: 'user', content: 'u' },
    ] as [{ role: 'system'; content: string }, { role: 'user'; content: string }];
    const task = { task_id: 't2', split: 'eval', index: 0, toolset: 'ts', messages, turns: 1, max_turns: 1, groups: { season: 'winter', point: 'p3' } };
    const row = promptRow(task, [], server);
    expect(row.metadata.groups).toEqual({ season: 'winter', point: 'p3' });
    expect(row.metadata.tools.map((t) => t.name)).toEqual(['end_turn']);
    expect(row.metadata.tools[0]).toEqual(row.tools[0]!.function);
  });

  it('a write that fails leaves the folder as it was, without temporary files', async () => {
    const out = await tmp();
    await writeFile(path.join(out, 'all.jsonl'), 'old\n');
    await mkdir(path.join(out, 'eval.jsonl'));
    await expect(
      writeAtomically(out, [
        { name: 'train.jsonl', lines: ['{"a":1}'] },
        { name: 'eval.jsonl', lines: ['{"b":2}'] },
        { name: 'all.jsonl', lines: ['{"a":1}', '{"b":2}'] },
      ]),
    ).rejects.toThrow(/eval\.jsonl.*nothing was written/);
    expect((await readdir(out)).sort()).toEqual(['all.jsonl', 'eval.jsonl']);
    expect(await readFile(path.join(out, 'all.jsonl'), 'utf8')).toBe('old\n');
    await writeAtomically(out, [{ name: 'train.jsonl', lines: ['x', 'y'] }]);
    expect(await readFile(path.join(out, 'train.jsonl'), 'utf8')).toBe('x\ny\n');
    await rm(out, { recursive: true, force: true });
  });

  it('an unreachable server: one line, exit 1, OUT untouched', async () => {
    const out = await tmp();
    await writeFile(path.join(out, 'all.jsonl'), 'old\n');
    // a port that was just free: nothing listens there
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', () => r()));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((r) => probe.close(r));
    const r = await rows([`http://127.0.0.1:${port}`, out]);
    expect(r.code).toBe(1);
    oneLine(r);
    expect(r.stderr).toContain(`cannot reach the server at http://127.0.0.1:${port}`);
    expect(r.stderr).toContain('ECONNREFUSED');
    expect(await readdir(out)).toEqual(['all.jsonl']);
    expect(await readFile(path.join(out, 'all.jsonl'), 'utf8')).toBe('old\n');
    await rm(out, { recursive: true, force: true });
  });
});

describe('rows against the fixture bundle', () => {
  const TOKEN = `rows-${randomBytes(12).toString('hex')}`;
  let open: ProcessServer;
  let guarded: ProcessServer;
  let big: ProcessServer;
  let bigBundle: string;
  let outs: string[] = [];
  const out = async () => {
    const d = await tmp();
    outs.push(d);
    return path.join(d, 'rows');
  };

  beforeAll(async () => {
    open = await startProcessServer();
    guarded = await startProcessServer({ token: TOKEN });
    // a copy of the fixture with a train split of 2,345 tasks: three pages of /tasks
    bigBundle = await mkdtemp(path.join(tmpdir(), 'rows-big-bundle-'));
    await cp(FIXTURE_BUNDLE, bigBundle, { recursive: true });
    const lines = Array.from({ length: 2345 }, (_, i) =>
      JSON.stringify({ task_id: `big-${i}`, toolset: 'echo', system_prompt: 'You test paging.', turns: [`Echo ${i}.`], data: { finish_score: 0.5 } }),
    );
    await writeFile(path.join(bigBundle, 'tasks/train.jsonl'), `${lines.join('\n')}\n`);
    big = await startProcessServer({}, { bundle: bigBundle });
  });
  afterAll(async () => {
    // each stop fails if an env process outlived its app
    for (const s of [open, guarded, big]) await s?.stop();
    await Promise.all([...outs, bigBundle].filter(Boolean).map((d) => rm(d, { recursive: true, force: true })));
    outs = [];
  });

  it('writes one row per task for each split and all.jsonl, and says so', async () => {
    const o = await out();
    const r = await rows([open.url, o]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`wrote all.jsonl, eval.jsonl, train.jsonl to ${o}\n`);
    const { bundle, allRows } = await checkRows(open, o, { url: open.url, tokenVar: null, maxTurns: 4, toolTimeout: 60, resetTimeout: 600, modelTimeout: 600 });
    expect(bundle.splits).toEqual({ train: 6, eval: 2 });
    expect(allRows).toHaveLength(8);
    // no env was deployed to write them
    expect(open.sandbox.spawned).toBe(0);
  });

  it('takes the settings it records, and --split', async () => {
    const o = await out();
    const r = await rows([`${open.url}/`, o, '--max-turns', '2', '--tool-timeout', '30', '--reset-timeout', '120', '--model-timeout', '90', '--split', 'eval']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`wrote all.jsonl, eval.jsonl to ${o}\n`);
    const evalRows = await readJsonl(path.join(o, 'eval.jsonl'));
    expect(evalRows.map((x) => x.metadata.task_id)).toEqual(['fx-eval-0', 'fx-eval-1']);
    expect(evalRows[0].metadata.server).toEqual({ url: open.url, max_turns: 2, tool_timeout: 30, reset_timeout: 120, model_timeout: 90, token_var: null });
    expect(await readJsonl(path.join(o, 'all.jsonl'))).toEqual(evalRows);
    const unknown = await rows([open.url, await out(), '--split', 'test']);
    expect(unknown.code).toBe(1);
    oneLine(unknown);
    expect(unknown.stderr).toContain('train, eval');
  });

  it('reads the token from --token-var and records only its name', async () => {
    const o = await out();
    const r = await rows([guarded.url, o, '--token-var', 'AGENTENV_TOKEN'], { AGENTENV_TOKEN: TOKEN });
    expect(r.code).toBe(0);
    await checkRows(
      guarded,
      o,
      { url: guarded.url, tokenVar: 'AGENTENV_TOKEN', maxTurns: 4, toolTimeout: 60, resetTimeout: 600, modelTimeout: 600 },
      { authorization: `Bearer ${TOKEN}` },
    );
    for (const f of await readdir(o)) expect(await readFile(path.join(o, f), 'utf8'), f).not.toContain(TOKEN);
    expect(r.stdout + r.stderr).not.toContain(TOKEN);
  });

  it('a 401 (no token, a wrong one) and an unset variable: one line, exit 1, nothing written', async () => {
    const o = await out();
    const none = await rows([guarded.url, o]);
    expect(none.code).toBe(1);
    oneLine(none);
    expect(none.stderr).toContain('401');
    expect(none.stderr).toContain('--token-var');
    const wrong = await rows([guarded.url, o, '--token-var', 'MY_TOKEN'], { MY_TOKEN: 'not-the-token' });
    expect(wrong.code).toBe(1);
    oneLine(wrong);
    expect(wrong.stderr).toContain('refused the token in $MY_TOKEN');
    expect(wrong.stderr).not.toContain('not-the-token');
    const unset = await rows([guarded.url, o, '--token-var', 'UNSET_VAR'], {});
    expect(unset.code).toBe(1);
    oneLine(unset);
    expect(unset.stderr).toContain('UNSET_VAR');
    expect(existsSync(o) ? await readdir(o) : []).toEqual([]);
  });

  it('an unwritable OUT: one line, exit 1, no half-written file', async () => {
    const d = path.dirname(await out());
    const file = path.join(d, 'a-file');
    await writeFile(file, 'x');
    for (const target of [file, path.join(file, 'below')]) {
      const r = await rows([open.url, target]);
      expect(r.code, target).toBe(1);
      oneLine(r);
      expect(r.stderr).toContain(`cannot write to ${target}`);
    }
    // a target file that is a folder: found before any file is renamed into place
    const o = await out();
    await mkdir(path.join(o, 'train.jsonl'), { recursive: true });
    await writeFile(path.join(o, 'all.jsonl'), 'old\n');
    const r = await rows([open.url, o]);
    expect(r.code).toBe(1);
    oneLine(r);
    expect(r.stderr).toContain('train.jsonl');
    expect((await readdir(o)).sort()).toEqual(['all.jsonl', 'train.jsonl']);
    expect(await readFile(path.join(o, 'all.jsonl'), 'utf8')).toBe('old\n');
  });

  it('pages through a large split (limit 1000) and shows progress on a terminal', async () => {
    const o = await out();
    const before = big.logs().length;
    const r = await rows([big.url, o], {}, true);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('] 1000/2345 tasks of train read');
    expect(r.stderr).toContain(`[${'#'.repeat(30)}] 2345/2345 tasks of train read`);
    const { allRows } = await checkRows(big, o, { url: big.url, tokenVar: null, maxTurns: 4, toolTimeout: 60, resetTimeout: 600, modelTimeout: 600 });
    expect(allRows).toHaveLength(2347);
    const trainRows = await readJsonl(path.join(o, 'train.jsonl'));
    expect(trainRows.map((x) => x.metadata.task_id)).toEqual(Array.from({ length: 2345 }, (_, i) => `big-${i}`));
    const pages =
      big
        .logs()
        .slice(before)
        .match(/\/tasks\?split=train&offset=\d+&limit=1000/g) ?? [];
    expect(new Set(pages)).toEqual(
      new Set(['/tasks?split=train&offset=0&limit=1000', '/tasks?split=train&offset=1000&limit=1000', '/tasks?split=train&offset=2000&limit=1000']),
    );
  });

  it('node dist/rows.js runs as a command with its exit codes', async () => {
    const bin = path.join(ROOT, 'dist/rows.js');
    expect(existsSync(bin), 'run `npm run build` first').toBe(true);
    const run = promisify(execFile);
    const o = await out();
    const ok = await run(process.execPath, [bin, open.url, o]);
    expect(ok.stdout).toBe(`wrote all.jsonl, eval.jsonl, train.jsonl to ${o}\n`);
    expect(ok.stderr).toBe('');
    const failed = await run(process.execPath, [bin, guarded.url, await out()]).then(
      () => null,
      (e: { code: number; stderr: string }) => e,
    );
    expect(failed?.code).toBe(1);
    expect(failed?.stderr.trimEnd().split('\n')).toHaveLength(1);
  });
});

describe('rows against gridsim-v1', () => {
  const present = existsSync(path.join(GRIDSIM, 'bundle.json'));
  let s: ProcessServer;
  let o: string;
  beforeAll(async () => {
    if (!present) return;
    // no env is deployed to write rows; the process sandbox only checks the env's entry script
    s = await startProcessServer({}, { bundle: GRIDSIM, sandbox: { entry: { gridsim: 'app/server.mjs' } } });
    o = path.join(await tmp(), 'data');
  }, 600_000);
  afterAll(async () => {
    await s?.stop();
    if (o) await rm(path.dirname(o), { recursive: true, force: true });
  });

  it.skipIf(!present)('writes a row per task of every split (2,000 train, 200 eval) with the gridsim toolset and end_turn', async () => {
    const r = await rows([s.url, o, '--token-var', 'AGENTENV_TOKEN'], { AGENTENV_TOKEN: 'unused-on-an-open-server' });
    expect(r.code).toBe(0);
    const { bundle, allRows } = await checkRows(s, o, {
      url: s.url,
      tokenVar: 'AGENTENV_TOKEN',
      maxTurns: 4,
      toolTimeout: 60,
      resetTimeout: 600,
      modelTimeout: 600,
    });
    const files = ['all.jsonl', ...Object.keys(bundle.splits).map((sp) => `${sp}.jsonl`)].sort();
    expect(r.stdout).toBe(`wrote ${files.join(', ')} to ${o}\n`);
    expect(bundle.splits).toMatchObject({ train: 2000, eval: 200 });
    expect(allRows).toHaveLength(Object.values(bundle.splits as Record<string, number>).reduce((a, b) => a + b, 0));
    const names = allRows[0].metadata.tools.map((t: { name: string }) => t.name);
    expect(names).toEqual(['get_situation', 'check_schedule', 'submit_schedule', 'end_turn']);
    for (const f of await readdir(o)) expect(await readFile(path.join(o, f), 'utf8')).not.toContain('unused-on-an-open-server');
    expect(s.sandbox.spawned).toBe(0);
  });
});
