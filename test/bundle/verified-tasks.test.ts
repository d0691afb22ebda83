/**
 * The bundle format's verified tasks (docs/bundle-format.md, "verified tasks"): shell envs, the
 * built-in shell toolset beside an env's own tools or alone, per-task envs, verifiers, per-turn
 * settings. What loads, what each mistake says, and that the server refuses what it does not
 * serve yet instead of failing its episodes.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { EnvCatalog, loadBundle, taskRow, shellFeatures } from '../../src/bundle/index.js';
import { checkStatic } from '../../src/authoring/check-static.js';
import { SHELL_TOOL_NAMES } from '../../src/tools/shell/specs.js';
import { baseManifest, bundleError, removeTempDirs, row, writeBundle } from './helpers.js';

afterAll(removeTempDirs);

/** a shell env per task, a toolset of the shell alone, and one http env whose toolset adds the shell to its own tool */
function manifest(): Record<string, any> {
  return {
    ...baseManifest(),
    envs: {
      e: { build: 'envs/e' },
      'box-a': { kind: 'shell', build: 'envs/box-a', workdir: '/app', resources: { memory_mb: 2048, cpus: 2, storage_mb: 10240 }, environment: { A: '1' } },
      'box-b': { kind: 'shell', image: 'openenv-local/debian:bookworm' },
    },
    toolsets: {
      ts: { env: 'e', builtin: ['shell'], tools: [{ name: 'look', description: 'Look around.', input_schema: { type: 'object' } }] },
      shell: { builtin: ['shell'] },
    },
    scores: { reward: { min: 0, max: 1 } },
  };
}

const FILES = {
  'envs/box-a/Dockerfile': 'FROM debian:bookworm\n',
  'verifiers/a/test.sh': 'echo 1 > /logs/verifier/reward.txt\n',
  'verifiers/b1/test.sh': 'echo 1 > /logs/verifier/reward.txt\n',
  'verifiers/b2/test.sh': 'echo 1 > /logs/verifier/reward.txt\n',
  'uploads/b2/config.txt': 'Harbor\n',
};

const solve = { tool: 'bash', arguments: { command: 'echo done' } };

function rows(): Record<string, unknown>[] {
  return [
    row('a', {
      toolset: 'shell',
      env: 'box-a',
      time_budget_s: 120,
      verifier: { tests: 'verifiers/a', timeout_s: 60, env: { MODE: 'strict' } },
      golden: [solve, { tool: 'end_turn' }],
    }),
    row('b', {
      toolset: 'shell',
      env: 'box-b',
      turns: ['Step one.', 'Step two.'],
      per_turn: [
        { time_budget_s: 60, verifier: { tests: 'verifiers/b1' }, min_reward: 1 },
        { verifier: { tests: 'verifiers/b2' }, min_reward: { reward: 0.5 }, upload: 'uploads/b2', ready_check: { command: 'test -f config.txt' } },
      ],
      turn_reward: 'final',
      golden: [solve, { tool: 'end_turn' }, solve, { tool: 'end_turn' }],
    }),
    // the http env's own tool and the shell beside it, scored by the env's /finish
    row('c', { golden: [{ tool: 'look' }, { tool: 'read_file', arguments: { path: '/etc/hostname' } }, { tool: 'end_turn' }] }),
  ];
}

async function failure(edit: (m: Record<string, any>, r: Record<string, any>[]) => void): Promise<string> {
  const m = manifest();
  const r = rows() as Record<string, any>[];
  edit(m, r);
  return (await bundleError(loadBundle(writeBundle({ manifest: m, tasks: { 'tasks/train.jsonl': r }, files: FILES })))).message;
}

