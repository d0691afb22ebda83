/**
 * The import's map: the read tasks (read.ts) made a typed draft of the bundle (draft.ts), a pure
 * function of what was read (no disk, no engine): one shell env per task built from its
 * environment/ (its base images mapped), the built-in shell toolset, each task's tests as its
 * verifier, its solution as the golden `bash` call, its [[steps]] as turns.
 */
import { createHash } from 'node:crypto';
import path from 'node:path';
import { SHELL_TOOLS } from '../../defaults.js';
import { BASH_TOOL, SHELL_BUILTIN, SHELL_SYSTEM_PROMPT, WRITE_FILE_TOOL } from '../../tools/shell/specs.js';
import { REWARD_TXT_SCORE } from '../../verifier/reward-files.js';
import { ARTIFACTS_DIR } from '../../verifier/layout.js';
import type { Draft, FileDraft, FolderCopy, ImportDraft } from './draft.js';
import { ImportError, type AggregatedNote, type ImportedTask, type ImportOptions } from './options.js';
import type { ReadTask, SolutionRead } from './read.js';
import type { HarborTask } from './read-task.js';
import type { TaskNote } from './task-config.js';

/** the defaults an imported shell env gets where its task.toml says nothing */
const IMPORTED_ENV = { memoryMb: 2048, cpus: 1, pids: 1024 } as const;
/** what the golden solution writes the task's solution as, before running it */
const SOLUTION_DIR = '/solution';
const VERIFIER_DEFAULT_TIMEOUT_S = 600;
const GROUP_KEYS = ['difficulty', 'category', 'tags'] as const;
const UNSPECIFIED = 'unspecified';

export interface MapOptions {
  /** the bundle's name */
  name: string;
  version?: string;
  /** the sources' folder names, as the bundle's description names them */
  sources: string[];
  /** the ids of the tasks put in the eval split (evalSet) */
  evalIds: ReadonlySet<string>;
  /** the harness every task runs (`sh -c AGENT`) */
  agent?: string;
  /** the images build with the engine's network (--build-with-network) */
  buildWithNetwork: boolean;
}

/** a name the bundle format takes for an env, from a task id */
export function slug(id: string): string {
  return (
    id
      .toLowerCase()
      .replace(/[^a-z0-9._-]+/g, '-')
      .replace(/^[^a-z0-9]+/, '')
      .slice(0, 60) || 'task'
  );
}

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** the golden calls of a turn: its solution's files written to /solution, then solve.sh run there with [solution] env */
export function goldenOf(solution: SolutionRead, env: Record<string, string>, timeoutS: number): { steps: Draft<'golden'>[] } | { problem: string } {
  const steps: Draft<'golden'>[] = [];
  for (const { name: f, data } of solution.files) {
    if (data === null) return { problem: `solution file ${f} is no longer a regular file` };
    const text = new TextDecoder('utf-8', { fatal: false }).decode(data);
    if (Buffer.compare(Buffer.from(text, 'utf8'), data) !== 0 || data.includes(0))
      return { problem: `solution file ${f} is not UTF-8 text, which write_file cannot carry` };
    steps.push({ tool: WRITE_FILE_TOOL, arguments: { path: `${SOLUTION_DIR}/${f}`, content: text } });
  }
  if (solution.solve === null) return { problem: 'solve.sh is no longer a regular file' };
  let script = solution.solve.toString('utf8');
  if (!script.endsWith('\n')) script += '\n';
  let eof = 'OPENENV_SOLVE_EOF';
  while (script.includes(eof)) eof += '_';
  const vars = Object.entries(env)
    .map(([k, v]) => `${k}=${shellQuote(v)} `)
    .join('');
  const command = `mkdir -p ${SOLUTION_DIR} && cat > ${SOLUTION_DIR}/solve.sh <<'${eof}'\n${script}${eof}\n${vars}bash ${SOLUTION_DIR}/solve.sh`;
  steps.push({ tool: BASH_TOOL, arguments: { command, timeout_s: timeoutS } });
  return { steps };
}

/** a group's value: scalars as they are, lists joined */
function groupValue(v: unknown): string | number | boolean {
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return v;
  if (Array.isArray(v)) return v.map(String).sort().join(',');
  return JSON.stringify(v);
}

