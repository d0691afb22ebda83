/**
 * One Harbor task folder read into what the import writes: its turns (one, or one per
 * [[steps]] entry) with their instructions, tests and solutions, its environment, and every
 * refusal and note. Nothing is written here.
 */
import { createHash } from 'node:crypto';
import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';
import { addedUrls, dockerfileInstructions } from '../../sandbox/docker/index.js';
import { readCompose, type ComposeSidecar } from './compose.js';
import { downloadsIn, installsIn, mapDockerfileImages, startCommands, type BaseImageRule, type DockerfileImages } from './dockerfile.js';
import { TaskFolder } from './task-folder.js';
import { readTaskConfig, type TaskNote, type HarborConfig } from './task-config.js';

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

/** a compose service beside main, as the env's sidecar */
export interface HarborSidecar extends ComposeSidecar {
  /** its build folder's Dockerfile, its images mapped (a `build` sidecar) */
  dockerfile?: DockerfileImages;
}

export interface HarborTask {
  id: string;
  dir: string;
  config: HarborConfig;
  turns: HarborTurn[];
  /** environment/, the build context; null for a task that names a docker_image */
  context: string | null;
  dockerfile: DockerfileImages | null;
  /** the docker_image to run, mapped (null: the env is built from environment/) */
  image: string | null;
  /** the services beside main in its compose file: the env's sidecars, their Dockerfiles or images mapped */
  sidecars: HarborSidecar[];
  refusals: TaskNote[];
  notes: TaskNote[];
}

/**
 * which a task naming both a docker_image and environment/Dockerfile gets: `auto`, the image when
 * the engine has it, else the Dockerfile built; `prebuilt`, the image (pulled by the engine at
 * serve time); `dockerfile`, the Dockerfile built
 */
export const IMAGE_CHOICES = ['auto', 'prebuilt', 'dockerfile'] as const;
export type ImagesChoice = (typeof IMAGE_CHOICES)[number];

/** compose files Harbor reads beside the Dockerfile */
const COMPOSE_FILES = ['docker-compose.yaml', 'docker-compose.yml', 'compose.yaml', 'compose.yml'];
/** files below which size an identical file in environment/ and tests/ is no sign of a leak */
const LEAK_MIN_BYTES = 64;
/** the folders of a task the import copies from (their files, walked) */
const COPIED_FOLDERS = ['environment', 'tests', 'solution', 'steps'] as const;

/** a step's folder name as task.toml must give it (task-config.ts refuses any other, and it is never read) */
const PLAIN_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** the regular files under `dir` (relative paths, sorted), and its links and special files; nothing when `dir` itself is not a folder */
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
  if ((await lstat(dir).catch(() => null))?.isDirectory() === true) await walk('');
  return { files, odd };
}

async function hashes(folder: TaskFolder, rel: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const f of await folder.files(rel)) {
    const data = await folder.read(`${rel}/${f}`);
    if (data !== null && data.length >= LEAK_MIN_BYTES) out.set(createHash('sha256').update(data).digest('hex'), f);
  }
  return out;
}

/** what a task.toml that could not be read gives: nothing set */
export const EMPTY_CONFIG: HarborConfig = {
  steps: null,
  metadata: {},
  task: null,
  verifierEnv: {},
  solutionEnv: {},
  envVars: {},
  schemaVersion: '1.0',
  internetUnsaid: false,
};

export interface ReadTaskOptions {
  rules: readonly BaseImageRule[];
  ignoreInternet: boolean;
  /** the image builds with the engine's network (--build-with-network); else with none */
  buildWithNetwork?: boolean;
  /** the task folder is a symbolic link of a dataset folder, pointing here: refused, nothing read */
  linkedTo?: string;
  /** docker_image or environment/Dockerfile where a task has both; default auto */
  images?: ImagesChoice;
  /** whether the engine has an image; null when no engine answers */
  hasImage?: (ref: string) => Promise<boolean | null>;
}

