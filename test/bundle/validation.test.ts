/**
 * Every way a bundle can be invalid yields a BundleError whose message names the file, the line
 * (JSONL) and the field, and says what was expected.
 */
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BundleError, loadBundle } from '../../src/bundle/index.js';
import { baseManifest, bundleError, removeTempDirs, row, tempDir, writeBundle, type BundleSpec } from './helpers.js';

afterAll(removeTempDirs);

/** Loads the bundle `spec` describes and returns the message of the BundleError it must raise. */
async function failure(spec: BundleSpec): Promise<string> {
  return (await bundleError(loadBundle(writeBundle(spec)))).message;
}

/** The base manifest changed by `edit`. */
function manifest(edit: (m: Record<string, any>) => void): Record<string, unknown> {
  const m = baseManifest() as Record<string, any>;
  edit(m);
  return m;
}

describe('bundle.json', () => {
  it.each([
    ['an invalid name', (m: any) => (m.name = 'Bad Name'), 'bundle.json, field "name": expected a name matching ^[a-z0-9][a-z0-9._-]*$, got "Bad Name"'],
    ['a missing version', (m: any) => delete m.version, 'bundle.json, field "version": expected a string, but it is missing'],
    [
      'an undeclared default split',
      (m: any) => (m.default_split = 'test'),
      'bundle.json, field "default_split": expected one of the declared splits (train), got "test"',
    ],
    ['no splits', (m: any) => (m.splits = {}), 'bundle.json, field "splits": expected at least one split'],
    [
      'an absolute split path',
      (m: any) => (m.splits.train = '/etc/passwd'),
      'bundle.json, field "splits.train": expected a relative path inside the bundle folder, but it is absolute, got "/etc/passwd"',
    ],
    [
      'a bad split name',
      (m: any) => (m.splits = { 'my split': 'tasks/train.jsonl' }),
      'bundle.json, field "splits["my split"]": split name "my split" must match ^[A-Za-z0-9][A-Za-z0-9._-]*$',
    ],
    ['a port that is a string', (m: any) => (m.envs.e.port = '80'), 'bundle.json, field "envs.e.port": expected a number, got "80"'],
    ['a port out of range', (m: any) => (m.envs.e.port = 70000), 'bundle.json, field "envs.e.port": expected a number ≤ 65535, got 70000'],
    ['a fractional pids limit', (m: any) => (m.envs.e.resources = { pids: 1.5 }), 'bundle.json, field "envs.e.resources.pids": expected an integer, got 1.5'],
    [
      'a ready_path without a slash',
      (m: any) => (m.envs.e.ready_path = 'health'),
      'bundle.json, field "envs.e.ready_path": expected a path starting with "/", got "health"',
    ],
    [
      'an environment value that is not a string',
      (m: any) => (m.envs.e.environment = { PORT: 8000 }),
      'bundle.json, field "envs.e.environment.PORT": expected a string, got 8000',
    ],
    ['both build and image', (m: any) => (m.envs.e.image = 'busybox'), 'bundle.json, field "envs.e": expected either "build" or "image", got both'],
    [
      'neither build nor image',
      (m: any) => delete m.envs.e.build,
      'bundle.json, field "envs.e": expected "build" (a folder of the bundle) or "image" (an image reference), got neither',
    ],
    [
      'an absolute build path',
      (m: any) => (m.envs.e.build = '/etc'),
      'bundle.json, field "envs.e.build": expected a relative path inside the bundle folder, but it is absolute, got "/etc"',
    ],
    [
      'a build path with ..',
      (m: any) => (m.envs.e.build = 'envs/../../x'),
      'bundle.json, field "envs.e.build": expected a relative path inside the bundle folder, but it has a ".." segment, got "envs/../../x"',
    ],
    [
      'a toolset naming an undeclared env',
      (m: any) => (m.toolsets.ts.env = 'nope'),
      'bundle.json, field "toolsets.ts.env": expected one of the declared envs (e), got "nope"',
    ],
    [
      'a toolset declaring end_turn',
      (m: any) => m.toolsets.ts.tools.push({ name: 'end_turn', description: 'mine', input_schema: {} }),
      'bundle.json, field "toolsets.ts.tools[1].name": "end_turn" is reserved: the server adds it to every toolset',
    ],
    [
      'two tools of one name',
      (m: any) => m.toolsets.ts.tools.push({ name: 'look', description: 'again', input_schema: {} }),
      'bundle.json, field "toolsets.ts.tools[1].name": duplicate tool name "look", already declared at tools[0]',
    ],
    [
      'an input_schema that is not an object',
      (m: any) => (m.toolsets.ts.tools[0].input_schema = []),
      'bundle.json, field "toolsets.ts.tools[0].input_schema": expected a JSON object, got []',
    ],
    [
      'a tool name with spaces',
      (m: any) => (m.toolsets.ts.tools[0].name = 'look around'),
      'bundle.json, field "toolsets.ts.tools[0].name": expected a tool name matching ^[A-Za-z0-9_-]{1,64}$, got "look around"',
    ],
    ['max_turns 0', (m: any) => (m.max_turns = 0), 'bundle.json, field "max_turns": expected a number ≥ 1, got 0'],
    ['an empty reward', (m: any) => (m.reward = ''), 'bundle.json, field "reward": expected "mean", "sum", "min", "max" or the name of a score, got ""'],
    [
      'an unknown field',
      (m: any) => (m.max_turn = 3),
      'bundle.json, field "max_turn": unknown field; the fields here are name, version, description, default_split, splits, envs, toolsets, max_turns, reward',
    ],
  ])('refuses %s', async (_what, edit, expected) => {
    const message = await failure({ manifest: manifest(edit) });
    expect(message).toContain(expected);
  });

  it('reports invalid JSON with its line', async () => {
    const message = await failure({ manifest: '{\n  "name": "x",\n  "version": 1,,\n}' });
    expect(message).toMatch(/: bundle\.json line 3: invalid JSON \(/);
  });

  it('reports a missing bundle.json', async () => {
    const dir = tempDir();
    await expect(loadBundle(dir)).rejects.toThrow(`bundle ${dir}: bundle.json: not found; a bundle folder holds bundle.json at its root`);
  });

  it('needs a description, from bundle.json or README.md', async () => {
    const message = await failure({ manifest: manifest((m) => delete m.description), files: { 'README.md': '\n  #  \n' } });
    expect(message).toContain('bundle.json, field "description": expected a description, here or as the first line of README.md; found neither');
  });

  it('refuses a build folder that is missing, is a file, or has no Dockerfile', async () => {
    const message = await failure({
      manifest: manifest((m) => {
        m.envs = { a: { build: 'envs/missing' }, b: { build: 'envs/e/Dockerfile' }, c: { build: 'envs' } };
        m.toolsets.ts.env = 'a';
      }),
    });
    expect(message).toContain('bundle.json, field "envs.a.build": expected a folder of the bundle holding a Dockerfile, but "envs/missing" not found');
    expect(message).toContain('bundle.json, field "envs.b.build": expected a folder holding a Dockerfile, got the file "envs/e/Dockerfile"');
    expect(message).toContain('bundle.json, field "envs.c.build": expected a folder holding a Dockerfile, but "envs" has none');
  });

  it('refuses a build folder that resolves outside the bundle through a symlink', async () => {
    const outside = tempDir();
    mkdirSync(path.join(outside, 'ctx'));
    const dir = writeBundle({ manifest: manifest((m) => (m.envs.e.build = 'envs/link')) });
    symlinkSync(path.join(outside, 'ctx'), path.join(dir, 'envs/link'));
    const message = (await bundleError(loadBundle(dir))).message;
    expect(message).toContain(
      'bundle.json, field "envs.e.build": expected a folder of the bundle holding a Dockerfile, but "envs/link" resolves outside the bundle folder',
    );
  });

  it('refuses a split file that is missing or resolves outside the bundle', async () => {
    const outside = tempDir();
    writeFileSync(path.join(outside, 'secret.jsonl'), '{"task_id":"s"}\n');
    const dir = writeBundle({
      manifest: manifest((m) => (m.splits = { train: 'tasks/train.jsonl', gone: 'tasks/gone.jsonl', out: 'tasks/out.jsonl', alias: 'tasks/alias.jsonl' })),
    });
    symlinkSync(path.join(outside, 'secret.jsonl'), path.join(dir, 'tasks/out.jsonl'));
    // a link that stays inside the bundle is fine (it duplicates train's task_ids, reported as such)
    symlinkSync('train.jsonl', path.join(dir, 'tasks/alias.jsonl'));
    const message = (await bundleError(loadBundle(dir))).message;
    expect(message).toContain('bundle.json, field "splits.gone": expected a JSONL file of tasks, but "tasks/gone.jsonl" not found');
    expect(message).toContain('bundle.json, field "splits.out": expected a JSONL file of tasks, but "tasks/out.jsonl" resolves outside the bundle folder');
    expect(message).toContain('tasks/alias.jsonl line 1, field "task_id": duplicate task_id "t-0", first defined at tasks/train.jsonl line 1');
    expect(message).not.toContain('"s"');
  });

  it('refuses a split path that is a folder', async () => {
    const message = await failure({ manifest: manifest((m) => (m.splits.train = 'tasks')) });
    expect(message).toContain('bundle.json, field "splits.train": expected a JSONL file of tasks, but "tasks" is not a file');
  });

  it('refuses a README.md that resolves outside the bundle', async () => {
    const outside = tempDir();
    writeFileSync(path.join(outside, 'secret.md'), '# secret\n');
    const dir = writeBundle();
    symlinkSync(path.join(outside, 'secret.md'), path.join(dir, 'README.md'));
    await expect(loadBundle(dir)).rejects.toThrow(`bundle ${dir}: README.md: expected a text file in the bundle, but it resolves outside the bundle folder`);
  });

  it('refuses a default split without tasks', async () => {
    const message = await failure({ tasks: { 'tasks/train.jsonl': [] } });
    expect(message).toContain('tasks/train.jsonl: the default split "train" has no tasks');
  });
});

describe('task rows', () => {
  const ok = row('ok');
  it.each([
    ['empty turns', row('x', { turns: [] }), 'tasks/train.jsonl line 2, field "turns": expected a non-empty array of strings, got []'],
    ['turns as a string', row('x', { turns: 'hi' }), 'tasks/train.jsonl line 2, field "turns": expected a non-empty array of strings, got "hi"'],
    ['a turn that is not a string', row('x', { turns: ['a', 7] }), 'tasks/train.jsonl line 2, field "turns[1]": expected a string, got 7'],
    [
      'a missing task_id',
      { toolset: 'ts', system_prompt: '', turns: ['x'] },
      'tasks/train.jsonl line 2, field "task_id": expected a string, but it is missing',
    ],
    ['an empty task_id', row(''), 'tasks/train.jsonl line 2, field "task_id": expected a non-empty string of at most 255 characters, got ""'],
    [
      'a task_id over 255 characters',
      row('x'.repeat(256)),
      `tasks/train.jsonl line 2, field "task_id": expected a non-empty string of at most 255 characters, got "${'x'.repeat(56)}…`,
    ],
    [
      'a missing system_prompt',
      { task_id: 'x', toolset: 'ts', turns: ['x'] },
      'tasks/train.jsonl line 2, field "system_prompt": expected a string, but it is missing',
    ],
    [
      'an undeclared toolset',
      row('x', { toolset: 'other' }),
      'tasks/train.jsonl line 2, field "toolset": expected one of the declared toolsets (ts), got "other"',
    ],
    ['data that is not an object', row('x', { data: 'answer' }), 'tasks/train.jsonl line 2, field "data": expected a JSON object, got "answer"'],
    ['null data', row('x', { data: null }), 'tasks/train.jsonl line 2, field "data": expected a JSON object, got null'],
    ['meta that is an array', row('x', { meta: [1] }), 'tasks/train.jsonl line 2, field "meta": expected a JSON object, got [1]'],
    [
      'max_turns below the number of turns',
      row('x', { turns: ['a', 'b', 'c'], max_turns: 2 }),
      'tasks/train.jsonl line 2, field "max_turns": expected at least the number of turns (3), got 2',
    ],
    ['a fractional max_turns', row('x', { max_turns: 1.5 }), 'tasks/train.jsonl line 2, field "max_turns": expected an integer, got 1.5'],
    ['max_turns 0', row('x', { max_turns: 0 }), 'tasks/train.jsonl line 2, field "max_turns": expected a number ≥ 1, got 0'],
    [
      "more turns than the manifest's max_turns",
      row('x', { turns: ['1', '2', '3', '4', '5'] }),
      'tasks/train.jsonl line 2, field "turns": 5 turns, more than bundle.json\'s max_turns (4); give the task a max_turns ≥ 5',
    ],
    [
      'an unknown field',
      row('x', { answer: 42 }),
      'tasks/train.jsonl line 2, field "answer": unknown field; the fields here are task_id, toolset, system_prompt, turns, data, max_turns, meta',
    ],
    ['a row that is not an object', [1, 2], 'tasks/train.jsonl line 2: expected an object, got [1,2]'],
  ])('refuses %s', async (_what, bad, expected) => {
    const message = await failure({ tasks: { 'tasks/train.jsonl': [ok, bad as Record<string, unknown>] } });
    expect(message).toContain(expected);
  });

  it('reports a line that is not JSON, with its line number', async () => {
    const message = await failure({ tasks: { 'tasks/train.jsonl': [ok, row('b'), '{"task_id": "c",'] } });
    expect(message).toMatch(/tasks\/train\.jsonl line 3: invalid JSON \(.+\)/);
  });

  it('refuses a blank line between tasks', async () => {
    const message = await failure({ tasks: { 'tasks/train.jsonl': [ok, '', ' ', row('b')] } });
    expect(message).toContain("tasks/train.jsonl line 2: blank line between tasks: a task's index is its line number, so blank lines may only end the file");
  });

  it('refuses a task_id used twice, naming both places, across splits', async () => {
    const message = await failure({
      manifest: manifest((m) => (m.splits = { train: 'tasks/train.jsonl', eval: 'tasks/eval.jsonl' })),
      tasks: {
        'tasks/train.jsonl': [row('a'), row('b'), row('a')],
        'tasks/eval.jsonl': [row('c'), row('b')],
      },
    });
    expect(message).toContain('tasks/train.jsonl line 3, field "task_id": duplicate task_id "a", first defined at tasks/train.jsonl line 1');
    expect(message).toContain('tasks/eval.jsonl line 2, field "task_id": duplicate task_id "b", first defined at tasks/train.jsonl line 2');
  });
});

describe('many problems', () => {
  it('reports every problem of every file in one error, up to 20, and counts the rest', async () => {
    const bad = Array.from({ length: 30 }, (_, i) => row(`t${i}`, { turns: [] }));
    const err = await bundleError(
      loadBundle(
        writeBundle({
          manifest: manifest((m) => (m.splits = { train: 'tasks/train.jsonl', eval: 'tasks/eval.jsonl' })),
          tasks: { 'tasks/train.jsonl': [row('a'), 'not json'], 'tasks/eval.jsonl': bad },
        }),
      ),
    );
    expect(err).toBeInstanceOf(BundleError);
    expect(err.total).toBe(31);
    expect(err.issues).toHaveLength(20);
    const lines = err.message.split('\n');
    expect(lines[0]).toMatch(/^bundle .+: 31 problems$/);
    expect(lines[1]).toMatch(/^ {2}tasks\/train\.jsonl line 2: invalid JSON/);
    expect(lines[2]).toBe('  tasks/eval.jsonl line 1, field "turns": expected a non-empty array of strings, got []');
    expect(lines[20]).toBe('  tasks/eval.jsonl line 19, field "turns": expected a non-empty array of strings, got []');
    expect(lines[21]).toBe('  … and 11 more');
    expect(lines).toHaveLength(22);
  });

  it('reports several manifest problems together', async () => {
    const err = await bundleError(loadBundle(writeBundle({ manifest: manifest((m) => ((m.name = '-x'), (m.envs.e.port = 0), (m.max_turns = 'four'))) })));
    expect(err.total).toBe(3);
    expect(err.message).toContain('bundle.json, field "name": expected a name matching');
    expect(err.message).toContain('bundle.json, field "envs.e.port": expected a number ≥ 1, got 0');
    expect(err.message).toContain('bundle.json, field "max_turns": expected a number, got "four"');
  });
});
