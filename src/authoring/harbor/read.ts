/**
 * The import's first step, read: the task folders SRC… stand for, each read (read-task.ts) with
 * the notes on tests that fetch, its solutions' files, and which of the images its envs need the
 * engine has. Nothing is written here; the map (map.ts) takes it from there without a disk.
 */
import { lstat, readdir, readlink, stat } from 'node:fs/promises';
import path from 'node:path';
import { ImportError, type ImportOptions, type MissingImage } from './options.js';
import { listFiles, readHarborTask, type HarborTask, type HarborTurn } from './read-task.js';
import { readRegular } from './task-folder.js';
import { testsFetchNotes } from './tests-fetch.js';

export const isDir = async (p: string) => (await stat(p).catch(() => null))?.isDirectory() === true;

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

/** a turn's solution folder as read: its files besides solve.sh (null: no longer a regular file), then solve.sh */
export interface SolutionRead {
  files: { name: string; data: Buffer | null }[];
  solve: Buffer | null;
}

/** a task as read: the task, where it came from (as the bundle records it), and its turns' solutions (null: a turn has none) */
export interface ReadTask {
  task: HarborTask;
  source: string;
  solutions: SolutionRead[] | null;
}

/** what the read step found: every task read (refused ones too), and whether an engine answered the questions on images */
export interface ReadResult {
  tasks: ReadTask[];
  engineAnswers: boolean;
}

/** the solution folders of a task's turns read, when every turn has one */
export async function readSolutions(turns: readonly HarborTurn[]): Promise<SolutionRead[] | null> {
  if (!turns.every((x) => x.solution !== null)) return null;
  const out: SolutionRead[] = [];
  for (const turn of turns) {
    const folder = turn.solution!;
    const files: SolutionRead['files'] = [];
    for (const f of (await listFiles(folder)).files) if (f !== 'solve.sh') files.push({ name: f, data: await readRegular(path.join(folder, f)) });
    out.push({ files, solve: await readRegular(path.join(folder, 'solve.sh')) });
  }
  return out;
}

/** reads the tasks of every source; two tasks of one id are refused at once */
export async function readTasks(opts: ImportOptions): Promise<ReadResult> {
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
  const tasks: ReadTask[] = [];
  for (const f of folders) {
    const task = await readHarborTask(f.dir, {
      rules: opts.baseImages,
      ignoreInternet: opts.ignoreInternet,
      buildWithNetwork: opts.buildWithNetwork === true,
      images: opts.images ?? 'auto',
      hasImage,
      ...(f.linkedTo !== undefined ? { linkedTo: f.linkedTo } : {}),
    });
    tasks.push({ task, source: f.source, solutions: null });
  }
  // a task whose test.sh fetches (uv, pip, curl | sh, apt-get…) cannot run its tests offline: named
  for (const { task: t } of tasks) if (t.refusals.length === 0) t.notes.push(...(await testsFetchNotes(t.turns)));
  return { tasks, engineAnswers };
}

/** the images the accepted tasks' builds and envs need, each with its kind and the tasks that need it */
export function neededImages(tasks: readonly HarborTask[]): Map<string, { kind: 'base' | 'task'; tasks: string[] }> {
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
  return needs;
}

/** the needed images the engine does not have; null when no engine answers (nothing checked) */
export async function missingImages(tasks: readonly HarborTask[], opts: ImportOptions, engineAnswers: boolean): Promise<MissingImage[] | null> {
  const needs = neededImages(tasks);
  const present = opts.hasImages && engineAnswers ? await opts.hasImages([...needs.keys()]) : null;
  return present === null ? null : [...needs].filter(([img]) => !present.has(img)).map(([image, n]) => ({ image, kind: n.kind, tasks: n.tasks }));
}
