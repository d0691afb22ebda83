/**
 * `openenv-bundle import harbor` without Docker: every mapping rule of task.toml and the task
 * folder, every refusal and note by name, the offline base-image map, the splits, where the
 * bundle is written (and that nothing is when a task is refused), and the command as users run
 * it (the built binary): the shipped dataset imports and passes `check --static`.
 */
import { execFile, execFileSync, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { importHarbor, mapDockerfileImages, parseBaseImageRule, parseImageRef, type ImportOptions } from '../../src/authoring/harbor/index.js';
import { loadBundle } from '../../src/bundle/index.js';
import { DATASET } from './helpers.js';

const run = promisify(execFile);
const CLI = path.resolve(import.meta.dirname, '../../dist/cli/openenv-bundle.js');
const made: string[] = [];
afterAll(() => {
  for (const d of made) rmSync(d, { recursive: true, force: true });
});

function temp(): string {
  const d = mkdtempSync(path.join(os.tmpdir(), 'harbor-import-'));
  made.push(d);
  return d;
}

const SIMPLE_TOML = `version = "1.0"
[metadata]
difficulty = "easy"
category = "files"
tags = ["b", "a"]
author_name = "someone"
[agent]
timeout_sec = 90.0
[verifier]
timeout_sec = 45.0
[verifier.env]
STRICT = "1"
[solution.env]
GREETING = "it's me"
[environment]
build_timeout_sec = 600.0
cpus = 2
memory_mb = 1536
storage_mb = 4096
workdir = "/app"
allow_internet = false
[environment.env]
APP_MODE = "test"
`;

/** writes a Harbor task folder: `files` relative path → content (defaults: a valid simple task) */
function task(root: string, id: string, files: Record<string, string | null> = {}): string {
  const dir = path.join(root, id);
  const all: Record<string, string | null> = {
    'instruction.md': 'Create hello.txt.\n',
    'task.toml': SIMPLE_TOML,
    'environment/Dockerfile': 'FROM debian:bookworm\nWORKDIR /app\nCOPY input.txt /app/\n',
    'environment/input.txt': 'data\n',
    'solution/solve.sh': '#!/bin/bash\necho "Hello" > hello.txt\n',
    'tests/test.sh': '#!/bin/bash\n[ -f /app/hello.txt ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n',
    ...files,
  };
  for (const [rel, content] of Object.entries(all)) {
    if (content === null) continue;
    mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    writeFileSync(path.join(dir, rel), content);
  }
  return dir;
}

const STEPS_TOML = `schema_version = "1.1"
multi_step_reward_strategy = "final"
[agent]
timeout_sec = 100.0
[verifier]
timeout_sec = 20.0
[verifier.env]
SHARED = "yes"
[environment]
allow_internet = false
workdir = "/app"
[environment.healthcheck]
command = "true"
interval_sec = 1
retries = 2
[[steps]]
name = "one"
min_reward = 1.0
[steps.agent]
timeout_sec = 30.0
[[steps]]
name = "two"
min_reward = { correctness = 0.5 }
[steps.verifier]
timeout_sec = 40.0
[steps.verifier.env]
ONLY_TWO = "2"
[steps.healthcheck]
command = "test -f config.txt"
timeout_sec = 3
`;

function stepsTask(root: string, id = 'steps-task'): string {
  return task(root, id, {
    'task.toml': STEPS_TOML,
    'instruction.md': null,
    'solution/solve.sh': null,
    'tests/test.sh': null,
    'tests/helpers.sh': 'pass() { echo 1 > /logs/verifier/reward.txt; }\n',
    'steps/one/instruction.md': 'Do one.\n',
    'steps/one/tests/test.sh': 'source /tests/helpers.sh; pass\n',
    'steps/one/solution/solve.sh': 'echo one\n',
    'steps/two/instruction.md': 'Do two.\n',
    'steps/two/tests/test.sh': 'source /tests/helpers.sh; pass\n',
    'steps/two/tests/helpers.sh': 'pass() { echo 0.5 > /logs/verifier/reward.txt; }\n',
    'steps/two/solution/solve.sh': 'echo two\n',
    'steps/two/workdir/config.txt': 'x\n',
    'steps/two/workdir/setup.sh': 'rm -- "$0"\n',
  });
}

function opts(sources: string[], out: string, more: Partial<ImportOptions> = {}): ImportOptions {
  return { sources, out, baseImages: [], ignoreInternet: false, skipRefused: false, force: false, ...more };
}

const lines = (file: string) =>
  readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, any>);

