/**
 * The import's map without a disk (src/authoring/harbor/map.ts): Harbor tasks held in memory,
 * as the read step gives them, mapped to the typed draft of a bundle, its manifest and rows
 * checked against the bundle format's own schemas.
 */
import { describe, expect, it } from 'vitest';
import { ManifestSchema, TaskLineSchema } from '../../src/bundle/schema.js';
import { aggregate, evalSet, goldenOf, mapTasks, slug, type MapOptions } from '../../src/authoring/harbor/map.js';
import { ImportError } from '../../src/authoring/harbor/options.js';
import type { ReadTask, SolutionRead } from '../../src/authoring/harbor/read.js';
import type { HarborConfig, HarborStep } from '../../src/authoring/harbor/task-config.js';
import { EMPTY_CONFIG, type HarborTask, type HarborTurn } from '../../src/authoring/harbor/read-task.js';

const config = (c: Partial<HarborConfig> = {}): HarborConfig => ({ ...EMPTY_CONFIG, ...c });
const turn = (t: Partial<HarborTurn> = {}): HarborTurn => ({
  step: null,
  instruction: 'Make hello.txt.',
  tests: ['/src/t/tests'],
  solution: '/src/t/solution',
  upload: null,
  ...t,
});
const task = (t: Partial<HarborTask> = {}): HarborTask => ({
  id: 'hello',
  dir: '/src/hello',
  config: config(),
  turns: [turn()],
  context: '/src/hello/environment',
  dockerfile: { text: 'FROM openenv-local/node:20\n', images: ['openenv-local/node:20'], mapped: [], unresolved: [] },
  image: null,
  sidecars: [],
  refusals: [],
  notes: [],
  ...t,
});
const solution = (files: Record<string, string | null> = {}, solve: string | null = 'echo hi > hello.txt'): SolutionRead => ({
  files: Object.entries(files).map(([name, text]) => ({ name, data: text === null ? null : Buffer.from(text) })),
  solve: solve === null ? null : Buffer.from(solve),
});
const read = (t: HarborTask, solutions: SolutionRead[] | null = t.turns.map(() => solution())): ReadTask => ({ task: t, source: `ds/${t.id}`, solutions });
const opts = (o: Partial<MapOptions> = {}): MapOptions => ({ name: 'b', sources: ['ds'], evalIds: new Set(), buildWithNetwork: false, ...o });

