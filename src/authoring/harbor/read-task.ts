/**
 * One Harbor task folder read into what the import writes: its turns (one, or one per
 * [[steps]] entry) with their instructions, tests and solutions, its environment, and every
 * refusal and note. Nothing is written here.
 */
import { createHash } from 'node:crypto';
import { lstat, readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { mapDockerfileImages, type BaseImageRule, type DockerfileImages } from './dockerfile.js';
import { readTaskConfig, type Finding, type HarborConfig } from './task-config.js';

export interface HarborTurn {
  /** the step's name (schema 1.1), null for a task of one step */
  step: string | null;
  instruction: string;
  /** folders whose files make the turn's /tests, later ones overriding earlier ones (the task's tests/, then the step's) */
  tests: string[];
  /** the solution folder (solution/ or steps/<name>/solution/) when it holds solve.sh */
  solution: string | null;
  /** steps/<name>/workdir, copied into the working directory before the turn */
  upload: string | null;
}

export interface HarborTask {
  id: string;
  dir: string;
  config: HarborConfig;
  turns: HarborTurn[];
  /** environment/, the build context; null for a task that names a docker_image */
  context: string | null;
  dockerfile: DockerfileImages | null;
  /** the docker_image to run, mapped */
  image: string | null;
  refusals: Finding[];
  notes: Finding[];
}

/** compose files Harbor reads beside the Dockerfile */
const COMPOSE_FILES = ['docker-compose.yaml', 'docker-compose.yml', 'compose.yaml', 'compose.yml'];
/** files below which size an identical file in environment/ and tests/ is no sign of a leak */
const LEAK_MIN_BYTES = 64;

const isDir = async (p: string) => (await stat(p).catch(() => null))?.isDirectory() === true;
const isFile = async (p: string) => (await stat(p).catch(() => null))?.isFile() === true;

/** every file under `dir` (relative paths), and the symbolic links and special files found there */
export async function listFiles(dir: string): Promise<{ files: string[]; odd: string[] }> {
  const files: string[] = [];
  const odd: string[] = [];
  const walk = async (rel: string): Promise<void> => {
    for (const name of (await readdir(path.join(dir, rel))).sort()) {
      const r = rel ? `${rel}/${name}` : name;
      const st = await lstat(path.join(dir, r));
      if (st.isDirectory()) await walk(r);
      else if (st.isFile()) files.push(r);
      else odd.push(r);
    }
  };
  if (await isDir(dir)) await walk('');
  return { files, odd };
}

async function hashes(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const f of (await listFiles(dir)).files) {
    const data = await readFile(path.join(dir, f));
    if (data.length >= LEAK_MIN_BYTES) out.set(createHash('sha256').update(data).digest('hex'), f);
  }
  return out;
}