export async function readHarborTask(dir: string, opts: ReadTaskOptions): Promise<HarborTask> {
  const id = path.basename(dir);
  const refusals: TaskNote[] = [];
  const notes: TaskNote[] = [];
  const refuse = (field: string, message: string) => refusals.push({ field, message });
  if (opts.linkedTo !== undefined) {
    refuse('the task folder', `a symbolic link to ${opts.linkedTo}: the import reads no folder a dataset links to; import that folder by its own path`);
    return { id, dir, config: EMPTY_CONFIG, turns: [], context: null, dockerfile: null, image: null, sidecars: [], refusals, notes };
  }
  const folder = await TaskFolder.open(dir);
  const toml = await folder.readText('task.toml');
  const read = toml === null ? { config: null, refusals: [], notes: [] } : readTaskConfig(toml, { ignoreInternet: opts.ignoreInternet });
  refusals.push(...read.refusals);
  notes.push(...read.notes);
  const config = read.config ?? { ...EMPTY_CONFIG, internetUnsaid: true };
  /** a required file: refused as missing unless it was refused as what it is */
  const requireFile = async (rel: string, field: string, why: string) => {
    if ((await folder.kind(rel)) === 'file') return true;
    if ((await folder.kind(rel)) !== 'refused') refuse(field, why);
    return false;
  };

  // turns
  const solutionOf = async (rel: string) => ((await folder.kind(`${rel}/solve.sh`)) === 'file' ? folder.abs(rel) : null);
  const turns: HarborTurn[] = [];
  if (config.steps === null) {
    const instruction = (await requireFile('instruction.md', 'instruction.md', 'missing: it is the prompt the agent gets'))
      ? await folder.readText('instruction.md')
      : null;
    await requireFile('tests/test.sh', 'tests/test.sh', 'missing: it is the verifier');
    const tests = (await folder.kind('tests')) === 'dir' ? [folder.abs('tests')] : [];
    turns.push({ step: null, instruction: instruction ?? '', tests, solution: await solutionOf('solution'), upload: null });
  } else {
    for (const step of config.steps) {
      // a name task-config.ts refused is no path to read
      if (!PLAIN_NAME.test(step.name)) continue;
      const base = `steps/${step.name}`;
      const instruction = (await requireFile(`${base}/instruction.md`, `${base}/instruction.md`, "missing: it is the step's prompt"))
        ? await folder.readText(`${base}/instruction.md`)
        : null;
      const present: string[] = [];
      let hasTest = false;
      let testRefused = false;
      for (const t of ['tests', `${base}/tests`]) {
        if ((await folder.kind(t)) === 'dir') present.push(folder.abs(t));
        const kind = await folder.kind(`${t}/test.sh`);
        if (kind === 'file') hasTest = true;
        if (kind === 'refused') testRefused = true;
      }
      if (!hasTest && !testRefused) refuse(`${base}/tests/test.sh`, "missing (in the step's tests/ and in the task's): it is the step's verifier");
      turns.push({
        step: step.name,
        instruction: instruction ?? '',
        tests: present,
        solution: await solutionOf(`${base}/solution`),
        upload: (await folder.kind(`${base}/workdir`)) === 'dir' ? folder.abs(`${base}/workdir`) : null,
      });
    }
    if ((await folder.kind('solution/solve.sh')) === 'file')
      notes.push({ field: 'solution/solve.sh', message: "a multi-step task's oracle is its steps' solve.sh: the task's own is not used" });
  }
  // a solution that installs software changes the toolchain an in-place verifier runs, which it then refuses
  const solutions =
    config.steps === null
      ? config.verifierMode === 'separate'
        ? []
        : ['solution/solve.sh']
      : config.steps.filter((st) => (st.verifierMode ?? config.verifierMode) !== 'separate').map((st) => `steps/${st.name}/solution/solve.sh`);
  // (a separate verifier runs in a fresh container of the image: what the agent installed is not there)
  for (const rel of solutions) {
    const text = (await folder.kind(rel)) === 'file' ? await folder.readText(rel) : null;
    const installs = text === null ? [] : installsIn(text);
    if (installs.length > 0)
      notes.push({
        field: rel,
        message:
          `it installs software (${installs.join(', ')}): the verifier runs in place, after a check that the agent left the toolchain as the image had it, and refuses one it changed; ` +
          'check tells whether the golden solution does. If it must, give the task\'s verifier "allow_changes" (the paths it installs into) or "mode": "clean" in the bundle (docs/security.md)',
      });
  }
  if (turns.some((t) => t.solution === null)) {
    notes.push({
      field: config.steps ? 'steps/*/solution/solve.sh' : 'solution/solve.sh',
      message: 'no solve.sh (for every step): the task gets no golden solution, so check cannot prove its max',
    });
  }

  // the environment
  let context: string | null = null;
  let dockerfile: DockerfileImages | null = null;
  let image: string | null = null;
  // a compose file that changes only main is taken (its settings under task.toml's); anything else refuses, named
  const composeFiles: string[] = [];
  const sidecars: HarborSidecar[] = [];
  for (const f of COMPOSE_FILES) if ((await folder.kind(`environment/${f}`)) === 'file') composeFiles.push(`environment/${f}`);
  if (composeFiles.length > 1) refuse(composeFiles.join(', '), 'two compose files: Harbor reads one; keep one');
  else if (composeFiles.length === 1) {
    const compose = readCompose((await folder.readText(composeFiles[0]!)) ?? '', composeFiles[0]!);
    refusals.push(...compose.refusals);
    notes.push(...compose.notes);
    config.envVars = { ...compose.main.environment, ...config.envVars };
    if (compose.main.workdir !== undefined && config.workdir === undefined) config.workdir = compose.main.workdir;
    if (compose.main.healthcheck !== undefined && config.healthcheck === undefined) config.healthcheck = compose.main.healthcheck;
    // the services beside main: the env's sidecars, built from their folder of environment/ or run from their image, mapped by the rules
    for (const sc of compose.sidecars) {
      const field = `${composeFiles[0]!} services.${sc.name}`;
      if (sc.build !== undefined) {
        const rel = sc.build === '.' ? 'environment/Dockerfile' : `environment/${sc.build}/Dockerfile`;
        if (!(await requireFile(rel, `${field}.build`, `builds ${JSON.stringify(sc.build)}, which holds no Dockerfile`))) continue;
        const mapped = mapDockerfileImages((await folder.readText(rel)) ?? '', opts.rules);
        for (const m of mapped.mapped) notes.push({ field: rel, message: mapLine(m) });
        sidecars.push({ ...sc, dockerfile: mapped });
      } else {
        const mapped = mapDockerfileImages(`FROM ${sc.image!}\n`, opts.rules);
        if (mapped.mapped[0]) notes.push({ field: `${field}.image`, message: mapLine(mapped.mapped[0]) });
        sidecars.push({ ...sc, image: mapped.images[0] ?? sc.image! });
      }
    }
    // a clean verifier's container is on no network: it would not reach them, and its tests would score what they cannot see
    const separate = config.verifierMode === 'separate' || (config.steps ?? []).some((st) => st.verifierMode === 'separate');
    if (separate && sidecars.length > 0)
      refuse(
        '[verifier] environment_mode',
        `"separate" with the services beside main (${sidecars.map((sc) => sc.name).join(', ')}): a separate verifier here runs in a fresh container on no network, which would not reach them; verify in the agent's container ("shared")`,
      );
  }
  if (config.dockerImage !== undefined) {
    const mapped = mapDockerfileImages(`FROM ${config.dockerImage}\n`, opts.rules);
    const prebuilt = mapped.images[0] ?? config.dockerImage;
    const hasDockerfile = (await folder.kind('environment/Dockerfile')) === 'file';
    const imageChoice = await chooseImage(prebuilt, hasDockerfile, opts);
    notes.push({ field: '[environment] docker_image', message: imageChoice.why });
    if (imageChoice.from === 'docker_image') {
      image = prebuilt;
      if (mapped.mapped[0]) notes.push({ field: '[environment] docker_image', message: mapLine(mapped.mapped[0]) });
    }
  }
  if (
    image === null &&
    (await requireFile('environment/Dockerfile', 'environment/Dockerfile', 'missing, and [environment] names no docker_image: the task has no container'))
  ) {
    context = folder.abs('environment');
    dockerfile = mapDockerfileImages((await folder.readText('environment/Dockerfile')) ?? '', opts.rules);
    for (const m of dockerfile.mapped) notes.push({ field: 'environment/Dockerfile', message: mapLine(m) });
    for (const u of dockerfile.unresolved)
      notes.push({ field: 'environment/Dockerfile', message: `the image ${u} names a build argument without a default: not checked` });
    const instructions = dockerfileInstructions(dockerfile.text);
    // what the image starts is waited for only when a healthcheck says when it is up (docs/harbor.md, Readiness)
    const starts = startCommands(instructions);
    if (starts.entrypoint !== null && !starts.healthcheck && !config.healthcheck)
      notes.push({
        field: 'environment/Dockerfile',
        message: `its ENTRYPOINT (${starts.entrypoint}) may start services, and nothing waits for them (here as in Harbor, only a declared healthcheck is waited for): if it does, add [environment.healthcheck] (or a HEALTHCHECK) that passes once they answer`,
      });
    if (starts.serviceCmd !== null)
      notes.push({
        field: 'environment/Dockerfile',
        message: `its CMD (${starts.serviceCmd}) is not run: a shell env's process 1 is the server's keeper (the ENTRYPOINT is kept); start a service from an ENTRYPOINT script ending in exec "$@", with a healthcheck`,
      });
    if (opts.buildWithNetwork) {
      notes.push({
        field: 'environment/Dockerfile',
        message:
          "built with the engine's network (--build-with-network): its RUN steps reach what the engine's bridge reaches, the host's own services included",
      });
    } else {
      if (downloadsIn(instructions).length > 0)
        notes.push({
          field: 'environment/Dockerfile',
          message:
            'its RUN steps look like they download (a package manager, curl, wget, git clone…): the image builds without network here, so they would fail; import with --build-with-network if you trust this Dockerfile',
        });
      if (addedUrls(dockerfile.text).length > 0)
        notes.push({
          field: 'environment/Dockerfile',
          message:
            "it ADDs a URL (or a variable): the engine would fetch it on the host's network, so a build without network refuses it; put the file in environment/ and COPY it, or import with --build-with-network",
        });
    }
  }

  // what is copied must be files and folders of the task: walking them refuses every link and special file
  for (const rel of COPIED_FOLDERS) await folder.files(rel);
  // the build context must not carry the tests or the solution
  if (context && folder.refusals.length === 0) {
    const envFiles = await hashes(folder, 'environment');
    const hidden = ['tests', 'solution', ...turns.flatMap((t) => [...t.tests, ...(t.solution ? [t.solution] : [])]).map((abs) => folder.rel(abs))];
    const reported = new Set<string>();
    for (const rel of [...new Set(hidden)]) {
      for (const [h, f] of await hashes(folder, rel)) {
        const twin = envFiles.get(h);
        if (twin && !reported.has(twin)) {
          reported.add(twin);
          notes.push({
            field: `environment/${twin}`,
            message: `has the content of ${rel}/${f}: the image would carry it where the agent can read it (a leak, unless it is an input the tests also keep)`,
          });
        }
      }
    }
  }
  refusals.unshift(...folder.refusals);
  if (config.internetUnsaid)
    notes.push({ field: '[environment] allow_internet', message: "not said (Harbor's default allows the internet): the task runs without it here" });
  return { id, dir, config, turns, context, dockerfile, image, sidecars, refusals, notes };
}

