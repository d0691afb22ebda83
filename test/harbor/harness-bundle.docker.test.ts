/**
 * A bundle made with `import harbor --agent` (each task a harness episode: the server runs the
 * shipped harness in the env, its model called through the gateway), all the way, as a user runs
 * it: the built CLI as child processes on real Docker. The shipped dataset's fix-median task
 * imported with `--agent 'python3 /tmp/openenv/openenv_harness.py'`; `check --json` plays it with
 * a scripted model through the gateway (golden at max, empty at the floor) under the --instance
 * and --subnet-pool given; a harness that is not the shipped one is checked by its empty run, said
 * plainly; served with a scripted model as the gateway's upstream, its rows say harness: true with
 * the one tool `wait` and the instruction as the harness gets it, and `eval` with no --model-url
 * records each episode's model calls and tokens.
 */
import { spawn } from 'node:child_process';
import { cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scriptOf } from '../../src/authoring/check-harness.js';
import { ScriptedModel } from '../../src/authoring/scripted-model.js';
import { loadBundle } from '../../src/bundle/index.js';
import { describeDocker, labelledResources, uniqueInstance } from '../support/docker.js';
import { INSTANCE_LABEL } from '../support/docker-server.js';
import { spawnServer, type ServerProcess } from '../support/serve-process.js';
import { BASE_IMAGE_RULE, DATASET, ensureDebianBase } from './helpers.js';

const CLI = path.resolve(import.meta.dirname, '../../dist/cli/openenv-bundle.js');
const AGENT = 'python3 /tmp/openenv/openenv_harness.py';
const TASK = 'fix-median';