describe('mapTasks', () => {
  it('maps a one-step task to a shell env built without network, a verified row with its golden call, and a manifest the format takes', () => {
    const d = mapTasks([read(task({ config: config({ agentTimeoutS: 60, metadata: { difficulty: 'easy' } }) }))], opts());
    expect(d.manifest.envs).toEqual({
      hello: { kind: 'shell', build: 'envs/hello', build_network: 'none', resources: { memory_mb: 2048, cpus: 1, pids: 1024 } },
    });
    expect(d.manifest).toMatchObject({
      name: 'b',
      version: '1.0.0',
      default_split: 'train',
      splits: { train: 'tasks/train.jsonl' },
      max_turns: 1,
      groups: { difficulty: 'meta.difficulty' },
    });
    expect(ManifestSchema.safeParse(d.manifest).success).toBe(true);
    const row = d.rows.train[0]!;
    expect(TaskLineSchema.safeParse(row).success).toBe(true);
    expect(row).toMatchObject({
      task_id: 'hello',
      toolset: 'shell',
      env: 'hello',
      turns: ['Make hello.txt.'],
      verifier: { tests: 'verifiers/hello', timeout_s: 600 },
      time_budget_s: 60,
    });
    expect(row.meta).toEqual({ harbor: { source: 'ds/hello', schema_version: '1.0', metadata: { difficulty: 'easy' } }, difficulty: 'easy' });
    expect(row.golden!.map((s) => s.tool)).toEqual(['bash', 'end_turn']);
    expect(row.golden![0]!.arguments).toEqual({
      command: expect.stringContaining("cat > /solution/solve.sh <<'OPENENV_SOLVE_EOF'\necho hi > hello.txt\n"),
      timeout_s: 60,
    });
    expect(d.copies).toEqual([
      { from: '/src/hello/environment', to: 'envs/hello' },
      { merge: ['/src/t/tests'], to: 'verifiers/hello' },
    ]);
    expect(d.files.map((f) => f.path)).toEqual(['envs/hello/Dockerfile', 'tasks/train.jsonl', 'bundle.json', 'README.md']);
    expect(JSON.parse(d.files.find((f) => f.path === 'bundle.json')!.text)).toEqual(d.manifest);
    expect(d.files.find((f) => f.path === 'tasks/train.jsonl')!.text).toBe(`${JSON.stringify(row)}\n`);
    expect(d.tasks).toEqual([{ id: 'hello', split: 'train', turns: 1, env: 'hello', golden: true, image: 'Dockerfile' }]);
    expect(d.notes).toEqual([]);
  });

  it('maps [[steps]] to turns verified one by one, with uploads, readiness checks and a min_reward; notes the multi-step caveat', () => {
    const step = (name: string, s: Partial<HarborStep> = {}): HarborStep => ({ name, verifierEnv: {}, artifacts: [], ...s });
    const t = task({
      id: 'Two Steps',
      config: config({
        steps: [step('a', { minReward: 1, agentTimeoutS: 30 }), step('b', { verifierMode: 'separate', artifacts: ['/app/out'] })],
        stepReward: 'final',
        healthcheck: { command: 'true', intervalS: 1, timeoutS: 2, retries: 3 },
      }),
      turns: [turn({ step: 'a', instruction: 'one', upload: '/src/steps/a/workdir' }), turn({ step: 'b', instruction: 'two' })],
    });
    const d = mapTasks([read(t)], opts({ evalIds: new Set(['Two Steps']), agent: 'my-agent' }));
    const row = d.rows.eval[0]!;
    expect(TaskLineSchema.safeParse(row).success).toBe(true);
    expect(row.env).toBe('two-steps');
    expect(row.max_turns).toBe(2);
    expect(row.turn_reward).toBe('final');
    expect(row.verifier).toBeUndefined();
    expect(row.per_turn).toEqual([
      {
        time_budget_s: 30,
        verifier: { tests: 'verifiers/Two Steps/a', timeout_s: 600 },
        min_reward: { reward: 1 },
        upload: 'uploads/Two Steps/a',
        ready_check: { command: 'true', interval_s: 1, timeout_s: 2, retries: 3 },
      },
      { verifier: { tests: 'verifiers/Two Steps/b', timeout_s: 600, mode: 'clean', outputs: ['/logs/artifacts', '/app/out'] } },
    ]);
    expect(row.golden!.map((s) => s.tool)).toEqual(['bash', 'end_turn', 'bash', 'end_turn']);
    expect(d.manifest).toMatchObject({
      default_split: 'eval',
      splits: { eval: 'tasks/eval.jsonl' },
      max_turns: 2,
      harness: { command: ['sh', '-c', 'my-agent'] },
    });
    expect(d.notes.map((n) => [n.field, n.tasks])).toEqual([['[[steps]]', ['Two Steps']]]);
  });

  it("gives a task's docker_image and its sidecars, a build sidecar's Dockerfile written over its copied folder", () => {
    const t = task({
      context: null,
      dockerfile: null,
      image: 'registry.example/app:1',
      config: config({ workdir: '/app', agentUser: 'agent', memoryMb: 512, envVars: { A: '1' } }),
      sidecars: [
        {
          name: 'db',
          build: 'db',
          environment: {},
          dockerfile: { text: 'FROM postgres\n', images: ['postgres'], mapped: [], unresolved: [] },
          healthcheck: { command: 'pg_isready', intervalS: 5, timeoutS: 3, retries: 4, startIntervalS: 1, startPeriodS: 2 },
        },
        { name: 'cache', image: 'redis:7', environment: { X: 'y' } },
      ],
    });
    const d = mapTasks([read(t)], opts({ buildWithNetwork: true }));
    expect(d.manifest.envs.hello).toEqual({
      kind: 'shell',
      image: 'registry.example/app:1',
      workdir: '/app',
      agent_user: 'agent',
      resources: { memory_mb: 512, cpus: 1, pids: 1024 },
      environment: { A: '1' },
      sidecars: {
        db: { build: 'sidecars/hello/db', healthcheck: { command: 'pg_isready', interval_s: 1, timeout_s: 3, retries: 4, start_period_s: 2 } },
        cache: { image: 'redis:7', environment: { X: 'y' } },
      },
    });
    expect(ManifestSchema.safeParse(d.manifest).success).toBe(true);
    expect(d.copies[0]).toEqual({ from: '/src/hello/environment/db', to: 'sidecars/hello/db' });
    expect(d.files[0]).toEqual({ path: 'sidecars/hello/db/Dockerfile', text: 'FROM postgres\n' });
    expect(d.tasks[0]!.image).toBe('docker_image');
  });

  it('leaves a task without a golden solution when a turn has none, or a solution file write_file cannot carry (noted)', () => {
    const none = mapTasks([read(task(), null)], opts());
    expect(none.rows.train[0]!.golden).toBeUndefined();
    expect(none.tasks[0]!.golden).toBe(false);
    const bad = mapTasks([read(task(), [{ files: [{ name: 'bin', data: Buffer.from([0xff, 0]) }], solve: Buffer.from('x') }])], opts());
    expect(bad.rows.train[0]!.golden).toBeUndefined();
    expect(bad.notes).toEqual([
      { field: 'solution', message: 'solution file bin is not UTF-8 text, which write_file cannot carry: the task gets no golden solution', tasks: ['hello'] },
    ]);
  });

  it('gives two tasks whose ids slug alike envs of their own, and groups a task without the key as unspecified', () => {
    const d = mapTasks([read(task({ id: 'A', config: config({ metadata: { tags: ['y', 'x'] } }) })), read(task({ id: 'a' }))], opts());
    expect(Object.keys(d.manifest.envs)).toEqual(['a', 'a-2']);
    expect(d.rows.train.map((r) => (r.meta as Record<string, unknown>).tags)).toEqual(['x,y', 'unspecified']);
  });
});

