/**
 * Every command as a user types it: the built `openenv-bundle` (and `node dist/serve.js`,
 * `node dist/rows.js`) run as child processes, their output and exit codes asserted. The
 * servers they talk to run in this process with envs as child processes (no Docker); what needs
 * an engine (check playing on Docker, serve serving, init's next steps run as printed) is in
 * check-command.docker.test.ts and init-next-steps.docker.test.ts.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SUBCOMMANDS } from '../../src/cli/commands.js';
import { FIXTURE_BUNDLE, processSuiteServer } from '../support/process-server.js';
import { fixtureGolden } from '../support/fixture-policy.js';
import { startScriptedModel, type ScriptedModel } from '../support/scripted-model.js';
import { waitFor } from '../../scripts/lib/wait.js';

const DIST = fileURLToPath(new URL('../../dist/', import.meta.url));
const CLI = path.join(DIST, 'cli/openenv-bundle.js');
const GRIDSIM = fileURLToPath(new URL('../../bundles/gridsim-v1', import.meta.url));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `node SCRIPT ARGS` with `input` on stdin; resolves when it exits (the servers it talks to live in this process, so never spawnSync) */
function run(script: string, args: string[], opts: { input?: string; env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], {
      cwd: opts.cwd,
      env: { PATH: process.env.PATH, ...opts.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(opts.input ?? '');
  });
}

const openenvBundle = (args: string[], opts?: Parameters<typeof run>[2]) => run(CLI, args, opts);

/** Which test below proves each command as a process: a command added to the list needs its test here (`import` too, once it lands). */
const PROVEN: Record<string, string> = {
  serve: 'serve',
  init: 'init',
  check: 'check',
  pack: 'pack',
  build: 'test/cli/build-command.docker.test.ts, "openenv-bundle build, run as a process" (and test/cli/build.test.ts: no engine)',
  import: 'test/harbor/import.test.ts, "openenv-bundle import harbor, the built binary"',
  play: 'play',
  eval: 'eval',
  rows: 'rows',
};