/** the CLI as a child process, not blocking this one (the scripted model answers from here) */
function run(args: string[], timeoutMs = 600_000): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', reject);
    child.once('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

async function importWith(tmp: string, name: string, agent: string): Promise<string> {
  const src = path.join(tmp, `${name}-src`);
  await cp(path.join(DATASET, TASK), path.join(src, TASK), { recursive: true });
  const out = path.join(tmp, name);
  const r = await run(['import', 'harbor', src, '--out', out, '--base-image', BASE_IMAGE_RULE, '--agent', agent]);
  expect(r.status, r.stdout + r.stderr).toBe(0);
  return out;
}

const pool = () => `10.229.${Math.floor(Math.random() * 250)}.0/24`;

describeDocker('a bundle imported with --agent: check, rows and eval', () => {
  let tmp: string;
  let bundleDir: string;
  beforeAll(async () => {
    ensureDebianBase();
    tmp = await mkdtemp(path.join(tmpdir(), 'harbor-harness-'));
    bundleDir = await importWith(tmp, 'harness', AGENT);
  }, 300_000);
  afterAll(async () => {
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('check --json plays it through the gateway with a scripted model: golden at max, empty at the floor, under --instance and --subnet-pool', async () => {
    const instance = uniqueInstance('check-harness');
    const r = await run(['check', bundleDir, '--tasks', 'all', '--json', '--instance', instance, '--subnet-pool', pool()]);
    expect(r.status, r.stdout + r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as {
      ok: boolean;
      problems: unknown[];
      warnings: unknown[];
      played: { instance: string; golden: { passed: number; played: number; reward: number }; empty: { passed: number; played: number; reward: number } };
    };
    expect(report.ok).toBe(true);
    expect(report.problems).toEqual([]);
    expect(report.warnings).toEqual([]);
    expect(report.played.instance).toBe(instance);
    expect(report.played.golden).toMatchObject({ passed: 1, played: 1, reward: 1 });
    expect(report.played.empty).toMatchObject({ passed: 1, played: 1, reward: 0 });
    expect(labelledResources(`${INSTANCE_LABEL}=${instance}`)).toEqual({ containers: [], networks: [] });
  }, 600_000);

  it('a harness that is not the shipped one: check plays the empty run only and says so, and how that run ended', async () => {
    const other = await importWith(tmp, 'other-harness', 'echo "no model here" >&2; exit 3');
    const r = await run(['check', other, '--tasks', 'all', '--json', '--subnet-pool', pool()]);
    expect(r.status, r.stdout + r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as {
      ok: boolean;
      warnings: { where: string; message: string }[];
      played: { golden: { played: number }; empty: { passed: number; played: number } };
    };
    expect(report.ok).toBe(true);
    expect(report.played.golden.played).toBe(0);
    expect(report.played.empty).toMatchObject({ passed: 1, played: 1 });
    expect(report.warnings.map((w) => w.message)).toEqual([
      expect.stringMatching(/is not the shipped harness .*check played the empty run only .*the golden solution was not played/),
      expect.stringMatching(/^the empty play's harness exited with 3 after 0 model call\(s\); its output's last lines:\n +no model here$/),
    ]);
    expect(r.stdout).not.toContain('did not end the episode');
  }, 600_000);

  describe('served with a scripted model as the gateway upstream', () => {
    let model: ScriptedModel;
    let srv: ServerProcess;
    let instruction: string;
    const instance = uniqueInstance('harness-eval');
    beforeAll(async () => {
      const b = await loadBundle(bundleDir);
      const task = [...b.byId.values()][0]!;
      instruction = task.turns[0]!;
      const script = scriptOf(task, task.golden ?? []);
      await b.cleanup();
      if ('cannot' in script) throw new Error(script.cannot);
      model = new ScriptedModel();
      await model.start();
      srv = await spawnServer([
        bundleDir,
        '--port',
        '0',
        '--instance',
        instance,
        '--subnet-pool',
        pool(),
        '--max-concurrent-envs',
        '2',
        '--model-url',
        model.add(script),
      ]);
    }, 300_000);
    afterAll(async () => {
      if (srv && srv.child.exitCode === null) {
        srv.child.kill('SIGTERM');
        expect((await srv.exited).code).toBe(0);
      }
      await model?.close();
      expect(labelledResources(`${INSTANCE_LABEL}=${instance}`)).toEqual({ containers: [], networks: [] });
    });

    it('rows: harness: true, the one tool wait, the instruction as the harness gets it', async () => {
      const out = path.join(tmp, 'rows');
      const r = await run(['rows', srv.url, out]);
      expect(r.status, r.stdout + r.stderr).toBe(0);
      const rows = (await readFile(path.join(out, 'all.jsonl'), 'utf8'))
        .trim()
        .split('\n')
        .map(
          (l) => JSON.parse(l) as { messages: { role: string; content: string }[]; tools: { function: { name: string } }[]; metadata: Record<string, unknown> },
        );
      expect(rows).toHaveLength(1);
      const row = rows[0]!;
      expect(row.metadata.harness).toBe(true);
      expect(row.metadata.tools).toEqual([row.tools[0]!.function]);
      expect(row.tools.map((t) => t.function.name)).toEqual(['wait']);
      expect(row.messages).toEqual([{ role: 'user', content: instruction }]);
    }, 120_000);

    it('eval with no --model-url: each episode scored, its harness model calls and tokens recorded', async () => {
      const out = path.join(tmp, 'eval');
      const calls = model.calls;
      const r = await run(['eval', srv.url, '--split', 'train', '--out', out]);
      expect(r.status, r.stdout + r.stderr).toBe(0);
      const recs = (await readFile(path.join(out, 'episodes.jsonl'), 'utf8'))
        .trim()
        .split('\n')
        .map(
          (l) =>
            JSON.parse(l) as {
              reward: number | null;
              failure: unknown;
              harness: { model_calls: number; model_tokens: number; exit_code: number | null } | null;
            },
        );
      expect(recs).toHaveLength(1);
      const rec = recs[0]!;
      expect(rec.failure).toBeNull();
      expect(rec.reward).toBe(1);
      // the golden solve as one bash call, then "done": two model calls, both through the gateway to the scripted model
      expect(rec.harness).toMatchObject({ model_calls: 2, exit_code: 0 });
      expect(rec.harness!.model_tokens).toBeGreaterThan(0);
      expect(model.calls - calls).toBe(2);
      const summary = JSON.parse(await readFile(path.join(out, 'summary.json'), 'utf8')) as {
        harness: { episodes: number; model_calls: number; model_tokens: number };
      };
      expect(summary.harness).toMatchObject({ episodes: 1, model_calls: 2 });
      expect(summary.harness.model_tokens).toBe(rec.harness!.model_tokens);
      expect(r.stdout).toMatch(/harness +2 model call\(s\)/);
    }, 300_000);

    it('eval given a --model-url for harness tasks only: never called (an address nothing answers on), said on stderr', async () => {
      const r = await run([
        'eval',
        srv.url,
        '--split',
        'train',
        '--model-url',
        'http://127.0.0.1:9/v1',
        '--model',
        'unused',
        '--out',
        path.join(tmp, 'eval-unused'),
      ]);
      expect(r.status, r.stdout + r.stderr).toBe(0);
      expect(r.stderr).toContain(
        "note: --model-url http://127.0.0.1:9/v1 was not used: every task played is a harness task, whose harness calls the server's gateway upstream",
      );
    }, 300_000);
  });
});