describe('the map helpers', () => {
  it('writes the solution files, then runs solve.sh with [solution] env under an EOF the script does not hold', () => {
    const g = goldenOf(solution({ 'data/in.txt': 'in' }, 'echo OPENENV_SOLVE_EOF'), { K: "it's" }, 5);
    expect('steps' in g && g.steps).toEqual([
      { tool: 'write_file', arguments: { path: '/solution/data/in.txt', content: 'in' } },
      {
        tool: 'bash',
        arguments: {
          command:
            "mkdir -p /solution && cat > /solution/solve.sh <<'OPENENV_SOLVE_EOF_'\necho OPENENV_SOLVE_EOF\nOPENENV_SOLVE_EOF_\nK='it'\\''s' bash /solution/solve.sh",
          timeout_s: 5,
        },
      },
    ]);
    expect(goldenOf(solution({ x: null }), {}, 5)).toEqual({ problem: 'solution file x is no longer a regular file' });
    expect(goldenOf(solution({}, null), {}, 5)).toEqual({ problem: 'solve.sh is no longer a regular file' });
  });
  it('slugs ids, aggregates notes by field and message, and picks the eval split', () => {
    expect(slug('__Hello World!')).toBe('hello-world-');
    expect(slug('***')).toBe('task');
    const n = { field: 'f', message: 'm' };
    expect(
      aggregate([
        { id: 'a', notes: [n] },
        { id: 'b', notes: [n, { field: 'g', message: 'm' }] },
      ]),
    ).toEqual([
      { field: 'f', message: 'm', tasks: ['a', 'b'] },
      { field: 'g', message: 'm', tasks: ['b'] },
    ]);
    expect(evalSet(['a', 'b'], { evalTasks: ['b'] })).toEqual(new Set(['b']));
    expect(() => evalSet(['a'], { evalTasks: ['z'] })).toThrow(ImportError);
    expect(evalSet(['a', 'b', 'c', 'd'], { evalShare: 0.5 }).size).toBe(2);
    expect(evalSet(['a', 'b', 'c', 'd'], { evalShare: 0.5 })).toEqual(evalSet(['d', 'c', 'b', 'a'], { evalShare: 0.5 }));
  });
});
