/**
 * The docs' copy-paste walks run as pasted: the README quick start's `play` (typed, and piped),
 * the getting-started walk's `play`, `init`, `eval` and `rows` (its `check` and `serve` lines are
 * what `init` prints, which the docker layer runs as printed), and the curl session of docs/clients.md,
 * each block handed to bash as the page has it, against a GridSim server (envs as child
 * processes) whose address stands in for http://127.0.0.1:8200. What only a real engine serves
 * (the first build, `check` on Docker) is proven by the docker layer's GridSim and CLI tests.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../scripts/lib/wait.js';
import { sectionOf, shBlocksOf } from './support/markdown.js';
import { processSuiteServer } from './support/process-server.js';
import { startScriptedModel, type ScriptedModel } from './support/scripted-model.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const page = (name: string) => readFileSync(path.join(ROOT, name), 'utf8');
const TOKEN = 'docs-walks-token';

/** The fenced sh block under `heading` of `file` whose first line starts with `start`. */
function block(file: string, heading: string, start: string): string {
  const found = shBlocksOf(sectionOf(page(file), heading)).find((b) => b.startsWith(start));
  expect(found, `a block under ${heading} of ${file} starting ${start}`).toBeDefined();
  return found!;
}

/** The lines a block's `#   > line   comment` lines say to type, in order. */
function typed(script: string): string {
  return [...script.matchAll(/^#\s+> (.+?)(?: {2,}.*)?$/gm)].map((m) => `${m[1]}\n`).join('');
}

/** Runs `script` with each key of `replace` replaced; `--norc`: stdin being a socket would make bash read ~/.bashrc. */
function bash(script: string, replace: Record<string, string>, input = ''): Promise<{ code: number | null; out: string }> {
  let text = script;
  for (const [from, to] of Object.entries(replace)) text = text.replaceAll(from, to);
  return new Promise((resolve) => {
    const child = spawn('bash', ['--norc', '-e', '-o', 'pipefail', '-c', text], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, AGENTENV_TOKEN: TOKEN },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    child.on('exit', (code) => resolve({ code, out }));
    child.stdin.end(input);
  });
}

describe('the docs walks, pasted into a shell', () => {
  const s = processSuiteServer(
    { maxConcurrentEnvs: 2, token: TOKEN },
    { bundle: path.join(ROOT, 'bundles/gridsim-v1'), sandbox: { entry: { gridsim: 'app/server.mjs' } } },
  );
  const tmp = mkdtempSync(path.join(tmpdir(), 'docs-walks-'));
  let model: ScriptedModel | undefined;
  afterAll(async () => {
    await model?.close();
    rmSync(tmp, { recursive: true, force: true });
  });
  const LAST = 'episode over (finished): reward 0.2; scores schedule 0.2';

  it("README's quick start: play, typing the lines its comments show; the reward printed", async () => {
    const script = block('README.md', '## Quick start', 'npx openenv-bundle play');
    const input = typed(script);
    expect(input).toBe(`get_situation\nsubmit_schedule {"schedule": [${Array(24).fill(0).join(',')}]}\n`);
    const r = await bash(script, { 'http://127.0.0.1:8200': s.url }, input);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain('Settlement point:');
    expect(r.out.trimEnd().split('\n').at(-1)).toBe(LAST);
    expect(script).toContain('#   episode over (finished): reward 0.2 …');
  });

  it("README's quick start: the piped play, the lines played in order, the reward printed", async () => {
    const r = await bash(block('README.md', '## Quick start', "printf '%s\\n' get_situation"), { 'http://127.0.0.1:8200': s.url });
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain('Settlement point:');
    expect(r.out.trimEnd().split('\n').at(-1)).toBe(LAST);
  });

  it('getting started, step 2: play, as typed', async () => {
    const script = block('docs/getting-started.md', '## 2. Play a task', 'npx openenv-bundle play');
    const r = await bash(script, { 'http://127.0.0.1:8200': s.url }, `get_situation\nsubmit_schedule {"schedule": [${Array(24).fill(0).join(',')}]}\n`);
    expect(r.code, r.out).toBe(0);
    expect(r.out.trimEnd().split('\n').at(-1)).toBe(LAST);
  });

  it("getting started, steps 3 to 5: init as pasted; then check, serve and play as init prints them (the docker layer runs init's lines: test/cli/init-next-steps.docker.test.ts)", async () => {
    const dir = path.join(tmp, 'my-tasks');
    const init = block('docs/getting-started.md', '## 3. A bundle of your own', 'npx openenv-bundle init');
    const r = await bash(init, { 'my-tasks --env python': `my-tasks --env python --json --dir ${dir}` });
    expect(r.code, r.out).toBe(0);
    const next = (JSON.parse(r.out) as { next: Record<string, string> }).next;
    const printed = (key: string) => next[key]!.replaceAll(dir, 'my-tasks');
    const commands = (b: string) =>
      b
        .split('\n')
        .map((l) => l.replace(/\s+#.*$/, '').trim())
        .filter(Boolean);
    expect(commands(block('docs/getting-started.md', '## 4. Check it', 'bash docker/'))).toEqual([printed('offlineBase'), printed('offlineCheck')]);
    expect(commands(block('docs/getting-started.md', '## 5. Serve it', 'npx openenv-bundle serve'))).toEqual([
      `${printed('offlineServe')} &`,
      `${printed('play')} --token-var AGENTENV_TOKEN`,
    ]);
  });

  it('getting started, step 6: eval against an OpenAI-compatible endpoint (a scripted one that idles)', async () => {
    model = await startScriptedModel(() => ({ tool_calls: [{ name: 'submit_schedule', arguments: { schedule: Array(24).fill(0) } }] }), {
      models: ['my-model'],
    });
    const out = path.join(tmp, 'eval-my-tasks');
    const script = block('docs/getting-started.md', '## 6. Evaluate a model', 'npx openenv-bundle eval');
    // the walk's command, on the first 4 of GridSim's 200 eval tasks
    const r = await bash(`${script.trimEnd()} --tasks 4`, { 'http://127.0.0.1:8200': s.url, 'http://127.0.0.1:30000/v1': model.url, 'eval-my-tasks': out });
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain('my-model on gridsim-v1, split eval: 4 of 4 tasks played in ');
    expect(r.out).toContain('mean reward  0.2000');
    expect(readdirSync(out).sort()).toEqual(['episodes.jsonl', 'summary.json']);
  });

  it('getting started, step 7: the rows, one file per split and all.jsonl, as its comment says', async () => {
    const script = block('docs/getting-started.md', '## 7. Write the rows a trainer reads', 'npx openenv-bundle rows');
    const out = path.join(tmp, 'data');
    const r = await bash(script, { 'http://127.0.0.1:8200': s.url, ' data ': ` ${out} ` });
    expect(r.code, r.out).toBe(0);
    expect(readdirSync(out).sort()).toEqual(['all.jsonl', 'eval.jsonl', 'train.jsonl', 'wiring.jsonl']);
    expect(script).toContain('#   wrote all.jsonl, eval.jsonl, train.jsonl to data');
  });

  it('clients: the curl session over /episodes: an idle day scores 0.2, the episode is read, listed and deleted', async () => {
    const r = await bash(block('docs/clients.md', '## A curl session over `/episodes`', 'S=http://127.0.0.1:8200'), { 'http://127.0.0.1:8200': s.url });
    expect(r.code, r.out).toBe(0);
    const lines = r.out.split('\n');
    expect(lines[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(r.out).toContain('"reward":0.2,"done":true');
    expect(r.out).toContain(`{"episode_id":"${lines[0]}"`);
    expect(r.out).toContain('"capacity":2');
    await waitFor(() => s.sandbox.live().length === 0, 10_000, 'the episode torn down');
  });
});