function systemPrompt(turns: number): string {
  if (turns === 1) return SHELL_SYSTEM_PROMPT;
  return `${SHELL_SYSTEM_PROMPT}\nThis task comes in ${turns} steps, one per turn: when a step is done, call end_turn; the step is checked then, and the next step's instructions follow.`;
}

/** the tasks' notes, one per (field, message), with the tasks that have it */
export function aggregate(tasks: readonly { id: string; notes: readonly TaskNote[] }[]): AggregatedNote[] {
  const by = new Map<string, AggregatedNote>();
  for (const t of tasks) {
    for (const n of t.notes) {
      const key = `${n.field}\0${n.message}`;
      const a = by.get(key) ?? { field: n.field, message: n.message, tasks: [] };
      a.tasks.push(t.id);
      by.set(key, a);
    }
  }
  return [...by.values()];
}

/** which tasks go to eval: named ones, or a share chosen by a hash of the ids (stable as tasks come and go) */
export function evalSet(ids: string[], opts: Pick<ImportOptions, 'evalTasks' | 'evalShare'>): Set<string> {
  if (opts.evalTasks && opts.evalTasks.length > 0) {
    const unknown = opts.evalTasks.filter((t) => !ids.includes(t));
    if (unknown.length) throw new ImportError(`--eval names no imported task: ${unknown.join(', ')}`);
    return new Set(opts.evalTasks);
  }
  const share = opts.evalShare ?? 0;
  const n = Math.round(share * ids.length);
  const hash = (id: string) => createHash('sha256').update(id).digest('hex');
  return new Set([...ids].sort((a, b) => (hash(a) < hash(b) ? -1 : 1)).slice(0, n));
}

/**
 * The env's sidecars (bundle.json's envs.<env>.sidecars) from its compose services beside main: a
 * build's folder of environment/ copied to sidecars/<env>/<name> with its Dockerfile mapped (built
 * without network unless trusted, as the env's), an image as mapped; their healthchecks as given.
 */
function sidecarsOf(t: HarborTask, envName: string, withNetwork: boolean, copies: FolderCopy[], files: FileDraft[]): Record<string, Draft<'sidecar'>> {
  const out: Record<string, Draft<'sidecar'>> = {};
  for (const sc of t.sidecars) {
    let spec: Draft<'sidecar'>;
    if (sc.build !== undefined && sc.dockerfile) {
      const rel = `sidecars/${envName}/${sc.name}`;
      copies.push({ from: path.join(t.dir, 'environment', sc.build), to: rel });
      files.push({ path: `${rel}/Dockerfile`, text: sc.dockerfile.text });
      spec = { build: rel, ...(!withNetwork ? { build_network: 'none' } : {}) };
    } else {
      spec = { image: sc.image };
    }
    if (Object.keys(sc.environment).length) spec.environment = sc.environment;
    const h = sc.healthcheck;
    if (h)
      spec.healthcheck = {
        command: sc.healthcheckArgv ?? h.command,
        // the engine runs the check every interval from the start (a start_interval is Harbor's faster first checks)
        interval_s: h.startIntervalS !== undefined ? Math.min(h.startIntervalS, h.intervalS) : h.intervalS,
        timeout_s: h.timeoutS,
        retries: h.retries,
        ...(h.startPeriodS !== undefined ? { start_period_s: h.startPeriodS } : {}),
      };
    out[sc.name] = spec;
  }
  return out;
}

/** the env of a task: its image, built from its environment/ (its Dockerfile mapped), or named; its resources and sidecars */
function envOf(t: HarborTask, envName: string, withNetwork: boolean, copies: FolderCopy[], files: FileDraft[]): Draft<'env'> {
  const c = t.config;
  let env: Draft<'env'>;
  if (t.context) {
    copies.push({ from: t.context, to: `envs/${envName}` });
    files.push({ path: `envs/${envName}/Dockerfile`, text: t.dockerfile!.text });
    // a task's Dockerfile is its author's code, run on this machine at build time: without network unless trusted
    env = { kind: 'shell', build: `envs/${envName}`, ...(!withNetwork ? { build_network: 'none' } : {}) };
  } else {
    env = { kind: 'shell', image: t.image! };
  }
  if (c.workdir) env.workdir = c.workdir;
  if (c.agentUser) env.agent_user = c.agentUser;
  env.resources = {
    memory_mb: c.memoryMb ?? IMPORTED_ENV.memoryMb,
    cpus: c.cpus ?? IMPORTED_ENV.cpus,
    pids: IMPORTED_ENV.pids,
    ...(c.storageMb !== undefined ? { storage_mb: c.storageMb } : {}),
  };
  if (Object.keys(c.envVars).length) env.environment = c.envVars;
  if (t.sidecars.length) env.sidecars = sidecarsOf(t, envName, withNetwork, copies, files);
  return env;
}