/** a task naming a docker_image: its env is that image or its Dockerfile built, and why (the note, one per choice once grouped) */
async function chooseImage(prebuilt: string, hasDockerfile: boolean, opts: ReadTaskOptions): Promise<{ from: 'docker_image' | 'Dockerfile'; why: string }> {
  const mode = opts.images ?? 'auto';
  if (!hasDockerfile) return { from: 'docker_image', why: 'used: the task has no environment/Dockerfile' };
  if (mode === 'prebuilt') return { from: 'docker_image', why: 'used (--images prebuilt); its environment/Dockerfile is not built' };
  if (mode === 'dockerfile') return { from: 'Dockerfile', why: 'not used: environment/Dockerfile is built instead (--images dockerfile)' };
  const has = (await opts.hasImage?.(prebuilt)) ?? null;
  if (has === true) return { from: 'docker_image', why: 'used: the engine has this image (--images auto); its environment/Dockerfile is not built' };
  return {
    from: 'Dockerfile',
    why:
      has === false
        ? 'the engine does not have this image: environment/Dockerfile is built instead (--images auto; --images prebuilt has the engine pull it at serve time)'
        : 'not checked (no Docker engine answers): environment/Dockerfile is built instead (--images auto; --images prebuilt uses the image)',
  };
}

function mapLine(m: { from: string; to: string; digestSetAside: boolean }): string {
  return `${m.from} mapped to ${m.to} (--base-image)${m.digestSetAside ? ', its pinned digest set aside' : ''}`;
}