describe('base images', () => {
  it('reads references as repository, tag and digest, Docker Hub spelled out', () => {
    expect(parseImageRef('debian')).toMatchObject({ repository: 'docker.io/library/debian', tag: 'latest', digest: null });
    expect(parseImageRef('python:3.12-slim')).toMatchObject({ repository: 'docker.io/library/python', tag: '3.12-slim' });
    expect(parseImageRef('ghcr.io/astral-sh/uv:latest')).toMatchObject({ repository: 'ghcr.io/astral-sh/uv', tag: 'latest' });
    expect(parseImageRef('localhost:5000/x/y')).toMatchObject({ repository: 'localhost:5000/x/y', tag: 'latest' });
    expect(parseImageRef('index.docker.io/library/ubuntu:24.04')).toMatchObject({ repository: 'docker.io/library/ubuntu', tag: '24.04' });
    expect(parseImageRef('public.ecr.aws/docker/library/debian:bookworm-slim@sha256:abc')).toMatchObject({
      repository: 'public.ecr.aws/docker/library/debian',
      tag: 'bookworm-slim',
      digest: 'sha256:abc',
    });
    expect(parseImageRef('${BASE}')).toBeNull();
  });

  it('maps FROM and COPY --from by repository and tag, sets a pinned digest aside, and keeps the old line as a comment', () => {
    const rules = [
      parseBaseImageRule('public.ecr.aws/docker/library/debian:bookworm-slim=openenv-local/debian:bookworm'),
      parseBaseImageRule('ubuntu=openenv-local/debian:bookworm'),
      parseBaseImageRule('ghcr.io/astral-sh/uv:latest=local/uv:1'),
    ];
    const df = [
      'ARG PY=3.12',
      'FROM public.ecr.aws/docker/library/debian:bookworm-slim@sha256:0123 AS base',
      'FROM base AS build',
      'COPY --from=ghcr.io/astral-sh/uv:latest /uv /bin/',
      'COPY --from=build /x /y',
      'FROM --platform=linux/amd64 ubuntu:24.04',
      'FROM python:${PY}-slim',
      'FROM scratch',
      'FROM docker.io/library/debian:bookworm-slim',
    ].join('\n');
    const m = mapDockerfileImages(df, rules);
    expect(m.mapped).toEqual([
      { from: 'public.ecr.aws/docker/library/debian:bookworm-slim@sha256:0123', to: 'openenv-local/debian:bookworm', digestSetAside: true },
      { from: 'ghcr.io/astral-sh/uv:latest', to: 'local/uv:1', digestSetAside: false },
      { from: 'ubuntu:24.04', to: 'openenv-local/debian:bookworm', digestSetAside: false },
    ]);
    // a tagged rule matches only its tag: debian:bookworm-slim of Docker Hub is another repository than ECR's
    expect(m.images).toEqual(['openenv-local/debian:bookworm', 'local/uv:1', 'python:3.12-slim', 'docker.io/library/debian:bookworm-slim']);
    expect(m.text.split('\n')).toEqual([
      'ARG PY=3.12',
      '# openenv-bundle import: was FROM public.ecr.aws/docker/library/debian:bookworm-slim@sha256:0123 AS base',
      'FROM openenv-local/debian:bookworm AS base',
      'FROM base AS build',
      '# openenv-bundle import: was COPY --from=ghcr.io/astral-sh/uv:latest /uv /bin/',
      'COPY --from=local/uv:1 /uv /bin/',
      'COPY --from=build /x /y',
      '# openenv-bundle import: was FROM --platform=linux/amd64 ubuntu:24.04',
      'FROM --platform=linux/amd64 openenv-local/debian:bookworm',
      'FROM python:${PY}-slim',
      'FROM scratch',
      'FROM docker.io/library/debian:bookworm-slim',
    ]);
    expect(mapDockerfileImages('FROM ${NOPE}\n', []).unresolved).toEqual(['${NOPE}']);
  });

  it('refuses a malformed --base-image', () => {
    expect(() => parseBaseImageRule('debian')).toThrow(/expects FROM=LOCAL/);
    expect(() => parseBaseImageRule('debian@sha256:1=x')).toThrow(/not an image repository/);
  });
});

