/**
 * Loads a bundle (a folder, or a .tar.gz of one) and validates all of it up front: the manifest,
 * every task row, and the cross-references between them. The server refuses to start on an
 * invalid bundle rather than failing an episode later (docs/bundle-format.md).
 *
 * Long because it makes every check that needs the disk or the whole bundle (paths inside it,
 * files, task lines, cross-references), in the order a load makes them; the shapes are schema.ts's.
 */
import { createReadStream } from 'node:fs';
import { constants } from 'node:fs';
import { open, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { forEachLine } from '../util/lines.js';
import { extractBundleArchive, looksLikeGzip, type ExtractOptions } from './archive.js';
import { BundleError, IssueCollector } from './errors.js';
import {
  BUILTIN_TOOLSETS,
  END_TURN,
  ManifestSchema,
  TaskLineSchema,
  fieldPath,
  toBundleIssues,
  type EnvManifest,
  type HarnessManifest,
  type Manifest,
  type TaskLine,
  type TaskRow,
  type ToolSpec,
} from './schema.js';
import { TEST_SCRIPT_NAME } from '../verifier/layout.js';

/** A task of the bundle: its row, where it sits, and its max_turns resolved against the manifest. */
export type Task = Omit<TaskLine, 'max_turns'> & {
  split: string;
  /** 0-based line number in the split's file */
  index: number;
  /** the row's max_turns, else the manifest's */
  max_turns: number;
  /** bundle.json's groups: group name → this task's value there ({} when none are declared) */
  groups: Record<string, string>;
};

export interface LoadedBundle {
  /** absolute real path of the folder holding bundle.json */
  dir: string;
  /** the validated manifest, defaults filled in; `description` falls back to README's first line */
  manifest: Manifest;
  /** the manifest's description, else README.md's first non-empty line */
  description: string;
  /** README.md's full text ("" when there is none) */
  readme: string;
  splits: Record<string, Task[]>;
  splitCounts: Record<string, number>;
  byId: Map<string, Task>;
  /** each toolset's tools, END_TURN_TOOL last */
  toolsets: Record<string, ToolSpec[]>;
  task(split: string, index: number): Task | undefined;
  envOf(task: Task): { name: string; spec: EnvManifest };
  /** removes the temporary folder of an extracted archive; a no-op for a folder; idempotent */
  cleanup(): Promise<void>;
}

export type LoadOptions = ExtractOptions;

const deepFreeze = <T>(o: T): T => {
  if (typeof o === 'object' && o !== null) {
    for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
};

/** Offered by every task beside its toolset (docs/protocol.md, turns). */
export const END_TURN_TOOL: ToolSpec = deepFreeze({
  name: END_TURN,
  description: "End the current turn. Its result is the next turn's prompt; after the last turn the episode is scored.",
  input_schema: {
    type: 'object',
    properties: { answer: { type: 'string', description: 'your answer for this turn (optional)' } },
    additionalProperties: false,
  },
});

/**
 * The task as served by /tasks (docs/protocol.md). `data` and `meta` stay private: data may hold
 * the answer. `bundleHarness`: the bundle's harness, which a task naming none runs.
 */
export function taskRow(task: Task, bundleHarness?: HarnessManifest): TaskRow {
  return {
    task_id: task.task_id,
    split: task.split,
    index: task.index,
    toolset: task.toolset,
    messages: [
      { role: 'system', content: task.system_prompt },
      // turns is validated non-empty at load
      { role: 'user', content: task.turns[0] ?? '' },
    ],
    turns: task.turns.length,
    max_turns: task.max_turns,
    groups: task.groups,
    ...((task.harness ?? bundleHarness) ? { harness: true as const } : {}),
  };
}

/** A toolset's tools (its own, then its built-in toolsets'), without end_turn. */
export function toolSpecsOf(manifest: Manifest, toolset: string): ToolSpec[] {
  const ts = Object.hasOwn(manifest.toolsets, toolset) ? manifest.toolsets[toolset] : undefined;
  if (!ts) return [];
  return [...ts.tools, ...ts.builtin.flatMap((b) => BUILTIN_TOOLSETS[b].map((t) => ({ ...t, input_schema: { ...t.input_schema } })))];
}

/** The name of the env a task runs in: its own `env`, else its toolset's; null when neither names one (a load error). */
export function envNameOf(manifest: Manifest, task: Pick<TaskLine, 'env' | 'toolset'>): string | null {
  if (task.env !== undefined) return task.env;
  return (Object.hasOwn(manifest.toolsets, task.toolset) ? manifest.toolsets[task.toolset]?.env : undefined) ?? null;
}

/** Absolute path of an env's build context, or null for an env given as an `image`. */
export function contextDir(bundle: Pick<LoadedBundle, 'dir' | 'manifest'>, envName: string): string | null {
  if (!Object.hasOwn(bundle.manifest.envs, envName)) throw new Error(`bundle ${bundle.manifest.name} has no env ${JSON.stringify(envName)}`);
  const spec = bundle.manifest.envs[envName];
  if (spec?.build === undefined) return null;
  return path.resolve(bundle.dir, spec.build);
}

/**
 * Loads and validates a bundle folder, or a .tar.gz / .tgz archive of one (extracted into a
 * private temporary folder that `cleanup()` removes, and that is removed at process exit).
 * Throws a BundleError listing every problem found (up to 20 spelled out).
 */
export async function loadBundle(pathOrArchive: string, options: LoadOptions = {}): Promise<LoadedBundle> {
  const st = await stat(pathOrArchive).catch(() => null);
  if (st === null) throw new BundleError({ file: pathOrArchive, message: 'no such folder or file' });
  if (st.isDirectory()) return loadFolder(pathOrArchive, `bundle ${pathOrArchive}`, async () => {});
  if (!st.isFile() || !(await looksLikeGzip(pathOrArchive))) {
    throw new BundleError({ file: pathOrArchive, message: 'expected a bundle folder or a .tar.gz archive of one' });
  }
  const extracted = await extractBundleArchive(pathOrArchive, options);
  try {
    return await loadFolder(extracted.dir, `bundle ${pathOrArchive}`, extracted.cleanup);
  } catch (err) {
    await extracted.cleanup();
    throw err;
  }
}

/** `rel`'s real path when it exists and stays inside `root` (a real path), else why not. */
async function resolveInside(root: string, relPath: string): Promise<{ real: string } | { problem: string }> {
  let real: string;
  try {
    real = await realpath(path.resolve(root, relPath));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return { problem: code === 'ENOENT' ? 'not found' : `cannot be read (${code ?? String(err)})` };
  }
  const rel = path.relative(root, real);
  if (rel === '..' || rel.startsWith(`..${path.sep}`) || path.isAbsolute(rel)) return { problem: 'resolves outside the bundle folder' };
  return { real };
}

/**
 * A regular file's text, or null when the path is something else (a FIFO, a device, a socket, a
 * folder): opened without blocking and checked on the open descriptor, so a FIFO named bundle.json
 * cannot hang a reader waiting for a writer.
 */
async function readRegularFile(real: string): Promise<string | null> {
  const fh = await open(real, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    if (!(await fh.stat()).isFile()) return null;
    return await fh.readFile('utf8');
  } finally {
    await fh.close();
  }
}

/** "line L" of a JSON.parse error, when V8's message gives a position. */
function jsonErrorLine(text: string, err: unknown): number | undefined {
  const m = /at position (\d+)/.exec((err as Error).message);
  if (!m?.[1]) return undefined;
  const pos = Number(m[1]);
  let line = 1;
  for (let i = 0; i < pos && i < text.length; i++) if (text.charCodeAt(i) === 10) line++;
  return line;
}

async function readManifest(dir: string, context: string): Promise<Manifest> {
  const where = await resolveInside(dir, 'bundle.json');
  if ('problem' in where) {
    throw new BundleError({ file: 'bundle.json', message: `${where.problem}; a bundle folder holds bundle.json at its root` }, context);
  }
  const text = await readRegularFile(where.real);
  if (text === null)
    throw new BundleError(
      { file: 'bundle.json', message: 'is not a regular file (a FIFO, a device or a folder?); a bundle folder holds bundle.json at its root' },
      context,
    );
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    const line = jsonErrorLine(text, err);
    const issue = { file: 'bundle.json', message: `invalid JSON (${(err as Error).message})` };
    throw new BundleError(line === undefined ? issue : { ...issue, line }, context);
  }
  const parsed = ManifestSchema.safeParse(raw);
  if (!parsed.success) {
    const issues = toBundleIssues(parsed.error, raw, 'bundle.json');
    throw new BundleError(issues, context, issues.length);
  }
  return parsed.data;
}

/** README.md's text; "" when there is none. */
async function readReadme(dir: string, issues: IssueCollector): Promise<string> {
  const where = await resolveInside(dir, 'README.md');
  if ('problem' in where) {
    if (where.problem !== 'not found') issues.add({ file: 'README.md', message: `expected a text file in the bundle, but it ${where.problem}` });
    return '';
  }
  const text = await readRegularFile(where.real);
  if (text === null)
    issues.add({ file: 'README.md', message: 'expected a text file in the bundle, but it is not a regular file (a FIFO, a device or a folder?)' });
  return text ?? '';
}

/** README.md's first non-empty line, without its leading `#`s. */
export function readmeSummary(readme: string): string {
  for (const line of readme.split(/\r?\n/)) {
    const text = line.replace(/^\s*#+/, '').trim();
    if (text !== '') return text;
  }
  return '';
}

async function loadFolder(given: string, context: string, cleanup: () => Promise<void>): Promise<LoadedBundle> {
  const dir = await realpath(given);
  const manifest = await readManifest(dir, context);
  const issues = new IssueCollector();
  const readme = await readReadme(dir, issues);

  const description = manifest.description ?? readmeSummary(readme);
  if (description === '') {
    issues.add({
      file: 'bundle.json',
      field: 'description',
      message: 'expected a description, here or as the first line of README.md; found neither',
    });
  }

  // every build folder: the envs' and their sidecars'
  const builds = Object.entries(manifest.envs).flatMap(([name, env]) => [
    { at: ['envs', name, 'build'], build: env.build },
    ...Object.entries(env.sidecars ?? {}).map(([s, sc]) => ({ at: ['envs', name, 'sidecars', s, 'build'], build: sc.build })),
  ]);
  for (const env of builds) {
    if (env.build === undefined) continue;
    const field = fieldPath(env.at);
    const where = await resolveInside(dir, env.build);
    if ('problem' in where) {
      issues.add({
        file: 'bundle.json',
        field,
        message: `expected a folder of the bundle holding a Dockerfile, but ${JSON.stringify(env.build)} ${where.problem}`,
      });
      continue;
    }
    if (!(await stat(where.real)).isDirectory()) {
      issues.add({ file: 'bundle.json', field, message: `expected a folder holding a Dockerfile, got the file ${JSON.stringify(env.build)}` });
    } else if ((await stat(path.join(where.real, 'Dockerfile')).catch(() => null))?.isFile() !== true) {
      issues.add({ file: 'bundle.json', field, message: `expected a folder holding a Dockerfile, but ${JSON.stringify(env.build)} has none` });
    }
  }

  const loader = new TaskLoader(manifest, issues);
  for (const [split, rel] of Object.entries(manifest.splits)) {
    const where = await resolveInside(dir, rel);
    const problem = 'problem' in where ? where.problem : (await stat(where.real)).isFile() ? null : 'is not a file';
    if ('problem' in where || problem !== null) {
      issues.add({
        file: 'bundle.json',
        field: fieldPath(['splits', split]),
        message: `expected a JSONL file of tasks, but ${JSON.stringify(rel)} ${problem}`,
      });
      loader.splits[split] = [];
      continue;
    }
    try {
      await loader.readSplit(split, rel, where.real);
    } catch (err) {
      issues.add({ file: rel, message: `could not be read: ${(err as Error).message}` });
    }
  }
  await loader.checkPaths(dir);
  const defaultTasks = loader.splits[manifest.default_split];
  if (defaultTasks !== undefined && defaultTasks.length === 0 && issues.empty) {
    // A reset without a task picks one of the default split: it cannot be empty.
    issues.add({ file: manifest.splits[manifest.default_split] ?? 'bundle.json', message: `the default split "${manifest.default_split}" has no tasks` });
  }
  issues.throwIfAny(context);

  const { splits, byId } = loader;
  const splitCounts = lookupTable(Object.entries(splits).map(([k, v]) => [k, v.length]));
  const toolsets = lookupTable(Object.keys(manifest.toolsets).map((name) => [name, [...toolSpecsOf(manifest, name), END_TURN_TOOL]]));
  return {
    dir,
    manifest: { ...manifest, description },
    description,
    readme,
    splits,
    splitCounts,
    byId,
    toolsets,
    task(split, index) {
      if (!Object.hasOwn(splits, split) || !Number.isInteger(index) || index < 0) return undefined;
      return splits[split]?.[index];
    },
    envOf(task) {
      const name = envNameOf(manifest, task);
      const spec = name !== null && Object.hasOwn(manifest.envs, name) ? manifest.envs[name] : undefined;
      if (name === null || !spec) throw new Error(`task ${JSON.stringify(task.task_id)} is not a task of bundle ${manifest.name}`);
      return { name, spec };
    },
    cleanup,
  };
}

/** Streams `file` and calls `onLine` with each line, without its "\n" or "\r\n". */
function forEachFileLine(file: string, onLine: (line: string) => void): Promise<void> {
  return forEachLine(createReadStream(file, { highWaterMark: 1 << 20 }), onLine);
}

/**
 * A name → value table without a prototype, so that a client-supplied name such as
 * "constructor" or "__proto__" finds nothing instead of an Object.prototype member.
 */
function lookupTable<T>(entries: Iterable<readonly [string, T]>): Record<string, T> {
  const table = Object.create(null) as Record<string, T>;
  for (const [k, v] of entries) table[k] = v;
  return table;
}

/** Reads split files into tasks, checking each row and the rows against each other. */
class TaskLoader {
  readonly splits: Record<string, Task[]> = lookupTable<Task[]>([]);
  readonly byId = new Map<string, Task>();
  /** where each task_id was first seen, for duplicate messages */
  private readonly firstSeen = new Map<string, string>();
  /** folders rows name (verifiers' tests, turn uploads), checked once every row is read */
  private readonly folders: { file: string; line: number; field: string; rel: string; holds?: string }[] = [];
  private readonly toolsetNames: string;

  constructor(
    private readonly manifest: Manifest,
    private readonly issues: IssueCollector,
  ) {
    this.toolsetNames = Object.keys(manifest.toolsets).join(', ');
  }

  async readSplit(split: string, file: string, real: string): Promise<void> {
    const tasks: Task[] = [];
    this.splits[split] = tasks;
    let line = 0;
    let index = 0;
    // A task's index is its line number, so a blank line between tasks would silently shift every
    // later index: only blank lines at the end of the file (a trailing newline or two) are allowed.
    let blankSince: number | undefined;
    await forEachFileLine(real, (text) => {
      line++;
      if (line === 1 && text.charCodeAt(0) === 0xfeff) text = text.slice(1);
      if (text.trim() === '') {
        blankSince ??= line;
        return;
      }
      if (blankSince !== undefined) {
        this.issues.add({
          file,
          line: blankSince,
          message: "blank line between tasks: a task's index is its line number, so blank lines may only end the file",
        });
        blankSince = undefined;
      }
      this.readRow(split, file, line, index++, text, tasks);
    });
  }

  private readRow(split: string, file: string, line: number, index: number, text: string, tasks: Task[]): void {
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch (err) {
      this.issues.add({ file, line, message: `invalid JSON (${(err as Error).message})` });
      return;
    }
    const parsed = TaskLineSchema.safeParse(raw);
    if (!parsed.success) {
      for (const issue of toBundleIssues(parsed.error, raw, file, line)) this.issues.add(issue);
      return;
    }
    const row = parsed.data;
    let ok = true;
    if (!Object.hasOwn(this.manifest.toolsets, row.toolset)) {
      ok = false;
      this.issues.add({
        file,
        line,
        field: 'toolset',
        message: `expected one of the declared toolsets (${this.toolsetNames}), got ${JSON.stringify(row.toolset)}`,
      });
    }
    if (row.max_turns === undefined && row.turns.length > this.manifest.max_turns) {
      ok = false;
      this.issues.add({
        file,
        line,
        field: 'turns',
        message: `${row.turns.length} turns, more than bundle.json's max_turns (${this.manifest.max_turns}); give the task a max_turns ≥ ${row.turns.length}`,
      });
    }
    if (!this.checkEnv(row, file, line)) ok = false;
    const first = this.firstSeen.get(row.task_id);
    if (first !== undefined) {
      this.issues.add({ file, line, field: 'task_id', message: `duplicate task_id ${JSON.stringify(row.task_id)}, first defined at ${first}` });
      return;
    }
    this.firstSeen.set(row.task_id, `${file} line ${line}`);
    const groups = this.groupsOf(row, file, line);
    if (!ok || groups === null) return;
    const task: Task = { ...row, split, index, max_turns: row.max_turns ?? this.manifest.max_turns, groups };
    tasks.push(task);
    this.byId.set(task.task_id, task);
  }

  // ---- envs and verifiers ------------------------------------------------------------------

  /** the row's env (its own or its toolset's) exists and can run the task; notes the folders to check */
  private checkEnv(row: TaskLine, file: string, line: number): boolean {
    const issue = (field: string, message: string) => {
      this.issues.add({ file, line, field, message });
      return false;
    };
    const toolset = Object.hasOwn(this.manifest.toolsets, row.toolset) ? this.manifest.toolsets[row.toolset] : undefined;
    if (!toolset) return true; // reported above
    if (row.env !== undefined) {
      if (!Object.hasOwn(this.manifest.envs, row.env)) {
        return issue('env', `expected one of the declared envs (${Object.keys(this.manifest.envs).join(', ')}), got ${JSON.stringify(row.env)}`);
      }
      if (toolset.tools.length > 0) {
        return issue('env', `toolset "${row.toolset}" has tools of its own, served by its env "${toolset.env}": a task of it cannot run in another env`);
      }
    }
    const envName = envNameOf(this.manifest, row);
    if (envName === null) return issue('env', `toolset "${row.toolset}" names no env, so the task must name the env it runs in`);
    const env = this.manifest.envs[envName];
    const verified = row.verifier !== undefined || (row.per_turn ?? []).some((t) => t.verifier !== undefined);
    if (env?.kind === 'shell') {
      if (!verified) return issue('verifier', `env "${envName}" is a shell env, which has no /finish to score the episode: the task needs a verifier`);
      if (toolset.builtin.length === 0 && !(row.harness ?? this.manifest.harness))
        return issue('toolset', `toolset "${row.toolset}" offers no tool that acts in a shell env; give it "builtin": ["shell"]`);
      if (Object.keys(row.data).length > 0)
        return issue('data', `env "${envName}" is a shell env, which has no /reset to receive data; put what the task needs in its image`);
    }
    if (row.verifier) this.folders.push({ file, line, field: 'verifier.tests', rel: row.verifier.tests, holds: TEST_SCRIPT_NAME });
    row.per_turn?.forEach((t, i) => {
      if (t.verifier) this.folders.push({ file, line, field: `per_turn[${i}].verifier.tests`, rel: t.verifier.tests, holds: TEST_SCRIPT_NAME });
      if (t.upload !== undefined) this.folders.push({ file, line, field: `per_turn[${i}].upload`, rel: t.upload });
    });
    return true;
  }

  /** every folder a row names is a folder of the bundle (holding test.sh, for a verifier's tests) */
  async checkPaths(dir: string): Promise<void> {
    const seen = new Map<string, string | null>();
    for (const f of this.folders) {
      const key = `${f.rel}\0${f.holds ?? ''}`;
      let problem = seen.get(key);
      if (problem === undefined) {
        problem = await folderProblem(dir, f.rel, f.holds);
        seen.set(key, problem);
      }
      if (problem !== null) this.issues.add({ file: f.file, line: f.line, field: f.field, message: problem });
    }
  }

  // ---- task groups -------------------------------------------------------------------------

  /** The row's value of every declared group, as text; null (and issues) when one is missing or not a scalar. */
  private groupsOf(row: TaskLine, file: string, line: number): Record<string, string> | null {
    const out: Record<string, string> = {};
    let ok = true;
    for (const [name, where] of Object.entries(this.manifest.groups)) {
      const value = valueAtPath(row, where);
      if (typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value))) {
        out[name] = String(value);
        continue;
      }
      ok = false;
      const got = value === undefined ? 'it is missing' : `got ${JSON.stringify(value)?.slice(0, 60)}`;
      this.issues.add({
        file,
        line,
        field: where,
        message: `bundle.json's group "${name}" reads ${where}: expected a string, number or boolean there, but ${got}`,
      });
    }
    return ok ? out : null;
  }
}

/** why `rel` is not a folder of the bundle (holding the file `holds`), or null */
async function folderProblem(dir: string, rel: string, holds?: string): Promise<string | null> {
  const what = holds ? `a folder of the bundle holding ${holds}` : 'a folder of the bundle';
  const where = await resolveInside(dir, rel);
  if ('problem' in where) return `expected ${what}, but ${JSON.stringify(rel)} ${where.problem}`;
  if (!(await stat(where.real)).isDirectory()) return `expected ${what}, got the file ${JSON.stringify(rel)}`;
  if (holds && (await stat(path.join(where.real, holds)).catch(() => null))?.isFile() !== true)
    return `expected ${what}, but ${JSON.stringify(rel)} has no ${holds}`;
  return null;
}

/** `meta.a.b` → row.meta.a.b (own properties only), or undefined. */
function valueAtPath(row: TaskLine, dotted: string): unknown {
  let cur: unknown = row;
  for (const key of dotted.split('.')) {
    if (typeof cur !== 'object' || cur === null || Array.isArray(cur) || !Object.hasOwn(cur, key)) return undefined;
    cur = (cur as Record<string, unknown>)[key];
  }
  return cur;
}