/** a task's row: its turns, their verifiers, uploads and readiness checks, its golden solution, its meta */
function rowOf(
  { task: t, source, solutions }: ReadTask,
  envName: string,
  groupsUsed: ReadonlySet<string>,
  copies: FolderCopy[],
  notes: AggregatedNote[],
): { row: Draft<'row'>; golden: boolean } {
  const c = t.config;
  const multi = c.steps !== null;
  const row: Draft<'row'> = {
    task_id: t.id,
    toolset: SHELL_BUILTIN,
    env: envName,
    system_prompt: systemPrompt(t.turns.length),
    turns: t.turns.map((x) => x.instruction),
  };
  if (t.turns.length > 1) row.max_turns = t.turns.length;
  const golden: Draft<'golden'>[] = [];
  let goldenOk = solutions !== null;
  const perTurn: Draft<'turn'>[] = [];
  for (const [i, turn] of t.turns.entries()) {
    const step = multi ? c.steps![i]! : null;
    const testsRel = multi ? `verifiers/${t.id}/${turn.step}` : `verifiers/${t.id}`;
    copies.push({ merge: turn.tests, to: testsRel });
    const verifier: Draft<'verifier'> = {
      tests: testsRel,
      timeout_s: step?.verifierTimeoutS ?? c.verifierTimeoutS ?? VERIFIER_DEFAULT_TIMEOUT_S,
      ...(Object.keys({ ...c.verifierEnv, ...step?.verifierEnv }).length ? { env: { ...c.verifierEnv, ...step?.verifierEnv } } : {}),
      // a separate verifier: a clean one, given Harbor's /logs/artifacts and the artifacts the task (and the step) declares
      ...((step?.verifierMode ?? c.verifierMode) === 'separate'
        ? { mode: 'clean' as const, outputs: [...new Set([ARTIFACTS_DIR, ...(c.artifacts ?? []), ...(step?.artifacts ?? [])])] }
        : {}),
    };
    const spec: Draft<'turn'> = {};
    const budget = step?.agentTimeoutS ?? (multi ? c.agentTimeoutS : undefined);
    if (budget !== undefined) spec.time_budget_s = budget;
    if (multi) spec.verifier = verifier;
    else row.verifier = verifier;
    if (step?.minReward !== undefined) spec.min_reward = typeof step.minReward === 'number' ? { [REWARD_TXT_SCORE]: step.minReward } : step.minReward;
    if (turn.upload) {
      const rel = `uploads/${t.id}/${turn.step}`;
      copies.push({ merge: [turn.upload], to: rel });
      spec.upload = rel;
    }
    const check = step?.healthcheck ?? (i === 0 ? c.healthcheck : undefined);
    if (check)
      spec.ready_check = {
        command: check.command,
        interval_s: check.intervalS,
        timeout_s: check.timeoutS,
        retries: check.retries,
        ...(check.startPeriodS !== undefined ? { start_period_s: check.startPeriodS } : {}),
        ...(check.startIntervalS !== undefined ? { start_interval_s: check.startIntervalS } : {}),
      };
    perTurn.push(spec);
    if (goldenOk) {
      const timeoutS = Math.min(budget ?? c.agentTimeoutS ?? SHELL_TOOLS.defaultTimeoutS * 5, SHELL_TOOLS.maxTimeoutS);
      const g = goldenOf(solutions![i]!, c.solutionEnv, timeoutS);
      if ('problem' in g) {
        goldenOk = false;
        notes.push({ field: 'solution', message: `${g.problem}: the task gets no golden solution`, tasks: [t.id] });
      } else {
        golden.push(...g.steps, { tool: 'end_turn' });
      }
    }
  }
  if (!multi && c.agentTimeoutS !== undefined) row.time_budget_s = c.agentTimeoutS;
  if (perTurn.some((p) => Object.keys(p).length > 0)) row.per_turn = perTurn;
  if (multi && c.stepReward) row.turn_reward = c.stepReward;
  if (goldenOk) row.golden = golden;
  const meta: Record<string, unknown> = {
    harbor: { source, schema_version: c.schemaVersion, ...(c.task ? { task: c.task } : {}), metadata: c.metadata },
  };
  for (const k of groupsUsed) meta[k] = c.metadata[k] === undefined ? UNSPECIFIED : groupValue(c.metadata[k]);
  row.meta = meta;
  return { row, golden: goldenOk };
}

