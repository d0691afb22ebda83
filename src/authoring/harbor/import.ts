/**
 * `openenv-bundle import harbor SRC… --out DIR`: Harbor tasks (a task folder, or a dataset folder
 * of them) written as an ordinary bundle (docs/harbor.md, "import"): one shell env per task built
 * from its environment/ (its base images mapped with --base-image), the built-in shell toolset,
 * each task's tests as its verifier (never in the build context), its solution as the golden
 * `bash` call, its [[steps]] as turns. The bundle is written to a temporary folder beside DIR and
 * renamed into place once whole, then loaded as the server loads it.
 */
import { createHash } from 'node:crypto';
import { cp, lstat, mkdir, readdir, readlink, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { SHELL_TOOLS } from '../../defaults.js';
import { BASH_TOOL, SHELL_BUILTIN, SHELL_SYSTEM_PROMPT, WRITE_FILE_TOOL } from '../../tools/shell/specs.js';
import { REWARD_TXT_SCORE } from '../../verifier/reward-files.js';
import { ARTIFACTS_DIR } from '../../verifier/layout.js';
import { loadBundle, NAME_PATTERN } from '../../bundle/index.js';
import type { BaseImageRule } from './dockerfile.js';
import { listFiles, readHarborTask, type HarborTask, type HarborTurn, type ImagesChoice } from './read-task.js';
import { readRegular } from './task-folder.js';
import { testsFetchNotes } from './tests-fetch.js';
import type { Finding } from './task-config.js';

/** A command line or source to fix: nothing was written. */
export class ImportError extends Error {
  override readonly name = 'ImportError';
}

export interface ImportOptions {
  sources: string[];
  out: string;
  /** the bundle's name; default: DIR's name */
  name?: string;
  version?: string;
  /** the share of tasks put in the eval split (chosen by a hash of their ids) */
  evalShare?: number;
  /** task ids put in the eval split */
  evalTasks?: string[];
  baseImages: BaseImageRule[];
  /** the harness every task runs (the bundle's `harness`: `sh -c AGENT`), making them harness episodes */
  agent?: string;
  ignoreInternet: boolean;
  /** build the tasks' images with the engine's network (their RUN steps download); default: without network */
  buildWithNetwork?: boolean;
  /** import the tasks that can be, leaving out (and listing) the refused ones */
  skipRefused: boolean;
  /** replace DIR when it holds a bundle already */
  force: boolean;
  /** a task with both a docker_image and environment/Dockerfile: which its env is (read-task.ts, IMAGE_CHOICES); default auto */
  images?: ImagesChoice;
  /** which images the engine has; null when no engine answers (nothing checked) */
  hasImages?: (refs: string[]) => Promise<Set<string> | null>;
}

export interface AggregatedFinding {
  field: string;
  message: string;
  tasks: string[];
}

export interface ImportResult {
  out: string;
  bundle: string;
  tasks: { id: string; split: string; turns: number; env: string; golden: boolean; image: 'docker_image' | 'Dockerfile' }[];
  refused: { id: string; findings: Finding[] }[];
  notes: AggregatedFinding[];
  /** images the envs need that the engine does not have (`base`: a Dockerfile's FROM; `task`: a task's own docker_image); null: not checked (no engine) */
  missingImages: { image: string; kind: 'base' | 'task'; tasks: string[] }[] | null;
  written: boolean;
}

/** the defaults an imported shell env gets where its task.toml says nothing */
const IMPORTED_ENV = { memoryMb: 2048, cpus: 1, pids: 1024 } as const;
/** what the golden solution writes the task's solution as, before running it */
const SOLUTION_DIR = '/solution';
const VERIFIER_DEFAULT_TIMEOUT_S = 600;

const isDir = async (p: string) => (await stat(p).catch(() => null))?.isDirectory() === true;

/** a path that exists as anything (a file, a folder, a link, a FIFO), without following a link or opening it */
const exists = async (p: string) => (await lstat(p).catch(() => null)) !== null;

/**
 * a task folder of SRC; `source`: where it is, relative to SRC's parent (SRC's name, then the
 * task's), as the bundle records it (never the machine's absolute path); `linkedTo`: a dataset's
 * entry that is a symbolic link, and where it points (refused)
 */
interface TaskFolderRef {
  dir: string;
  source: string;
  linkedTo?: string;
}

/**
 * the task folders SRC stands for: itself (it holds task.toml), else its entries that do; an
 * entry that is a symbolic link to such a folder is listed to be refused, never read
 */
async function taskFolders(src: string): Promise<TaskFolderRef[]> {
  if (!(await isDir(src))) throw new ImportError(`${src}: no such folder`);
  if (await exists(path.join(src, 'task.toml'))) return [{ dir: path.resolve(src), source: path.basename(path.resolve(src)) }];
  const out: TaskFolderRef[] = [];
  for (const name of (await readdir(src)).sort()) {
    const d = path.join(src, name);
    if (!(await isDir(d)) || !(await exists(path.join(d, 'task.toml')))) continue;
    const linked = (await lstat(d)).isSymbolicLink();
    const source = `${path.basename(path.resolve(src))}/${name}`;
    out.push(linked ? { dir: path.resolve(d), source, linkedTo: await readlink(d) } : { dir: path.resolve(d), source });
  }
  if (out.length === 0) throw new ImportError(`${src}: neither a Harbor task (a folder with task.toml) nor a dataset of them (folders with task.toml)`);
  return out;
}

/** a name the bundle format takes for an env, from a task id */
function slug(id: string): string {
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

/** the golden `bash` call of a turn: writes solve.sh to /solution and runs it, with [solution] env */
async function goldenOf(turn: HarborTurn, env: Record<string, string>, timeoutS: number): Promise<{ steps: Record<string, unknown>[] } | { problem: string }> {
  const folder = turn.solution!;
  const steps: Record<string, unknown>[] = [];
  for (const f of (await listFiles(folder)).files) {
    if (f === 'solve.sh') continue;
    const data = await readRegular(path.join(folder, f));
    if (data === null) return { problem: `solution file ${f} is no longer a regular file` };
    const text = new TextDecoder('utf-8', { fatal: false }).decode(data);
    if (Buffer.compare(Buffer.from(text, 'utf8'), data) !== 0 || data.includes(0))
      return { problem: `solution file ${f} is not UTF-8 text, which write_file cannot carry` };
    steps.push({ tool: WRITE_FILE_TOOL, arguments: { path: `${SOLUTION_DIR}/${f}`, content: text } });
  }
  const solve = await readRegular(path.join(folder, 'solve.sh'));
  if (solve === null) return { problem: 'solve.sh is no longer a regular file' };
  let script = solve.toString('utf8');
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

const GROUP_KEYS = ['difficulty', 'category', 'tags'] as const;
const UNSPECIFIED = 'unspecified';

function systemPrompt(turns: number): string {
  if (turns === 1) return SHELL_SYSTEM_PROMPT;
  return `${SHELL_SYSTEM_PROMPT}\nThis task comes in ${turns} steps, one per turn: when a step is done, call end_turn; the step is checked then, and the next step's instructions follow.`;
}

function aggregate(tasks: { id: string; notes: Finding[] }[]): AggregatedFinding[] {
  const by = new Map<string, AggregatedFinding>();
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
function evalSet(ids: string[], opts: ImportOptions): Set<string> {
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

/** copies several folders into one, later ones' files over earlier ones' */
async function mergeInto(dest: string, folders: string[]): Promise<void> {
  await mkdir(dest, { recursive: true });
  for (const f of folders) await cp(f, dest, { recursive: true, force: true, verbatimSymlinks: true });
}

/**
 * The env's sidecars (bundle.json's envs.<env>.sidecars) from its compose services beside main: a
 * build's folder of environment/ copied to sidecars/<env>/<name> with its Dockerfile mapped (built
 * without network unless trusted, as the env's), an image as mapped; their healthchecks as given.
 */
async function writeSidecars(t: HarborTask, envName: string, tmp: string, withNetwork: boolean): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const sc of t.sidecars) {
    const spec: Record<string, unknown> = {};
    if (sc.build !== undefined && sc.dockerfile) {
      const rel = `sidecars/${envName}/${sc.name}`;
      await cp(path.join(t.dir, 'environment', sc.build), path.join(tmp, rel), { recursive: true, verbatimSymlinks: true });
      await writeFile(path.join(tmp, rel, 'Dockerfile'), sc.dockerfile.text);
      spec.build = rel;
      if (!withNetwork) spec.build_network = 'none';
    } else {
      spec.image = sc.image;
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

export async function importHarbor(opts: ImportOptions): Promise<ImportResult> {
  const name = opts.name ?? slug(path.basename(path.resolve(opts.out)));
  if (!NAME_PATTERN.test(name)) throw new ImportError(`the bundle name ${JSON.stringify(name)} must match ${NAME_PATTERN.source}: give --name`);
  const out = path.resolve(opts.out);
  if (await isDir(out)) {
    const entries = await readdir(out);
    if (entries.length > 0 && !(opts.force && entries.includes('bundle.json'))) {
      throw new ImportError(`${opts.out} exists and is not empty${entries.includes('bundle.json') ? ': it holds a bundle; --force replaces it' : ''}`);
    }
  } else if (await stat(out).catch(() => null)) {
    throw new ImportError(`${opts.out} exists and is not a folder`);
  }

  const folders: TaskFolderRef[] = [];
  for (const src of opts.sources) folders.push(...(await taskFolders(src)));
  const seen = new Map<string, string>();
  for (const { dir } of folders) {
    const id = path.basename(dir);
    if (seen.has(id)) throw new ImportError(`two tasks are named ${id} (${seen.get(id)} and ${dir}): a task's id is its folder's name`);
    seen.set(id, dir);
  }

  // whether the engine has a task's docker_image (--images auto); asked no more once no engine answered
  let engineAnswers = true;
  const hasImage = async (ref: string): Promise<boolean | null> => {
    if (!opts.hasImages || !engineAnswers) return null;
    const present = await opts.hasImages([ref]);
    engineAnswers = present !== null;
    return present === null ? null : present.has(ref);
  };
  const sourceOf = new Map(folders.map((f) => [f.dir, f.source]));
  const read: HarborTask[] = [];
  for (const f of folders) {
    read.push(
      await readHarborTask(f.dir, {
        rules: opts.baseImages,
        ignoreInternet: opts.ignoreInternet,
        buildWithNetwork: opts.buildWithNetwork === true,
        images: opts.images ?? 'auto',
        hasImage,
        ...(f.linkedTo !== undefined ? { linkedTo: f.linkedTo } : {}),
      }),
    );
  }
  // a task whose test.sh fetches (uv, pip, curl | sh, apt-get…) cannot run its tests offline: named
  for (const t of read) if (t.refusals.length === 0) t.notes.push(...(await testsFetchNotes(t.turns)));
  const refused = read.filter((t) => t.refusals.length > 0).map((t) => ({ id: t.id, findings: t.refusals }));
  const tasks = read.filter((t) => t.refusals.length === 0);
  const notes = aggregate(read.filter((t) => t.refusals.length === 0));
  const base: Omit<ImportResult, 'missingImages' | 'written' | 'tasks'> = { out, bundle: name, refused, notes };

  // images the builds need, asked of the engine
  const needs = new Map<string, { kind: 'base' | 'task'; tasks: string[] }>();
  for (const t of tasks) {
    // a Dockerfile's FROM images are bases; an image run as it is (the task's, a sidecar's) is the task's own
    type Need = [image: string, kind: 'base' | 'task'];
    const kinds: Need[] = (t.dockerfile?.images ?? (t.image ? [t.image] : [])).map((i): Need => [i, t.image ? 'task' : 'base']);
    for (const sc of t.sidecars) kinds.push(...(sc.dockerfile ? sc.dockerfile.images.map((i): Need => [i, 'base']) : [[sc.image!, 'task'] as Need]));
    for (const [img, kind] of kinds) {
      const n = needs.get(img) ?? { kind, tasks: [] };
      n.tasks.push(t.id);
      needs.set(img, n);
    }
  }
  const present = opts.hasImages && engineAnswers ? await opts.hasImages([...needs.keys()]) : null;
  const missingImages =
    present === null ? null : [...needs].filter(([img]) => !present.has(img)).map(([image, n]) => ({ image, kind: n.kind, tasks: n.tasks }));

  if ((refused.length > 0 && !opts.skipRefused) || tasks.length === 0) {
    return { ...base, tasks: [], missingImages, written: false };
  }

  const evalIds = evalSet(
    tasks.map((t) => t.id),
    opts,
  );
  const tmp = path.join(path.dirname(out), `.${path.basename(out)}.import-${process.pid}-${Date.now()}`);
  await mkdir(tmp, { recursive: true });
  try {
    const envs: Record<string, unknown> = {};
    const rows: Record<string, Record<string, unknown>[]> = { train: [], eval: [] };
    const summary: ImportResult['tasks'] = [];
    const groupsUsed = new Set<string>();
    for (const t of tasks) for (const k of GROUP_KEYS) if (t.config.metadata[k] !== undefined) groupsUsed.add(k);
    const envNames = new Set<string>();
    for (const t of tasks) {
      let envName = slug(t.id);
      for (let i = 2; envNames.has(envName); i++) envName = `${slug(t.id)}-${i}`;
      envNames.add(envName);
      const c = t.config;
      // the env: the task's image, built from its environment/ (its Dockerfile mapped), or named
      const env: Record<string, unknown> = { kind: 'shell' };
      if (t.context) {
        const dest = path.join(tmp, 'envs', envName);
        await cp(t.context, dest, { recursive: true, verbatimSymlinks: true });
        await writeFile(path.join(dest, 'Dockerfile'), t.dockerfile!.text);
        env.build = `envs/${envName}`;
        // a task's Dockerfile is its author's code, run on this machine at build time: without network unless trusted
        if (opts.buildWithNetwork !== true) env.build_network = 'none';
      } else {
        env.image = t.image;
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
      if (t.sidecars.length) env.sidecars = await writeSidecars(t, envName, tmp, opts.buildWithNetwork === true);
      envs[envName] = env;

      // the turns, their verifiers and the golden solution
      const multi = c.steps !== null;
      const row: Record<string, unknown> = {
        task_id: t.id,
        toolset: SHELL_BUILTIN,
        env: envName,
        system_prompt: systemPrompt(t.turns.length),
        turns: t.turns.map((x) => x.instruction),
      };
      if (t.turns.length > 1) row.max_turns = t.turns.length;
      const golden: Record<string, unknown>[] = [];
      let goldenOk = t.turns.every((x) => x.solution !== null);
      const perTurn: Record<string, unknown>[] = [];
      for (const [i, turn] of t.turns.entries()) {
        const step = multi ? c.steps![i]! : null;
        const testsRel = multi ? `verifiers/${t.id}/${turn.step}` : `verifiers/${t.id}`;
        await mergeInto(path.join(tmp, testsRel), turn.tests);
        const verifier = {
          tests: testsRel,
          timeout_s: step?.verifierTimeoutS ?? c.verifierTimeoutS ?? VERIFIER_DEFAULT_TIMEOUT_S,
          ...(Object.keys({ ...c.verifierEnv, ...step?.verifierEnv }).length ? { env: { ...c.verifierEnv, ...step?.verifierEnv } } : {}),
          // a separate verifier: a clean one, given Harbor's /logs/artifacts and the artifacts the task (and the step) declares
          ...((step?.verifierMode ?? c.verifierMode) === 'separate'
            ? { mode: 'clean', outputs: [...new Set([ARTIFACTS_DIR, ...(c.artifacts ?? []), ...(step?.artifacts ?? [])])] }
            : {}),
        };
        const spec: Record<string, unknown> = {};
        const budget = step?.agentTimeoutS ?? (multi ? c.agentTimeoutS : undefined);
        if (budget !== undefined) spec.time_budget_s = budget;
        if (multi) spec.verifier = verifier;
        else row.verifier = verifier;
        if (step?.minReward !== undefined) spec.min_reward = typeof step.minReward === 'number' ? { [REWARD_TXT_SCORE]: step.minReward } : step.minReward;
        if (turn.upload) {
          const rel = `uploads/${t.id}/${turn.step}`;
          await mergeInto(path.join(tmp, rel), [turn.upload]);
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
          const g = await goldenOf(turn, c.solutionEnv, timeoutS);
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
        harbor: { source: sourceOf.get(t.dir) ?? t.id, schema_version: c.schemaVersion, ...(c.task ? { task: c.task } : {}), metadata: c.metadata },
      };
      for (const k of groupsUsed) meta[k] = c.metadata[k] === undefined ? UNSPECIFIED : groupValue(c.metadata[k]);
      row.meta = meta;
      const split = evalIds.has(t.id) ? 'eval' : 'train';
      rows[split]!.push(row);
      summary.push({ id: t.id, split, turns: t.turns.length, env: envName, golden: goldenOk, image: t.image ? 'docker_image' : 'Dockerfile' });
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
      if (rows[s]!.length === 0) continue;
      splits[s] = `tasks/${s}.jsonl`;
      await mkdir(path.join(tmp, 'tasks'), { recursive: true });
      await writeFile(path.join(tmp, splits[s]), rows[s]!.map((r) => JSON.stringify(r)).join('\n') + '\n');
    }
    const sources = opts.sources.map((s) => path.basename(path.resolve(s))).join(', ');
    const description = `Harbor tasks imported from ${sources} (${tasks.length} task(s)), served with the built-in shell toolset.`;
    const manifest = {
      name,
      version: opts.version ?? '1.0.0',
      description,
      default_split: rows.train!.length > 0 ? 'train' : 'eval',
      splits,
      envs,
      toolsets: { [SHELL_BUILTIN]: { builtin: [SHELL_BUILTIN] } },
      max_turns: Math.max(1, ...tasks.map((t) => t.turns.length)),
      reward: 'mean',
      groups: Object.fromEntries([...groupsUsed].map((k) => [k, `meta.${k}`])),
      scores: { [REWARD_TXT_SCORE]: { min: 0, max: 1 } },
      ...(opts.agent !== undefined ? { harness: { command: ['sh', '-c', opts.agent] } } : {}),
    };
    await writeFile(path.join(tmp, 'bundle.json'), `${JSON.stringify(manifest, null, 2)}\n`);
    await writeFile(
      path.join(tmp, 'README.md'),
      [
        `# ${name}`,
        '',
        description,
        '',
        'Written by `openenv-bundle import harbor`: each task runs in its own shell env (`envs/<task>/`, its `environment/`),',
        'is offered the built-in shell toolset (`bash`, `read_file`, `write_file`) and is scored by its verifier',
        '(`verifiers/<task>/`, its `tests/`), copied into the container at `/tests` only once the agent is done.',
        "Its `solution/solve.sh` is the golden solution, one `bash` call. See docs/harbor.md in the server's repository.",
        '',
      ].join('\n'),
    );
    // the bundle must load as the server loads it before it takes DIR's place
    const loaded = await loadBundle(tmp);
    await loaded.cleanup();
    if (await isDir(out)) await rm(out, { recursive: true, force: true });
    await rename(tmp, out);
    return { ...base, notes, tasks: summary, missingImages, written: true };
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}
