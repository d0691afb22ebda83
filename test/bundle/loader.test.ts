import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { END_TURN_TOOL, TaskRowSchema, contextDir, loadBundle, taskRow, type LoadedBundle } from '../../src/bundle/index.js';
import { MINI, baseManifest, removeTempDirs, row, writeBundle } from './helpers.js';

afterAll(removeTempDirs);

describe('loadBundle on a valid folder', () => {
  let b: LoadedBundle;
  it('loads the manifest with its defaults filled in', async () => {
    b = await loadBundle(MINI);
    expect(b.dir).toBe(MINI);
    expect(b.manifest.name).toBe('mini-v1');
    expect(b.manifest.max_turns).toBe(3);
    expect(b.manifest.reward).toBe('mean');
    expect(b.manifest.envs.echo).toEqual({
      build: 'envs/echo',
      kind: 'http',
      port: 8000,
      ready_path: '/health',
      deploy_timeout_s: 60,
      resources: { memory_mb: 128, cpus: 1, pids: 256 },
      environment: { LOG_LEVEL: 'debug' },
      clean_reset: false,
    });
    expect(b.manifest.envs.calc).toEqual({
      image: 'example.org/calc:1.2',
      kind: 'http',
      port: 9000,
      ready_path: '/ready',
      deploy_timeout_s: 30,
      resources: { memory_mb: 512, cpus: 1, pids: 256 },
      environment: {},
      clean_reset: false,
    });
  });

  it("takes the description from README.md's first non-empty line when bundle.json has none", () => {
    expect(b.description).toBe('A tiny bundle for loader tests: echo and add numbers.');
    expect(b.manifest.description).toBe(b.description);
    expect(b.readme).toContain('Two toolsets over two envs.');
    expect(b.readme.startsWith('\n# A tiny bundle')).toBe(true);
  });

  it('indexes tasks by split and 0-based line, and by task_id', () => {
    expect(b.splitCounts).toEqual({ train: 3, eval: 2 });
    expect(b.splits.train?.map((t) => t.task_id)).toEqual(['echo-0', 'echo-1', 'calc-0']);
    // eval.jsonl has CRLF line endings
    expect(b.splits.eval?.map((t) => t.task_id)).toEqual(['calc-eval-0', 'echo-eval-0']);
    const t = b.task('train', 1);
    expect(t).toMatchObject({ task_id: 'echo-1', split: 'train', index: 1, turns: ['Say one.', 'Now say two.'] });
    expect(b.byId.get('echo-1')).toBe(t);
    expect(b.byId.get('calc-eval-0')).toMatchObject({ split: 'eval', index: 0, data: { answer: 42 } });
    expect(b.byId.size).toBe(5);
    expect(b.task('train', 3)).toBeUndefined();
    expect(b.task('train', -1)).toBeUndefined();
    expect(b.task('train', 0.5)).toBeUndefined();
    expect(b.task('nope', 0)).toBeUndefined();
    expect(b.task('constructor', 0)).toBeUndefined();
    expect(b.splits['constructor']).toBeUndefined();
  });

  it('resolves max_turns from the row, else from the manifest, and defaults data to {}', () => {
    expect(b.byId.get('calc-0')?.max_turns).toBe(5);
    expect(b.byId.get('echo-0')?.max_turns).toBe(3);
    expect(b.byId.get('echo-eval-0')?.data).toEqual({});
    expect(b.byId.get('echo-0')?.meta).toEqual({ difficulty: 'easy' });
  });

  it('appends end_turn to every toolset', () => {
    expect(Object.keys(b.toolsets)).toEqual(['echo', 'calc']);
    expect(b.toolsets.echo?.map((t) => t.name)).toEqual(['echo', 'end_turn']);
    expect(b.toolsets.calc?.map((t) => t.name)).toEqual(['add', 'submit', 'end_turn']);
    expect(b.toolsets.calc?.at(-1)).toEqual({
      name: 'end_turn',
      description: "End the current turn. Its result is the next turn's prompt; after the last turn the episode is scored.",
      input_schema: {
        type: 'object',
        properties: { answer: { type: 'string', description: 'your answer for this turn (optional)' } },
        additionalProperties: false,
      },
    });
    expect(b.toolsets.echo?.at(-1)).toBe(END_TURN_TOOL);
    expect(Object.isFrozen(END_TURN_TOOL.input_schema)).toBe(true);
    // the manifest's own toolset is not modified
    expect(b.manifest.toolsets.echo?.tools.map((t) => t.name)).toEqual(['echo']);
  });

  it('makes the exact TaskRow of docs/protocol.md, without data or meta', () => {
    const t = b.byId.get('echo-0');
    expect(t).toBeDefined();
    const r = taskRow(t!);
    expect(r).toStrictEqual({
      task_id: 'echo-0',
      split: 'train',
      index: 0,
      toolset: 'echo',
      messages: [
        { role: 'system', content: 'You repeat things.' },
        { role: 'user', content: 'Say hello.' },
      ],
      turns: 1,
      max_turns: 3,
      groups: {},
    });
    expect(Object.keys(r)).toEqual(['task_id', 'split', 'index', 'toolset', 'messages', 'turns', 'max_turns', 'groups']);
    expect(taskRow(b.byId.get('echo-eval-0')!)).toMatchObject({ turns: 3, max_turns: 3, messages: [{ content: '' }, { content: 'Say bye.' }] });
    for (const task of b.byId.values()) expect(TaskRowSchema.safeParse(taskRow(task)).success).toBe(true);
  });

  it('names the env of a task, and the build context of an env', () => {
    expect(b.envOf(b.byId.get('echo-1')!)).toEqual({ name: 'echo', spec: b.manifest.envs.echo });
    expect(b.envOf(b.byId.get('calc-0')!).name).toBe('calc');
    expect(contextDir(b, 'echo')).toBe(path.join(MINI, 'envs/echo'));
    expect(contextDir(b, 'calc')).toBeNull();
    expect(() => contextDir(b, 'nope')).toThrow(/no env "nope"/);
    expect(() => b.envOf({ ...b.byId.get('echo-0')!, toolset: 'other' })).toThrow(/not a task of bundle mini-v1/);
  });

  it('has a cleanup that does nothing for a folder', async () => {
    await b.cleanup();
    await b.cleanup();
    expect((await loadBundle(MINI)).splitCounts.train).toBe(3);
  });
});