function readme(name: string, description: string): string {
  return [
    `# ${name}`,
    '',
    description,
    '',
    'Written by `openenv-bundle import harbor`: each task runs in its own shell env (`envs/<task>/`, its `environment/`),',
    'is offered the built-in shell toolset (`bash`, `read_file`, `write_file`) and is scored by its verifier',
    '(`verifiers/<task>/`, its `tests/`), copied into the container at `/tests` only once the agent is done.',
    "Its `solution/solve.sh` is the golden solution, one `bash` call. See docs/harbor.md in the server's repository.",
    '',
  ].join('\n');
}

/** The accepted tasks (none refused) as the typed draft of one bundle. */
export function mapTasks(read: readonly ReadTask[], opts: MapOptions): ImportDraft {
  const tasks = read.map((r) => r.task);
  const envs: Record<string, Draft<'env'>> = {};
  const rows: ImportDraft['rows'] = { train: [], eval: [] };
  const copies: FolderCopy[] = [];
  const files: FileDraft[] = [];
  const notes: AggregatedNote[] = [];
  const summary: ImportedTask[] = [];
  const groupsUsed = new Set<string>();
  for (const t of tasks) for (const k of GROUP_KEYS) if (t.config.metadata[k] !== undefined) groupsUsed.add(k);
  const envNames = new Set<string>();
  for (const r of read) {
    const t = r.task;
    let envName = slug(t.id);
    for (let i = 2; envNames.has(envName); i++) envName = `${slug(t.id)}-${i}`;
    envNames.add(envName);
    envs[envName] = envOf(t, envName, opts.buildWithNetwork, copies, files);
    const { row, golden } = rowOf(r, envName, groupsUsed, copies, notes);
    const split = opts.evalIds.has(t.id) ? 'eval' : 'train';
    rows[split].push(row);
    summary.push({ id: t.id, split, turns: t.turns.length, env: envName, golden, image: t.image ? 'docker_image' : 'Dockerfile' });
  }
  // turn_reward's mean and final are Harbor's (src/verifier/turns.ts); what still differs for a multi-step task
  const multiStep = tasks.filter((t) => t.config.steps !== null).map((t) => t.id);
  if (multiStep.length > 0) {
    notes.push({
      field: '[[steps]]',
      message:
        "a step whose verifier fails (no reward file, or past its timeout) ends the episode without a reward here; Harbor stops there too but scores the steps verified before it. And a served episode is one conversation, each step's prompt after the steps before it (a harness from --agent starts afresh each step), where Harbor starts each step's agent afresh",
      tasks: multiStep,
    });
  }

  const splits: Record<string, string> = {};
  for (const s of ['train', 'eval'] as const) {
    if (rows[s].length === 0) continue;
    splits[s] = `tasks/${s}.jsonl`;
    files.push({ path: splits[s], text: rows[s].map((r) => JSON.stringify(r)).join('\n') + '\n' });
  }
  const description = `Harbor tasks imported from ${opts.sources.join(', ')} (${tasks.length} task(s)), served with the built-in shell toolset.`;
  const manifest = {
    name: opts.name,
    version: opts.version ?? '1.0.0',
    description,
    default_split: rows.train.length > 0 ? 'train' : 'eval',
    splits,
    envs,
    toolsets: { [SHELL_BUILTIN]: { builtin: [SHELL_BUILTIN] } },
    max_turns: Math.max(1, ...tasks.map((t) => t.turns.length)),
    reward: 'mean',
    groups: Object.fromEntries([...groupsUsed].map((k) => [k, `meta.${k}`])),
    scores: { [REWARD_TXT_SCORE]: { min: 0, max: 1 } },
    ...(opts.agent !== undefined ? { harness: { command: ['sh', '-c', opts.agent] } } : {}),
  } satisfies ImportDraft['manifest'];
  files.push({ path: 'bundle.json', text: `${JSON.stringify(manifest, null, 2)}\n` });
  files.push({ path: 'README.md', text: readme(opts.name, description) });
  return { manifest, rows, copies, files, tasks: summary, notes };
}