describe('a bundle of verified tasks', () => {
  it('loads: shell envs, the shell toolset alone and beside an own tool, per-task envs, verifiers, per-turn settings', async () => {
    const b = await loadBundle(writeBundle({ manifest: manifest(), tasks: { 'tasks/train.jsonl': rows() }, files: FILES }));
    expect(b.manifest.envs['box-a']).toMatchObject({ kind: 'shell', workdir: '/app', resources: { memory_mb: 2048, cpus: 2, storage_mb: 10240, pids: 256 } });
    expect(b.toolsets.shell!.map((t) => t.name)).toEqual([...SHELL_TOOL_NAMES, 'end_turn']);
    expect(b.toolsets.ts!.map((t) => t.name)).toEqual(['look', ...SHELL_TOOL_NAMES, 'end_turn']);
    expect(b.envOf(b.byId.get('a')!).name).toBe('box-a');
    expect(b.envOf(b.byId.get('b')!).name).toBe('box-b');
    expect(b.envOf(b.byId.get('c')!).name).toBe('e');
    const a = b.byId.get('a')!;
    expect(a.verifier).toEqual({ tests: 'verifiers/a', timeout_s: 60, env: { MODE: 'strict' }, mode: 'in-place', allow_changes: [], protect: [] });
    expect(b.byId.get('b')!.per_turn![1]).toMatchObject({
      min_reward: { reward: 0.5 },
      upload: 'uploads/b2',
      ready_check: { command: 'test -f config.txt', interval_s: 5, timeout_s: 30, retries: 3, start_period_s: 0 },
    });
    expect(b.byId.get('b')!.per_turn![0]!.verifier!.timeout_s).toBe(600);
    // what a client is served says nothing of verifiers, budgets or the env
    expect(Object.keys(taskRow(a)).sort()).toEqual(['groups', 'index', 'max_turns', 'messages', 'split', 'task_id', 'toolset', 'turns']);
  });

  it('passes check --static: golden calls of the built-in tools are checked against their schemas', async () => {
    const dir = writeBundle({ manifest: manifest(), tasks: { 'tasks/train.jsonl': rows() }, files: FILES });
    const ok = await checkStatic(dir);
    expect(ok.findings.problems).toEqual([]);
    const bad = rows();
    (bad[0] as any).golden = [{ tool: 'bash', arguments: { cmd: 'ls' } }, { tool: 'end_turn' }];
    const st = await checkStatic(writeBundle({ manifest: manifest(), tasks: { 'tasks/train.jsonl': bad }, files: FILES }));
    expect(st.findings.problems.map((f) => f.message).join('\n')).toMatch(/arguments do not match bash's input_schema/);
  });

  it.each([
    ['a port on a shell env', (m: any) => (m.envs['box-b'].port = 8000), 'field "envs.box-b.port": a shell env runs no server'],
    ['a relative workdir', (m: any) => (m.envs['box-a'].workdir = 'app'), 'field "envs.box-a.workdir": expected an absolute path in the container'],
    ['an unknown built-in toolset', (m: any) => (m.toolsets.shell.builtin = ['python']), 'field "toolsets.shell.builtin[0]"'],
    [
      'a built-in tool name taken',
      (m: any) => (m.toolsets.ts.tools[0].name = 'bash'),
      '"bash" is a tool of the built-in toolset "shell" this toolset includes',
    ],
    ['own tools without an env', (m: any) => delete m.toolsets.ts.env, 'field "toolsets.ts.env": expected the env that serves this toolset\'s tools'],
    [
      'own tools on a shell env',
      (m: any) => (m.toolsets.ts.env = 'box-b'),
      'field "toolsets.ts.tools": env "box-b" is a shell env, which runs no server to answer tools of its own',
    ],
  ])('refuses %s', async (_what, edit, message) => {
    expect(await failure((m) => edit(m))).toContain(message);
  });

  it.each([
    ['a task env that does not exist', (r: any[]) => (r[0].env = 'nope'), 'line 1, field "env": expected one of the declared envs'],
    ['no env at all', (r: any[]) => delete r[0].env, 'line 1, field "env": toolset "shell" names no env, so the task must name the env it runs in'],
    ['a task env under a toolset with its own tools', (r: any[]) => (r[2].env = 'box-a'), 'line 3, field "env": toolset "ts" has tools of its own'],
    ['a shell env task without a verifier', (r: any[]) => delete r[0].verifier, 'line 1, field "verifier": env "box-a" is a shell env, which has no /finish'],
    ['data for a shell env', (r: any[]) => (r[0].data = { x: 1 }), 'line 1, field "data": env "box-a" is a shell env, which has no /reset'],
    [
      'a verifier folder without test.sh',
      (r: any[]) => (r[0].verifier.tests = 'uploads/b2'),
      'line 1, field "verifier.tests": expected a folder of the bundle holding test.sh, but "uploads/b2" has no test.sh',
    ],
    [
      'a missing upload',
      (r: any[]) => (r[1].per_turn[1].upload = 'uploads/none'),
      'line 2, field "per_turn[1].upload": expected a folder of the bundle, but "uploads/none" not found',
    ],
    [
      'a verifier path outside the bundle',
      (r: any[]) => (r[0].verifier.tests = '../x'),
      'line 1, field "verifier.tests": expected a relative path inside the bundle folder',
    ],
    ['per_turn of the wrong length', (r: any[]) => r[1].per_turn.pop(), 'line 2, field "per_turn": expected one entry per turn (2), got 1'],
    [
      'a turn without a verifier among verified turns',
      (r: any[]) => delete r[1].per_turn[1].verifier,
      'field "per_turn[1].verifier": every turn of a task verified turn by turn needs a verifier',
    ],
    [
      'both a task verifier and turn verifiers',
      (r: any[]) => (r[1].verifier = { tests: 'verifiers/a' }),
      'line 2, field "verifier": a task is verified at its end (verifier) or at each turn\'s end',
    ],
    [
      'turn_reward without per_turn',
      (r: any[]) => (r[0].turn_reward = 'mean'),
      'line 1, field "turn_reward": turn_reward combines per-turn verifiers, but the task has no per_turn',
    ],
    ['an unknown turn_reward', (r: any[]) => (r[1].turn_reward = 'best'), 'line 2, field "turn_reward"'],
    ['a zero time budget', (r: any[]) => (r[0].time_budget_s = 0), 'line 1, field "time_budget_s": expected a number > 0, got 0'],
    ['an unknown verifier field', (r: any[]) => (r[0].verifier.timeout = 5), 'line 1, field "verifier.timeout": unknown field'],
  ])('refuses %s', async (_what, edit, message) => {
    expect(await failure((_m, r) => edit(r))).toContain(message);
  });

  it('is refused at start by a sandbox without a shell part, naming what needs one', async () => {
    const b = await loadBundle(writeBundle({ manifest: manifest(), tasks: { 'tasks/train.jsonl': rows() }, files: FILES }));
    expect(shellFeatures(b)).toEqual([
      'shell envs (box-a, box-b)',
      'built-in toolsets (toolset ts, shell)',
      'verified tasks (2 task(s) with a verifier, per_turn, time_budget_s or env)',
    ]);
    const silent = { info() {}, warn() {}, error() {}, debug() {} } as never;
    await expect(new EnvCatalog(b, {} as never, {}, silent).buildAll()).rejects.toThrow(/this sandbox does not serve: shell envs .*--sandbox docker/);
  });

  it('leaves a bundle without them as it was: served by any sandbox, nothing refused', async () => {
    const b = await loadBundle(writeBundle());
    expect(shellFeatures(b)).toEqual([]);
    expect(b.manifest.toolsets.ts).toMatchObject({ env: 'e', builtin: [] });
  });
});