export async function readHarborTask(dir: string, opts: { rules: readonly BaseImageRule[]; ignoreInternet: boolean }): Promise<HarborTask> {
  const id = path.basename(dir);
  const refusals: Finding[] = [];
  const notes: Finding[] = [];
  const refuse = (field: string, message: string) => refusals.push({ field, message });
  const read = readTaskConfig(await readFile(path.join(dir, 'task.toml'), 'utf8'), { ignoreInternet: opts.ignoreInternet });
  refusals.push(...read.refusals);
  notes.push(...read.notes);
  const config =
    read.config ??
    ({ steps: null, metadata: {}, task: null, verifierEnv: {}, solutionEnv: {}, envVars: {}, schemaVersion: '1.0', internetUnsaid: true } as HarborConfig);

  // turns
  const turns: HarborTurn[] = [];
  const topTests = path.join(dir, 'tests');
  const solutionOf = async (folder: string) => ((await isFile(path.join(folder, 'solve.sh'))) ? folder : null);
  if (config.steps === null) {
    const instruction = await readFile(path.join(dir, 'instruction.md'), 'utf8').catch(() => null);
    if (instruction === null) refuse('instruction.md', 'missing: it is the prompt the agent gets');
    if (!(await isFile(path.join(topTests, 'test.sh')))) refuse('tests/test.sh', 'missing: it is the verifier');
    turns.push({ step: null, instruction: instruction ?? '', tests: [topTests], solution: await solutionOf(path.join(dir, 'solution')), upload: null });
  } else {
    for (const step of config.steps) {
      const base = path.join(dir, 'steps', step.name);
      const instruction = await readFile(path.join(base, 'instruction.md'), 'utf8').catch(() => null);
      if (instruction === null) refuse(`steps/${step.name}/instruction.md`, "missing: it is the step's prompt");
      const present: string[] = [];
      for (const t of [topTests, path.join(base, 'tests')]) if (await isDir(t)) present.push(t);
      let hasTest = false;
      for (const t of present) if (await isFile(path.join(t, 'test.sh'))) hasTest = true;
      if (!hasTest) refuse(`steps/${step.name}/tests/test.sh`, "missing (in the step's tests/ and in the task's): it is the step's verifier");
      const upload = path.join(base, 'workdir');
      turns.push({
        step: step.name,
        instruction: instruction ?? '',
        tests: present,
        solution: await solutionOf(path.join(base, 'solution')),
        upload: (await isDir(upload)) ? upload : null,
      });
    }
    if (await isFile(path.join(dir, 'solution', 'solve.sh')))
      notes.push({ field: 'solution/solve.sh', message: "a multi-step task's oracle is its steps' solve.sh: the task's own is not used" });
  }
  if (turns.some((t) => t.solution === null)) {
    notes.push({
      field: config.steps ? 'steps/*/solution/solve.sh' : 'solution/solve.sh',
      message: 'no solve.sh (for every step): the task gets no golden solution, so check cannot prove its max',
    });
  }

  // the environment
  const env = path.join(dir, 'environment');
  let context: string | null = null;
  let dockerfile: DockerfileImages | null = null;
  let image: string | null = null;
  for (const f of COMPOSE_FILES) {
    if (await isFile(path.join(env, f)))
      refuse(`environment/${f}`, 'sidecar services (Docker Compose) are not supported yet: a task runs in one container here');
  }
  if (config.dockerImage !== undefined) {
    const mapped = mapDockerfileImages(`FROM ${config.dockerImage}\n`, opts.rules);
    image = mapped.images[0] ?? config.dockerImage;
    if (mapped.mapped[0]) notes.push({ field: '[environment] docker_image', message: mapLine(mapped.mapped[0]) });
  } else if (await isFile(path.join(env, 'Dockerfile'))) {
    context = env;
    dockerfile = mapDockerfileImages(await readFile(path.join(env, 'Dockerfile'), 'utf8'), opts.rules);
    for (const m of dockerfile.mapped) notes.push({ field: 'environment/Dockerfile', message: mapLine(m) });
    for (const u of dockerfile.unresolved)
      notes.push({ field: 'environment/Dockerfile', message: `the image ${u} names a build argument without a default: not checked` });
  } else {
    refuse('environment/Dockerfile', 'missing, and [environment] names no docker_image: the task has no container');
  }

  // only files and folders: links would reach outside what the import copies
  for (const [folder, label] of [
    [env, 'environment'],
    [topTests, 'tests'],
    [path.join(dir, 'solution'), 'solution'],
    [path.join(dir, 'steps'), 'steps'],
  ] as const) {
    for (const o of (await listFiles(folder)).odd) refuse(`${label}/${o}`, 'a symbolic link or special file: the import copies files and folders only');
  }
  // the build context must not carry the tests or the solution
  if (context) {
    const envFiles = await hashes(context);
    const hidden = [topTests, path.join(dir, 'solution'), ...turns.flatMap((t) => [...t.tests, ...(t.solution ? [t.solution] : [])])];
    const reported = new Set<string>();
    for (const folder of [...new Set(hidden)]) {
      for (const [h, f] of await hashes(folder)) {
        const twin = envFiles.get(h);
        if (twin && !reported.has(twin)) {
          reported.add(twin);
          notes.push({
            field: `environment/${twin}`,
            message: `has the content of ${path.relative(dir, path.join(folder, f))}: the image would carry it where the agent can read it (a leak, unless it is an input the tests also keep)`,
          });
        }
      }
    }
  }
  if (config.internetUnsaid)
    notes.push({ field: '[environment] allow_internet', message: "not said (Harbor's default allows the internet): the task runs without it here" });
  return { id, dir, config, turns, context, dockerfile, image, refusals, notes };
}

function mapLine(m: { from: string; to: string; digestSetAside: boolean }): string {
  return `${m.from} mapped to ${m.to} (--base-image)${m.digestSetAside ? ', its pinned digest set aside' : ''}`;
}