let tmp: string;
beforeAll(async () => {
  expect(existsSync(CLI), 'run `npm run build` first').toBe(true);
  tmp = await mkdtemp(path.join(tmpdir(), 'openenv-commands-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

// each test starts several node processes one after another (a second or two each on a loaded
// 2-core machine): more than the fast layer's 30 s per test
describe('the openenv-bundle command line, run as a process', { timeout: 120_000 }, () => {
  it('has a process test below for every command it lists', async () => {
    expect(Object.keys(PROVEN).sort()).toEqual(SUBCOMMANDS.map((c) => c.name).sort());
    const help = await openenvBundle(['--help']);
    expect(help.code).toBe(0);
    for (const c of SUBCOMMANDS) expect(help.stdout).toContain(`  ${c.name} `);
    const none = await openenvBundle([]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('Usage: openenv-bundle <command>');
    const typo = await openenvBundle(['chek', 'x']);
    expect(typo).toMatchObject({ code: 2, stdout: '' });
    expect(typo.stderr).toContain("error: unknown command 'chek'");
  });

  describe('serve', () => {
    it('--help under either name; a command line to fix exits 2, naming the flag and where the help is', async () => {
      for (const [script, args, prog] of [
        [CLI, ['serve'], 'openenv-bundle serve'],
        [path.join(DIST, 'serve.js'), [], 'node dist/serve.js'],
      ] as const) {
        const help = await run(script, [...args, '--help']);
        expect(help.code).toBe(0);
        expect(help.stdout).toMatch(new RegExp(`^Usage: ${prog} BUNDLE \\[options\\]`));
        expect(help.stdout).toMatch(/--max-concurrent-envs N +envs running at once.*\n +default: 8; env: OPENENV_MAX_CONCURRENT_ENVS\n/);
        const bad = await run(script, [...args, FIXTURE_BUNDLE, '--max-concurrent-envs', 'many']);
        expect(bad).toMatchObject({ code: 2, stdout: '' });
        expect(bad.stderr).toBe(`error: --max-concurrent-envs: Expected number, received nan\nRun '${prog} --help' for its arguments and options.\n`);
      }
    });

    it('an invalid bundle exits 1 naming the file and line; without a reachable engine it exits 1 saying so, never hangs', async () => {
      const dir = path.join(tmp, 'broken-bundle');
      await rm(dir, { recursive: true, force: true });
      const { cp } = await import('node:fs/promises');
      await cp(FIXTURE_BUNDLE, dir, { recursive: true });
      await writeFile(path.join(dir, 'tasks/eval.jsonl'), `${JSON.stringify({ task_id: 'x', toolset: 'echo', system_prompt: 's', turns: [] })}\n`, {
        flag: 'a',
      });
      const invalid = await openenvBundle(['serve', dir, '--port', '0']);
      expect(invalid.code).toBe(1);
      expect(invalid.stderr).toMatch(/tasks\/eval\.jsonl line 3, field "turns"/);
      const noEngine = await openenvBundle(['serve', FIXTURE_BUNDLE, '--port', '0', '--instance', 'no-engine'], {
        env: { DOCKER_HOST: 'unix:///nonexistent/no-engine.sock', LOG_LEVEL: 'info' },
      });
      expect(noEngine.code).toBe(1);
      expect(noEngine.stdout + noEngine.stderr).toContain('cannot serve episodes; stopping');
      expect(noEngine.stderr).not.toContain('exited without a result');
    });

    it('a failed start-up logs its reason once (the runtime), and the exit does not repeat it', async () => {
      const noEngine = await openenvBundle(['serve', FIXTURE_BUNDLE, '--port', '0', '--instance', 'once-no-engine'], {
        env: { DOCKER_HOST: 'unix:///nonexistent/once-no-engine.sock', LOG_LEVEL: 'info' },
      });
      expect(noEngine.code).toBe(1);
      const lines = (noEngine.stdout + noEngine.stderr)
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      const telling = lines.filter((l) => JSON.stringify(l).includes('the Docker engine is unreachable'));
      expect(telling).toEqual([expect.objectContaining({ level: 50, msg: 'the server cannot serve episodes' })]);
      const fatal = lines.filter((l) => l.level === 60);
      expect(fatal).toEqual([expect.objectContaining({ msg: 'cannot serve episodes; stopping' })]);
      expect(fatal[0]).not.toHaveProperty('err');
    });
  });

  describe('init', () => {
    it('writes the bundle, prints its files and the commands to run next; never overwrites (exit 1)', async () => {
      const dir = path.join(tmp, 'my-tasks');
      const r = await openenvBundle(['init', 'my-tasks', '--env', 'python'], { cwd: tmp });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain('wrote bundle my-tasks (python env) to my-tasks:');
      expect(r.stdout).toContain('  envs/qa/server.py');
      // outside the clone, the next steps name this very command by its path (init-next-steps.docker.test.ts runs them)
      expect(r.stdout).toContain(`\nNext:\n  node ${CLI} check my-tasks   # builds the env`);
      expect(r.stdout).toContain(`  node ${CLI} serve my-tasks --build-arg PYTHON_IMAGE=openenv-local/python:3\n`);
      expect((await readdir(dir)).sort()).toEqual(['README.md', 'bundle.json', 'envs', 'tasks']);
      const again = await openenvBundle(['init', 'my-tasks'], { cwd: tmp });
      expect(again).toMatchObject({ code: 1, stdout: '' });
      expect(again.stderr).toBe('error: my-tasks already exists and is not empty: init never overwrites; pick another --dir or NAME\n');
      // inside the clone, npx finds the command
      const json = await openenvBundle(['init', 'other', '--dir', path.join(tmp, 'other'), '--json']);
      expect(JSON.parse(json.stdout)).toMatchObject({
        name: 'other',
        env: 'node',
        build_arg: 'NODE_IMAGE',
        next: { check: `npx openenv-bundle check ${path.join(tmp, 'other')}` },
      });
      const usage = await openenvBundle(['init']);
      expect(usage.code).toBe(2);
      expect(usage.stderr).toContain('error: missing NAME');
    });
  });

  describe('check', () => {
    it('--static: a good bundle says ok (exit 0), a broken one names the problem (exit 1), --json parses, a bad flag exits 2', async () => {
      const dir = path.join(tmp, 'static-check');
      expect((await openenvBundle(['init', 'static-check', '--dir', dir])).code).toBe(0);
      const ok = await openenvBundle(['check', dir, '--static']);
      expect(ok.code, ok.stdout + ok.stderr).toBe(0);
      expect(ok.stdout).toBe(
        `check ${dir}\n  files: 5 task(s) in 2 split(s), 1 toolset(s), 2 tool(s)\n` +
          "  env qa: locked down under runc, default capabilities, writable root, the image's user, storage 2048 MB, max files 100000\nok: no problem\n",
      );
      const json = await openenvBundle(['check', dir, '--static', '--json']);
      expect(JSON.parse(json.stdout)).toMatchObject({
        ok: true,
        problems: [],
        warnings: [],
        played: null,
        // a default server's bounds of the writable layer, the bundle setting none
        granted: {
          qa: { added: [], no_new_privileges: true, init: true, root: 'writable', runtime: 'runc', memory_mb: 128, storage_mb: 2048, max_files: 100_000 },
        },
      });
      const manifest = path.join(dir, 'bundle.json');
      // what an env asks for by name is what check says it is granted
      const plain = await readFile(manifest, 'utf8');
      const asking = JSON.parse(plain);
      asking.envs.qa.security = { capabilities: ['NET_RAW'], root: 'read-only', tmp_mb: 16, user: '1000', runtime: 'runsc' };
      asking.envs.qa.resources = { ...asking.envs.qa.resources, storage_mb: 64, max_files: 5000 };
      await writeFile(manifest, JSON.stringify(asking));
      const asked = await openenvBundle(['check', dir, '--static']);
      expect(asked.stdout).toContain(
        '  env qa: locked down under runsc, capabilities the defaults and NET_RAW, read-only root (/tmp 16 MB), user 1000, storage 64 MB, max files 5000\n',
      );
      await writeFile(manifest, plain);
      await writeFile(manifest, (await readFile(manifest, 'utf8')).replace('"reward": "correct"', '"reward": "right"'));
      const broken = await openenvBundle(['check', dir, '--static']);
      expect(broken.code).toBe(1);
      expect(broken.stdout).toMatch(/^ {2}problem: bundle\.json, field "reward": the reward is the score "right"/m);
      expect(broken.stdout).toMatch(/^1 problem\(s\), 0 warning\(s\)$/m);
      const usage = await openenvBundle(['check', dir, '--concurrency', '0']);
      expect(usage.code).toBe(2);
      expect(usage.stderr).toMatch(/^error: --concurrency: Number must be greater than 0\n/);
    });
  });

  describe('pack', () => {
    it('packs a bundle into an archive named by its hash, the same twice; a folder that is no bundle exits 1', async () => {
      const out = path.join(tmp, 'packed');
      const first = await openenvBundle(['pack', FIXTURE_BUNDLE, '-o', out, '--json']);
      expect(first.code, first.stderr).toBe(0);
      const packed = JSON.parse(first.stdout) as { file: string; sha256: string };
      expect(path.basename(packed.file)).toMatch(new RegExp(`^fixture-v1-.*-${packed.sha256.slice(0, 12)}\\.tar\\.gz$`));
      const again = await openenvBundle(['pack', FIXTURE_BUNDLE, '-o', out]);
      expect(again.code).toBe(0);
      expect(again.stdout).toContain(`sha256 ${packed.sha256}`);
      expect(again.stdout).toContain(`serve it: npx openenv-bundle serve ${packed.file}`);
      const none = await openenvBundle(['pack', tmp, '-o', out]);
      expect(none.code).toBe(1);
      expect(none.stderr).toMatch(/^error: .*bundle\.json/);
    });
  });
});

describe('the commands that talk to a running server, run as processes', () => {
  const TOKEN = 'commands-as-processes-token';
  const s = processSuiteServer({ maxConcurrentEnvs: 2, token: TOKEN }, { bundle: FIXTURE_BUNDLE });
  const env = { SERVER_TOKEN: TOKEN };
  let model: ScriptedModel;
  beforeAll(async () => {
    model = await startScriptedModel(fixtureGolden, { models: ['scripted'] });
  });
  afterAll(() => model.close());

  describe('play', () => {
    it('plays the task by the lines piped in, none lost while the env deploys, and ends with the reward (exit 0)', async () => {
      const r = await openenvBundle(['play', s.url, '--task', 'fx-echo-0', '--token-var', 'SERVER_TOKEN'], {
        env,
        input: ['tools', 'echo {"text": "hello"}', 'echo {text}', 'nope', 'end done'].join('\n'),
      });
      expect(r.code, r.stdout + r.stderr).toBe(0);
      const out = r.stdout;
      expect(out).toContain('task fx-echo-0 (split train, index 0), turn 1 of 1');
      expect(out).toContain('user:\n  Echo the word hello, then end your turn.');
      expect(out).toMatch(/tools:\n {2}echo \{text: string\}/);
      // each line's answer, in order: the echo, a mistake caught before sending, the unknown tool, the end
      const at = (s: string) => out.indexOf(s);
      expect(at('\nhello\n')).toBeGreaterThan(0);
      expect(at('the arguments are not JSON')).toBeGreaterThan(at('\nhello\n'));
      expect(at('error (tool_not_found)')).toBeGreaterThan(at('the arguments are not JSON'));
      expect(out.trimEnd().split('\n').at(-1)).toBe('episode over (turns_ended): reward 0.5; scores quality 0.5');
    });

    it('Ctrl-C while it waits for a line closes the episode: the server tears the env down, exit 1', async () => {
      const child = spawn(process.execPath, [CLI, 'play', s.url, '--task', 'fx-echo-1', '--token-var', 'SERVER_TOKEN'], {
        env: { PATH: process.env.PATH, ...env },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString()));
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      try {
        await waitFor(() => out.includes('type a tool') && s.sandbox.live().length === 1, 20_000, 'the episode to run and play to wait for a line');
        child.kill('SIGINT');
        expect(await exited).toBe(1);
      } finally {
        child.kill('SIGKILL');
      }
      expect(out).toContain('interrupted: closing the episode');
      await waitFor(() => s.sandbox.live().length === 0, 10_000, 'the env torn down');
    });

    it("an unknown task exits 1 with the server's answer; --task with --split exits 2; a wrong token exits 1", async () => {
      const unknown = await openenvBundle(['play', s.url, '--task', 'nope', '--token-var', 'SERVER_TOKEN'], { env });
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toMatch(/^error: the reset was refused: VALIDATION_ERROR: .*nope/);
      const both = await openenvBundle(['play', s.url, '--task', 'fx-echo-0', '--split', 'train']);
      expect(both.code).toBe(2);
      expect(both.stderr).toContain('error: --task names the task by itself');
      const refused = await openenvBundle(['play', s.url, '--task', 'fx-echo-0']);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('HTTP 401 (the server needs its bearer token)');
    });
  });

  describe('rows', () => {
    it('writes the rows under either name (exit 0); an unreachable server exits 1 in one line', async () => {
      for (const [script, args] of [
        [CLI, ['rows']],
        [path.join(DIST, 'rows.js'), []],
      ] as const) {
        const out = path.join(tmp, `rows-${path.basename(script)}`);
        const r = await run(script, [...args, s.url, out, '--token-var', 'SERVER_TOKEN', '--max-turns', '3'], { env });
        expect(r.code, r.stderr).toBe(0);
        expect(r.stdout).toBe(`wrote all.jsonl, eval.jsonl, train.jsonl to ${out}\n`);
        const [row] = (await readFile(path.join(out, 'eval.jsonl'), 'utf8')).split('\n');
        expect(JSON.parse(row!).metadata.server).toMatchObject({ url: s.url, max_turns: 3, token_var: 'SERVER_TOKEN' });
      }
      const dead = await openenvBundle(['rows', 'http://127.0.0.1:9', path.join(tmp, 'rows-dead')]);
      expect(dead.code).toBe(1);
      expect(dead.stderr).toMatch(/^error: cannot reach the server at http:\/\/127\.0\.0\.1:9: .*\n$/);
    });
  });

  describe('eval', () => {
    it('plays the split and prints the mean reward, each score beside it, and where it wrote (exit 0)', async () => {
      const out = path.join(tmp, 'eval-out');
      const r = await openenvBundle(['eval', s.url, '--model-url', model.url, '--model', 'scripted', '--token-var', 'SERVER_TOKEN', '--out', out], { env });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain('scripted on fixture-v1, split eval: 2 of 2 tasks played in ');
      expect(r.stdout).toContain('  mean reward  0.5000 ± 0.4000 (± standard error) over 2 scored episodes; zero scores 0.0 %\n  scores       ');
      expect(r.stdout).toContain(`  wrote ${out}/episodes.jsonl and ${out}/summary.json\n`);
      const unserved = await openenvBundle(
        ['eval', s.url, '--model-url', model.url, '--model', 'other', '--token-var', 'SERVER_TOKEN', '--out', path.join(tmp, 'e2')],
        { env },
      );
      expect(unserved.code).toBe(1);
      expect(unserved.stderr).toBe(
        'error: the model endpoint serves "scripted", not "other": pass one of them as --model (model_http_error; nothing was deployed)\n',
      );
    });
  });
});

describe('play on GridSim, as the README quick start plays it', () => {
  const TOKEN = 'gridsim-play-token';
  const s = processSuiteServer({ maxConcurrentEnvs: 1, token: TOKEN }, { bundle: GRIDSIM, sandbox: { entry: { gridsim: 'app/server.mjs' } } });

  it('get_situation, then an idle schedule: reward 0.2', async () => {
    const r = await openenvBundle(['play', s.url, '--split', 'eval', '--index', '0', '--token-var', 'AGENTENV_TOKEN'], {
      env: { AGENTENV_TOKEN: TOKEN },
      input: `get_situation\nsubmit_schedule {"schedule": [${Array(24).fill(0).join(',')}]}\n`,
    });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(/tools:\n {2}get_situation \{\}/);
    expect(r.stdout.trimEnd().split('\n').at(-1)).toBe('episode over (finished): reward 0.2; scores schedule 0.2');
  });
});