describe('import harbor: the mapping', () => {
  it('maps a task of one step: prompt, budget, verifier, env settings, groups, golden bash call; tests and solution never in the build context', async () => {
    const root = temp();
    task(root, 'hello-task');
    const out = path.join(root, 'out');
    const r = await importHarbor(opts([root], out, { baseImages: [parseBaseImageRule('debian:bookworm=openenv-local/debian:bookworm')], name: 'hello-v1' }));
    expect(r).toMatchObject({
      written: true,
      bundle: 'hello-v1',
      refused: [],
      tasks: [{ id: 'hello-task', split: 'train', turns: 1, env: 'hello-task', golden: true }],
    });
    const manifest = JSON.parse(readFileSync(path.join(out, 'bundle.json'), 'utf8'));
    expect(manifest.envs['hello-task']).toEqual({
      kind: 'shell',
      build: 'envs/hello-task',
      build_network: 'none',
      workdir: '/app',
      resources: { memory_mb: 1536, cpus: 2, pids: 1024, storage_mb: 4096 },
      environment: { APP_MODE: 'test' },
    });
    expect(manifest).toMatchObject({
      toolsets: { shell: { builtin: ['shell'] } },
      groups: { difficulty: 'meta.difficulty', category: 'meta.category', tags: 'meta.tags' },
      scores: { reward: { min: 0, max: 1 } },
    });
    const [row] = lines(path.join(out, 'tasks/train.jsonl'));
    expect(row).toMatchObject({
      task_id: 'hello-task',
      toolset: 'shell',
      env: 'hello-task',
      turns: ['Create hello.txt.\n'],
      time_budget_s: 90,
      verifier: { tests: 'verifiers/hello-task', timeout_s: 45, env: { STRICT: '1' } },
    });
    expect(row!.system_prompt).toMatch(/^You are working in a Linux container, through tools:/);
    expect(row!.meta).toMatchObject({ difficulty: 'easy', category: 'files', tags: 'a,b', harbor: { metadata: { author_name: 'someone' } } });
    expect(row!.golden).toEqual([
      {
        tool: 'bash',
        arguments: {
          command: `mkdir -p /solution && cat > /solution/solve.sh <<'OPENENV_SOLVE_EOF'\n#!/bin/bash\necho "Hello" > hello.txt\nOPENENV_SOLVE_EOF\nGREETING='it'\\''s me' bash /solution/solve.sh`,
          timeout_s: 90,
        },
      },
      { tool: 'end_turn' },
    ]);
    // the build context is environment/, its Dockerfile mapped; the tests are the verifier, apart
    expect(readdirSync(path.join(out, 'envs/hello-task')).sort()).toEqual(['Dockerfile', 'input.txt']);
    expect(readFileSync(path.join(out, 'envs/hello-task/Dockerfile'), 'utf8')).toBe(
      '# openenv-bundle import: was FROM debian:bookworm\nFROM openenv-local/debian:bookworm\nWORKDIR /app\nCOPY input.txt /app/\n',
    );
    expect(readdirSync(path.join(out, 'verifiers/hello-task'))).toEqual(['test.sh']);
    expect(existsSync(path.join(out, 'solution'))).toBe(false);
    expect(r.notes.map((n) => `${n.field}: ${n.message}`)).toEqual([
      '[environment] build_timeout_sec: not applied: images build without a time limit here',
      'environment/Dockerfile: debian:bookworm mapped to openenv-local/debian:bookworm (--base-image)',
    ]);
    const b = await loadBundle(out);
    expect(b.envOf(b.byId.get('hello-task')!).name).toBe('hello-task');
  });

  it('--agent makes every task a harness episode: the bundle names the harness (sh -c CMD), the loaded task has it', async () => {
    const root = temp();
    task(root, 'hello-task');
    const out = path.join(root, 'out');
    await importHarbor(opts([root], out, { agent: 'python3 /tmp/openenv/openenv_harness.py --stream' }));
    const manifest = JSON.parse(readFileSync(path.join(out, 'bundle.json'), 'utf8'));
    expect(manifest.harness).toEqual({ command: ['sh', '-c', 'python3 /tmp/openenv/openenv_harness.py --stream'] });
    const b = await loadBundle(out);
    expect(b.manifest.harness).toEqual({ command: ['sh', '-c', 'python3 /tmp/openenv/openenv_harness.py --stream'], env: {} });
    // without --agent, none
    const plain = path.join(root, 'plain');
    await importHarbor(opts([root], plain));
    expect(JSON.parse(readFileSync(path.join(plain, 'bundle.json'), 'utf8')).harness).toBeUndefined();
  });

  it('maps [[steps]] to turns: per-turn verifiers (the task tests under the step tests), budgets, min_reward, uploads, ready checks, turn_reward', async () => {
    const root = temp();
    stepsTask(root);
    const out = path.join(root, 'out');
    const r = await importHarbor(opts([root], out));
    expect(r.written).toBe(true);
    const [row] = lines(path.join(out, 'tasks/train.jsonl'));
    expect(row).toMatchObject({ turns: ['Do one.\n', 'Do two.\n'], max_turns: 2, turn_reward: 'final' });
    expect(row!.time_budget_s).toBeUndefined();
    expect(row!.per_turn).toEqual([
      {
        time_budget_s: 30,
        verifier: { tests: 'verifiers/steps-task/one', timeout_s: 20, env: { SHARED: 'yes' } },
        min_reward: { reward: 1 },
        ready_check: { command: 'true', interval_s: 1, timeout_s: 30, retries: 2 },
      },
      {
        time_budget_s: 100,
        verifier: { tests: 'verifiers/steps-task/two', timeout_s: 40, env: { SHARED: 'yes', ONLY_TWO: '2' } },
        min_reward: { correctness: 0.5 },
        upload: 'uploads/steps-task/two',
        ready_check: { command: 'test -f config.txt', interval_s: 5, timeout_s: 3, retries: 3 },
      },
    ]);
    expect(row!.system_prompt).toMatch(/This task comes in 2 steps, one per turn/);
    expect(row!.golden.map((s: any) => s.tool)).toEqual(['bash', 'end_turn', 'bash', 'end_turn']);
    // the step's helpers.sh wins over the task's; both steps get the task's tests
    expect(readFileSync(path.join(out, 'verifiers/steps-task/one/helpers.sh'), 'utf8')).toMatch(/echo 1/);
    expect(readFileSync(path.join(out, 'verifiers/steps-task/two/helpers.sh'), 'utf8')).toMatch(/echo 0.5/);
    expect(readdirSync(path.join(out, 'uploads/steps-task/two')).sort()).toEqual(['config.txt', 'setup.sh']);
    await (await loadBundle(out)).cleanup();
  });

  it("takes Harbor's default strategy (mean, the turn_reward default) unwritten, notes what still differs for every multi-step task, and says what inherit_prior_session gets", async () => {
    const root = temp();
    task(root, 'default-mean', {
      'task.toml': STEPS_TOML.replace('multi_step_reward_strategy = "final"\n', '').replace('name = "two"\n', 'name = "two"\ninherit_prior_session = true\n'),
      'instruction.md': null,
      'tests/test.sh': null,
      'solution/solve.sh': null,
      'steps/one/instruction.md': 'Do one.\n',
      'steps/one/tests/test.sh': '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n',
      'steps/two/instruction.md': 'Do two.\n',
      'steps/two/tests/test.sh': '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n',
    });
    stepsTask(root, 'written-final');
    const out = path.join(root, 'out');
    const r = await importHarbor(opts([root], out));
    expect(r.written).toBe(true);
    const rows = lines(path.join(out, 'tasks/train.jsonl'));
    expect(rows.find((x) => x.task_id === 'default-mean')!.turn_reward).toBeUndefined();
    expect(rows.find((x) => x.task_id === 'written-final')!.turn_reward).toBe('final');
    const notes = r.notes.map((n) => `${n.field}: ${n.message} [${n.tasks.join(',')}]`);
    // the mean is Harbor's now: no note of a difference in it, written out or not
    expect(notes.filter((n) => /counts 0|multi_step_reward_strategy/.test(n))).toEqual([]);
    expect(notes).toContainEqual(
      expect.stringMatching(
        /^\[\[steps\]\]: a step whose verifier fails .* without a reward here; Harbor .* scores the steps verified before it\. .* \[default-mean,written-final\]$/,
      ),
    );
    expect(notes).toContain(
      "[[steps]] 2 inherit_prior_session: as asked: a served episode is one conversation, each step's prompt after the steps before it (a harness from --agent starts afresh each step) [default-mean]",
    );
    expect(notes.filter((n) => /inherit_prior_session.*dropped/.test(n))).toEqual([]);
    await (await loadBundle(out)).cleanup();
  });

  it.each([
    [
      'the internet allowed',
      { 'task.toml': SIMPLE_TOML.replace('allow_internet = false', 'allow_internet = true') },
      '[environment] allow_internet: the task allows the internet, and envs here have none: import with --ignore-internet',
    ],
    [
      'network_mode public',
      { 'task.toml': SIMPLE_TOML.replace('allow_internet = false', 'network_mode = "public"') },
      '[environment] network_mode: the task allows the internet',
    ],
    [
      'an allowlist',
      { 'task.toml': SIMPLE_TOML.replace('allow_internet = false', 'network_mode = "allowlist"\nallowed_hosts = ["pypi.org"]') },
      '[environment] network_mode: an allowlist of hosts',
    ],
    [
      'a compose sidecar mounting a host folder',
      { 'environment/docker-compose.yaml': 'services:\n  db:\n    image: postgres\n    volumes: ["/srv:/data"]\n' },
      'environment/docker-compose.yaml services.db.volumes: mounts volumes',
    ],
    [
      'MCP servers',
      { 'task.toml': `${SIMPLE_TOML}[[environment.mcp_servers]]\nname = "m"\ntransport = "streamable-http"\nurl = "http://m:8000/mcp"\n` },
      '[environment] mcp_servers: MCP servers (sidecar services) are not supported',
    ],
    ['a GPU', { 'task.toml': SIMPLE_TOML.replace('cpus = 2', 'cpus = 2\ngpus = 1') }, '[environment] gpus: 1 GPU(s): envs here get none'],
    ['Windows', { 'task.toml': SIMPLE_TOML.replace('cpus = 2', 'cpus = 2\nos = "windows"') }, '[environment] os: "windows": envs here are Linux containers'],
    [
      'an agent user that is no user',
      { 'task.toml': SIMPLE_TOML.replace('timeout_sec = 90.0', 'timeout_sec = 90.0\nuser = ["a", "b"]') },
      '[agent] user: expected a user name of the image, a uid or uid:gid',
    ],
    ['a verifier user', { 'task.toml': SIMPLE_TOML.replace('timeout_sec = 45.0', 'timeout_sec = 45.0\nuser = 0') }, '[verifier] user: runs as 0'],
    [
      'a verifier image of its own',
      {
        'task.toml': SIMPLE_TOML.replace(
          'timeout_sec = 45.0',
          'timeout_sec = 45.0\nenvironment_mode = "separate"\n[verifier.environment]\ndocker_image = "grader:1"',
        ),
      },
      '[verifier] environment: a verifier environment of its own',
    ],
    [
      'a host variable in env',
      { 'task.toml': SIMPLE_TOML.replace('APP_MODE = "test"', 'API_KEY = "${OPENAI_API_KEY}"') },
      '[environment.env] API_KEY: its value "${OPENAI_API_KEY}" reads a variable of the host',
    ],
    [
      'a schema 2',
      { 'task.toml': `schema_version = "2.0"\n${SIMPLE_TOML.replace('version = "1.0"\n', '')}` },
      'schema_version: schema "2.0": this import reads Harbor\'s schema 1.x',
    ],
    [
      'no Dockerfile',
      { 'environment/Dockerfile': null, 'environment/input.txt': null },
      'environment/Dockerfile: missing, and [environment] names no docker_image',
    ],
    ['no instruction', { 'instruction.md': null }, 'instruction.md: missing'],
    ['no verifier', { 'tests/test.sh': null }, 'tests/test.sh: missing: it is the verifier'],
    ['invalid TOML', { 'task.toml': 'version = \n' }, 'task.toml: not valid TOML'],
  ])('refuses a task with %s, naming the feature, and writes nothing', async (_what, files, message) => {
    const root = temp();
    task(root, 'refused-task', files);
    task(root, 'fine-task');
    const out = path.join(root, 'out');
    const r = await importHarbor(opts([root], out));
    expect(r.written).toBe(false);
    expect(existsSync(out)).toBe(false);
    expect(r.refused.map((t) => t.id)).toEqual(['refused-task']);
    expect(r.refused[0]!.findings.map((f) => `${f.field}: ${f.message}`).join('\n')).toContain(message);
    // with --skip-refused the others are imported, the refused one listed
    const skipped = await importHarbor(opts([root], out, { skipRefused: true }));
    expect(skipped).toMatchObject({ written: true, tasks: [{ id: 'fine-task' }], refused: [{ id: 'refused-task' }] });
  });

  it("maps [agent] user to the env's agent_user: the shell, the file tools and a harness act as that user", async () => {
    const root = temp();
    task(root, 'as-agent', { 'task.toml': SIMPLE_TOML.replace('timeout_sec = 90.0', 'timeout_sec = 90.0\nuser = "agent"') });
    const out = path.join(root, 'out');
    const r = await importHarbor(opts([root], out));
    expect(r.refused).toEqual([]);
    const manifest = JSON.parse(readFileSync(path.join(out, 'bundle.json'), 'utf8'));
    expect(Object.values(manifest.envs)).toEqual([expect.objectContaining({ kind: 'shell', agent_user: 'agent' })]);
  });

  describe('a task whose files are not its own', () => {
    /** an outside folder with a secret in every file a task might name */
    function outside(root: string): string {
      const dir = path.join(root, 'elsewhere');
      const put = (rel: string, text: string) => {
        mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
        writeFileSync(path.join(dir, rel), text);
      };
      for (const rel of ['instruction.md', 'solve.sh', 'test.sh', 'Dockerfile', 'secret.txt', 'one/instruction.md', 'one/tests/test.sh'])
        put(rel, `${SECRET}\n`);
      put('task.toml', SIMPLE_TOML.replace('[metadata]', `[metadata]\nsecret = "${SECRET}"`));
      return dir;
    }
    const SECRET = 'the-host-secret-7f3a';
    /** every file the bundle holds, as one text */
    const bundleText = (dir: string): string =>
      readdirSync(dir, { recursive: true, withFileTypes: true })
        .filter((e) => e.isFile())
        .map((e) => readFileSync(path.join(e.parentPath, e.name), 'utf8'))
        .join('\n');

    it.each([
      ['instruction.md', 'instruction.md', (o: string) => path.join(o, 'instruction.md'), {}],
      ['task.toml', 'task.toml', (o: string) => path.join(o, 'task.toml'), {}],
      ['solution/ (the folder)', 'solution', (o: string) => o, { 'solution/solve.sh': null }],
      ['tests/ (the folder)', 'tests', (o: string) => o, { 'tests/test.sh': null }],
      ['environment/ (the folder)', 'environment', (o: string) => o, { 'environment/Dockerfile': null, 'environment/input.txt': null }],
      ['environment/Dockerfile', 'environment/Dockerfile', (o: string) => path.join(o, 'Dockerfile'), { 'environment/Dockerfile': null }],
      ['a file of environment/', 'environment/passwd', () => '/etc/passwd', {}],
      ['a file of solution/', 'solution/solve.sh', (o: string) => path.join(o, 'solve.sh'), { 'solution/README': 'the oracle\n' }],
    ])('a symbolic link leaving the task at %s: refused, naming the path and where it points; the others import', async (_what, rel, target, files) => {
      const root = temp();
      const o = outside(root);
      const ds = path.join(root, 'ds');
      const dir = task(ds, 'linked', { [rel]: null, ...files });
      symlinkSync(target(o), path.join(dir, rel));
      task(ds, 'fine-task');
      const r = await importHarbor(opts([ds], path.join(root, 'out'), { skipRefused: true }));
      expect(r.refused.map((t) => t.id)).toEqual(['linked']);
      expect(r.refused[0]!.findings).toContainEqual({
        field: rel,
        message: `a symbolic link to ${target(o)}, outside the task folder: the import reads only the task's own files and folders`,
      });
      expect(r).toMatchObject({ written: true, tasks: [{ id: 'fine-task' }] });
      expect(bundleText(path.join(root, 'out'))).not.toContain(SECRET);
    });

    it('steps/ or a step folder linked elsewhere: refused, nothing of it read', async () => {
      for (const rel of ['steps', 'steps/one']) {
        const root = temp();
        const o = outside(root);
        const dir = stepsTask(path.join(root, 'ds'));
        rmSync(path.join(dir, rel), { recursive: true });
        symlinkSync(rel === 'steps' ? root : o, path.join(dir, rel));
        if (rel === 'steps') cpSync(path.join(o, 'one'), path.join(root, 'one'), { recursive: true });
        const r = await importHarbor(opts([path.join(root, 'ds')], path.join(root, 'out')));
        expect(r.written, rel).toBe(false);
        expect(
          r.refused[0]!.findings.filter((f) => f.field === rel),
          rel,
        ).toEqual([
          {
            field: rel,
            message: `a symbolic link to ${rel === 'steps' ? root : o}, outside the task folder: the import reads only the task's own files and folders`,
          },
        ]);
      }
    });

    it('a link inside the task is refused too, saying it stays inside; a dangling one says it points nowhere', async () => {
      const root = temp();
      const dir = task(root, 'inner', { 'instruction.md': null, 'docs/prompt.md': 'Create hello.txt.\n' });
      symlinkSync('docs/prompt.md', path.join(dir, 'instruction.md'));
      symlinkSync('../nowhere', path.join(dir, 'tests/helper.sh'));
      const r = await importHarbor(opts([root], path.join(root, 'out')));
      expect(r.refused[0]!.findings).toEqual([
        {
          field: 'instruction.md',
          message: `a symbolic link to docs/prompt.md, inside the task: the import copies files and folders only, never links; put the file or folder itself there`,
        },
        { field: 'tests/helper.sh', message: 'a symbolic link to ../nowhere, which does not exist: the import copies files and folders only, never links' },
      ]);
    });

    it("a dataset's task folder that is a symbolic link: refused by name, nothing read; a task folder given by its own path imports", async () => {
      const root = temp();
      const real = task(path.join(root, 'real'), 'kept-elsewhere');
      mkdirSync(path.join(root, 'ds'));
      symlinkSync(real, path.join(root, 'ds', 'kept-elsewhere'));
      task(path.join(root, 'ds'), 'fine-task');
      const r = await importHarbor(opts([path.join(root, 'ds')], path.join(root, 'out'), { skipRefused: true }));
      expect(r.refused).toEqual([
        {
          id: 'kept-elsewhere',
          findings: [
            {
              field: 'the task folder',
              message: `a symbolic link to ${real}: the import reads no folder a dataset links to; import that folder by its own path`,
            },
          ],
        },
      ]);
      expect(r.tasks.map((t) => t.id)).toEqual(['fine-task']);
      expect((await importHarbor(opts([real], path.join(root, 'out2')))).tasks.map((t) => t.id)).toEqual(['kept-elsewhere']);
    });

    it('a FIFO, a socket: refused by path, never opened', async () => {
      const root = temp();
      const dir = task(root, 'special');
      execFileSync('mkfifo', [path.join(dir, 'tests/pipe')]);
      const server = net.createServer();
      await new Promise<void>((r) => server.listen(path.join(dir, 'environment/sock'), r));
      try {
        const r = await importHarbor(opts([root], path.join(root, 'out')));
        expect(r.refused[0]!.findings).toEqual([
          { field: 'environment/sock', message: 'a socket: the import reads regular files and folders only' },
          { field: 'tests/pipe', message: 'a FIFO (named pipe): the import reads regular files and folders only' },
        ]);
      } finally {
        server.close();
      }
    });
  });

  it('notes what it drops or cannot apply, by name, once for all the tasks it concerns', async () => {
    const root = temp();
    const toml = SIMPLE_TOML.replace('allow_internet = false\n', '').replace('version = "1.0"', 'version = "1.0"\nartifacts = ["/app/x"]\nfancy = 1');
    task(root, 'a', {
      'task.toml': toml.replace('cpus = 2', 'cpus = 2\nskills_dir = "/skills"\n[environment.healthcheck]\ncommand = "true"\nstart_period_sec = 3'),
    });
    task(root, 'b', {
      'task.toml': toml,
      'environment/copy-of-test.sh': `${'#'.repeat(80)}\n`,
      'tests/test.sh': `${'#'.repeat(80)}\n`,
      'solution/solve.sh': '#!/bin/bash\nset -e\napt-get update && apt-get install -y jq\npython3 -m pip install --user requests\n',
    });
    const r = await importHarbor(opts([root], path.join(root, 'out')));
    expect(r.written).toBe(true);
    const notes = r.notes.map((n) => `${n.field}: ${n.message} [${n.tasks.join(',')}]`);
    expect(notes).toEqual(
      expect.arrayContaining([
        'artifacts: not collected here (a shared verifier sees the whole container): dropped [a,b]',
        'fancy: not supported by this import: dropped [a,b]',
        '[environment] skills_dir: agent skills are for installed agents: dropped (the model gets the shell toolset) [a]',
        "[environment] allow_internet: not said (Harbor's default allows the internet): the task runs without it here [a,b]",
        'environment/copy-of-test.sh: has the content of tests/test.sh: the image would carry it where the agent can read it (a leak, unless it is an input the tests also keep) [b]',
        expect.stringMatching(
          /^solution\/solve\.sh: it installs software \(apt-get install, pip install\): the verifier runs in place.*"allow_changes".*"mode": "clean".* \[b\]$/,
        ),
      ]),
    );
    const rows = lines(path.join(root, 'out/tasks/train.jsonl'));
    expect(rows.find((x) => x.task_id === 'a')!.per_turn).toEqual([
      { ready_check: { command: 'true', interval_s: 5, timeout_s: 30, retries: 3, start_period_s: 3 } },
    ]);
  });

  it('imports allow_internet = true with --ignore-internet, noted; a docker_image as an image env, mapped', async () => {
    const root = temp();
    task(root, 'online', {
      'task.toml': SIMPLE_TOML.replace('allow_internet = false', 'allow_internet = true\ndocker_image = "ubuntu:24.04@sha256:feed"'),
      'environment/Dockerfile': null,
    });
    const r = await importHarbor(
      opts([root], path.join(root, 'out'), { ignoreInternet: true, baseImages: [parseBaseImageRule('ubuntu:24.04=openenv-local/debian:bookworm')] }),
    );
    expect(r.written).toBe(true);
    expect(r.notes.map((n) => n.message)).toEqual(
      expect.arrayContaining([
        'the task allows the internet; imported with --ignore-internet, it runs without it',
        'ubuntu:24.04@sha256:feed mapped to openenv-local/debian:bookworm (--base-image), its pinned digest set aside',
      ]),
    );
    const manifest = JSON.parse(readFileSync(path.join(root, 'out/bundle.json'), 'utf8'));
    expect(manifest.envs.online).toMatchObject({ kind: 'shell', image: 'openenv-local/debian:bookworm' });
  });

  it("builds every task's image without network unless --build-with-network, noting Dockerfiles that look like they download or ADD a URL", async () => {
    const root = temp();
    task(root, 'offline');
    task(root, 'installs', { 'environment/Dockerfile': 'FROM debian:bookworm\nRUN apt-get update \\\n && apt-get install -y jq\n' });
    task(root, 'adds-url', { 'environment/Dockerfile': 'FROM debian:bookworm\nADD https://example.com/data.tgz /app/\n' });
    const r = await importHarbor(opts([root], path.join(root, 'out')));
    const manifest = JSON.parse(readFileSync(path.join(root, 'out/bundle.json'), 'utf8'));
    expect(Object.values(manifest.envs).map((e: any) => e.build_network)).toEqual(['none', 'none', 'none']);
    const notes = r.notes.map((n) => `${n.field}: ${n.message} [${n.tasks.join(',')}]`);
    expect(notes).toContain(
      'environment/Dockerfile: its RUN steps look like they download (a package manager, curl, wget, git clone…): the image builds without network here, so they would fail; import with --build-with-network if you trust this Dockerfile [installs]',
    );
    expect(notes).toContain(
      "environment/Dockerfile: it ADDs a URL (or a variable): the engine would fetch it on the host's network, so a build without network refuses it; put the file in environment/ and COPY it, or import with --build-with-network [adds-url]",
    );
    const trusted = await importHarbor(opts([root], path.join(root, 'trusted'), { buildWithNetwork: true }));
    const envs = JSON.parse(readFileSync(path.join(root, 'trusted/bundle.json'), 'utf8')).envs;
    expect(Object.values(envs).every((e: any) => e.build_network === undefined)).toBe(true);
    expect(trusted.notes).toContainEqual({
      field: 'environment/Dockerfile',
      message: "built with the engine's network (--build-with-network): its RUN steps reach what the engine's bridge reaches, the host's own services included",
      tasks: ['adds-url', 'installs', 'offline'],
    });
  });

  it('names the base images the engine does not have, for the tasks that need them', async () => {
    const root = temp();
    task(root, 'one');
    task(root, 'two', { 'environment/Dockerfile': 'FROM python:3.12-slim\n' });
    const r = await importHarbor(opts([root], path.join(root, 'out'), { hasImages: async () => new Set(['python:3.12-slim']) }));
    expect(r.missingImages).toEqual([{ image: 'debian:bookworm', kind: 'base', tasks: ['one'] }]);
    const unchecked = await importHarbor(opts([root], path.join(root, 'out2'), { hasImages: async () => null }));
    expect(unchecked.missingImages).toBeNull();
  });

  it('splits: all train, or the named tasks in eval, or a share chosen by a hash of the ids (the same every time)', async () => {
    const root = temp();
    for (let i = 0; i < 8; i++) task(root, `t${i}`);
    const named = await importHarbor(opts([root], path.join(root, 'a'), { evalTasks: ['t3', 't5'] }));
    expect(named.tasks.filter((t) => t.split === 'eval').map((t) => t.id)).toEqual(['t3', 't5']);
    const share = await importHarbor(opts([root], path.join(root, 'b'), { evalShare: 0.25 }));
    const again = await importHarbor(opts([root], path.join(root, 'c'), { evalShare: 0.25 }));
    const evalIds = share.tasks.filter((t) => t.split === 'eval').map((t) => t.id);
    expect(evalIds).toHaveLength(2);
    expect(again.tasks.filter((t) => t.split === 'eval').map((t) => t.id)).toEqual(evalIds);
    expect((await importHarbor(opts([root], path.join(root, 'd')))).tasks.every((t) => t.split === 'train')).toBe(true);
    await expect(importHarbor(opts([root], path.join(root, 'e'), { evalTasks: ['nope'] }))).rejects.toThrow(/--eval names no imported task: nope/);
  });

  it('takes a task folder or a dataset folder, refuses two tasks of one name, and never overwrites what is not its bundle', async () => {
    const root = temp();
    const one = task(path.join(root, 'ds1'), 'same');
    task(path.join(root, 'ds2'), 'same');
    expect((await importHarbor(opts([one], path.join(root, 'single')))).tasks.map((t) => t.id)).toEqual(['same']);
    await expect(importHarbor(opts([path.join(root, 'ds1'), path.join(root, 'ds2')], path.join(root, 'x')))).rejects.toThrow(/two tasks are named same/);
    await expect(importHarbor(opts([path.join(root, 'nothing')], path.join(root, 'x')))).rejects.toThrow(/no such folder/);
    mkdirSync(path.join(root, 'busy'));
    writeFileSync(path.join(root, 'busy/keep.txt'), 'mine');
    await expect(importHarbor(opts([one], path.join(root, 'busy'), { force: true }))).rejects.toThrow(/exists and is not empty/);
    expect(readFileSync(path.join(root, 'busy/keep.txt'), 'utf8')).toBe('mine');
    await expect(importHarbor(opts([one], path.join(root, 'single')))).rejects.toThrow(/holds a bundle; --force replaces it/);
    expect((await importHarbor(opts([one], path.join(root, 'single'), { force: true }))).written).toBe(true);
    expect(readdirSync(root).filter((n) => n.includes('.import-'))).toEqual([]);
  });
});