describe('loadBundle details', () => {
  it('prefers bundle.json\'s description over README.md, and strips "#" from the README line', async () => {
    const dir = writeBundle({ files: { 'README.md': '\n\n##   From the readme  \nmore\n' } });
    expect((await loadBundle(dir)).description).toBe('A bundle written by a test.');
    const m = baseManifest();
    delete m.description;
    const dir2 = writeBundle({ manifest: m, files: { 'README.md': '\n\n##   From the readme  \nmore\n' } });
    const b2 = await loadBundle(dir2);
    expect(b2.description).toBe('From the readme');
    expect(b2.readme).toBe('\n\n##   From the readme  \nmore\n');
  });

  it('reads an empty readme when README.md is absent', async () => {
    const b = await loadBundle(writeBundle());
    expect(b.readme).toBe('');
  });

  it('allows blank lines at the end of a split file, and a UTF-8 BOM', async () => {
    const dir = writeBundle({ tasks: { 'tasks/train.jsonl': ['\uFEFF' + JSON.stringify(row('a')), row('b'), '', '   ', ''] } });
    const b = await loadBundle(dir);
    expect(b.splits.train?.map((t) => [t.task_id, t.index])).toEqual([
      ['a', 0],
      ['b', 1],
    ]);
  });

  it('reads rows longer than a read chunk, CRLF endings, and a last line without a newline', async () => {
    const big = 'é'.repeat(1_500_000); // 3 MB of UTF-8: spans several 1 MiB chunks, split inside characters
    const text = [row('a'), row('big', { data: { big } }), row('c'), row('d')].map((r) => JSON.stringify(r)).join('\r\n');
    const dir = writeBundle({ tasks: {}, files: { 'tasks/train.jsonl': text } });
    const b = await loadBundle(dir);
    expect(b.splits.train?.map((t) => [t.task_id, t.index])).toEqual([
      ['a', 0],
      ['big', 1],
      ['c', 2],
      ['d', 3],
    ]);
    expect(b.byId.get('big')?.data.big).toBe(big);
    expect(b.byId.get('d')?.system_prompt).toBe('You are tested.');
  });

  it('allows an empty split besides the default one, and an image-only env', async () => {
    const m = baseManifest();
    m.splits = { train: 'tasks/train.jsonl', extra: 'tasks/extra.jsonl' };
    m.envs = { e: { image: 'busybox:1' } };
    const dir = writeBundle({ manifest: m, files: { 'tasks/extra.jsonl': '' } });
    const b = await loadBundle(dir);
    expect(b.splitCounts).toEqual({ train: 2, extra: 0 });
    expect(contextDir(b, 'e')).toBeNull();
  });

  it('keeps a row\'s "__proto__" data key as data, not as a prototype', async () => {
    const line = '{"task_id":"p","toolset":"ts","system_prompt":"","turns":["x"],"data":{"__proto__":{"polluted":true}}}';
    const b = await loadBundle(writeBundle({ tasks: { 'tasks/train.jsonl': [line] } }));
    const data = b.byId.get('p')!.data;
    expect(Object.getPrototypeOf(data)).toBe(Object.prototype);
    expect(Object.hasOwn(data, '__proto__')).toBe(true);
    expect((data as { polluted?: boolean }).polluted).toBeUndefined();
  });

  it('loads 2,000 + 200 rows of ~3 KB quickly', async () => {
    const filler = 'lorem ipsum dolor sit amet '.repeat(40); // ~1 KB
    const mk = (split: string, i: number) =>
      row(`${split}-${i}`, {
        system_prompt: filler,
        turns: [filler.slice(0, 500) + i, filler.slice(0, 500)],
        data: { prices: Array.from({ length: 24 }, (_, h) => h * 1.5 + i), note: filler.slice(0, 700) },
        meta: { i },
      });
    const m = baseManifest();
    m.splits = { train: 'tasks/train.jsonl', eval: 'tasks/eval.jsonl' };
    const dir = writeBundle({
      manifest: m,
      tasks: {
        'tasks/train.jsonl': Array.from({ length: 2000 }, (_, i) => mk('train', i)),
        'tasks/eval.jsonl': Array.from({ length: 200 }, (_, i) => mk('eval', i)),
      },
    });
    const bytes = JSON.stringify(mk('train', 0)).length;
    expect(bytes).toBeGreaterThan(2800);
    const runs: number[] = [];
    let b: LoadedBundle | undefined;
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      b = await loadBundle(dir);
      runs.push(performance.now() - t0);
    }
    console.log(`loadBundle: 2,200 rows of ${bytes} bytes in ${runs.map((r) => r.toFixed(0)).join(' / ')} ms (cold / warm / warm)`);
    expect(b?.splitCounts).toEqual({ train: 2000, eval: 200 });
    expect(b?.task('eval', 199)?.task_id).toBe('eval-199');
  });

  it('rejects a path that is neither a folder nor a gzip archive', async () => {
    const dir = writeBundle();
    const file = path.join(dir, 'not-an-archive.tar.gz');
    writeFileSync(file, 'plain text');
    await expect(loadBundle(file)).rejects.toThrow(`${file}: expected a bundle folder or a .tar.gz archive of one`);
    await expect(loadBundle(path.join(dir, 'missing'))).rejects.toThrow(`${path.join(dir, 'missing')}: no such folder or file`);
  });
});