describe('openenv-bundle import harbor, the built binary', () => {
  it('imports the shipped dataset, and check --static accepts it', async () => {
    const out = path.join(temp(), 'harbor-v1');
    const env = { ...process.env, DOCKER_HOST: 'unix:///nonexistent/no-engine.sock' };
    const imported = await run(
      'node',
      [CLI, 'import', 'harbor', DATASET, '--out', out, '--base-image', 'debian:bookworm=openenv-local/debian:bookworm', '--eval-share', '0.25'],
      { env },
    );
    expect(imported.stdout).toMatch(/^imported 12 Harbor task\(s\) into .*harbor-v1 \(bundle harbor-v1\): train 9, eval 3\n/);
    expect(imported.stdout).toContain('base images: not checked (no Docker engine answers)');
    expect(imported.stdout).toContain(`next: openenv-bundle check ${out} --static`);
    const checked = await run('node', [CLI, 'check', out, '--static', '--json'], { env });
    const result = JSON.parse(checked.stdout) as { ok: boolean; problems: unknown[]; warnings: unknown[] };
    expect(result).toMatchObject({ ok: true, problems: [] });
    expect(result.warnings).toEqual([]);
  });

  it('a FIFO instruction.md or task.toml: the task is refused by name at once (it hung the import), the others import; names are printed with their escapes shown', async () => {
    const root = temp();
    const ds = path.join(root, 'ds');
    for (const [id, rel] of [
      ['piped-instruction', 'instruction.md'],
      ['piped-toml', 'task.toml'],
    ]) {
      const dir = task(ds, id!, { [rel!]: null });
      execFileSync('mkfifo', [path.join(dir, rel!)]);
    }
    // a file name is the task's text too: printed with its escapes shown
    execFileSync('mkfifo', [path.join(ds, 'piped-toml', 'tests', 'pipe\u001b]0;pwned\u0007')]);
    task(ds, 'fine-task');
    const out = path.join(root, 'out');
    const r = await new Promise<{ code: number | null; stdout: string; stderr: string; timedOut: boolean }>((resolve) => {
      const child = spawn(process.execPath, [CLI, 'import', 'harbor', ds, '--out', out, '--skip-refused'], {
        env: { ...process.env, DOCKER_HOST: 'unix:///nonexistent/no-engine.sock' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      let timedOut = false;
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      const t = setTimeout(() => {
        timedOut = true;
        child.kill('SIGKILL');
      }, 30_000);
      child.on('close', (code) => {
        clearTimeout(t);
        resolve({ code, stdout, stderr, timedOut });
      });
    });
    expect(r.timedOut).toBe(false);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^imported 1 Harbor task\(s\)/);
    expect(r.stdout).toContain('task piped-instruction: instruction.md: a FIFO (named pipe): the import reads regular files and folders only');
    expect(r.stdout).toContain('task piped-toml: task.toml: a FIFO (named pipe): the import reads regular files and folders only');
    expect(r.stdout).toContain('task piped-toml: tests/pipe\\x1b]0;pwned\\x07: a FIFO (named pipe)');
    expect([...r.stdout].filter((ch) => ch !== '\n' && (ch < ' ' || (ch >= '\u007f' && ch <= '\u009f')))).toEqual([]);
    expect(lines(path.join(out, 'tasks/train.jsonl')).map((x) => x.task_id)).toEqual(['fine-task']);
  }, 60_000);

  it('exits 2 for a command line to fix, and 1 when a task is refused', async () => {
    const usage = await run('node', [CLI, 'import', 'zip', 'x', '--out', 'y']).catch((e: { code: number; stderr: string }) => e);
    expect(usage).toMatchObject({ code: 2 });
    expect((usage as { stderr: string }).stderr).toBe(
      "error: FORMAT: the formats are harbor\nRun 'openenv-bundle import --help' for its arguments and options.\n",
    );
    const noOut = await run('node', [CLI, 'import', 'harbor', DATASET]).catch((e: { code: number; stderr: string }) => e);
    expect(noOut).toMatchObject({ code: 2, stderr: expect.stringContaining('--out is required') });
    const noSrc = await run('node', [CLI, 'import', 'harbor', '--out', 'y']).catch((e: { code: number; stderr: string }) => e);
    expect(noSrc).toMatchObject({ code: 2, stderr: expect.stringContaining('missing SRC') });
    const missing = await run('node', [CLI, 'import', 'harbor', '/no/such/dataset', '--out', 'y']).catch((e: { code: number; stderr: string }) => e);
    expect(missing).toMatchObject({ code: 2, stderr: expect.stringContaining('/no/such/dataset: no such folder') });
    const root = temp();
    task(root, 'online', { 'task.toml': SIMPLE_TOML.replace('allow_internet = false', 'allow_internet = true') });
    const refused = await run('node', [CLI, 'import', 'harbor', root, '--out', path.join(root, 'out')], {
      env: { ...process.env, DOCKER_HOST: 'unix:///nonexistent/x.sock' },
    }).catch((e: { code: number; stdout: string }) => e);
    expect(refused).toMatchObject({ code: 1 });
    expect((refused as { stdout: string }).stdout).toContain('task online: [environment] allow_internet: the task allows the internet');
  }, 90_000); // five runs of the built CLI, each a fresh node process (slow on a loaded machine)
});
