/**
 * A Harbor task's task.toml (schema 1.0, 1.1's [[steps]] and the later fields) read into what the
 * import maps, with every field it does not take named: a refusal when serving the task without
 * it would change what the task means (a GPU, a separate verifier, a user, the internet), a note
 * when dropping it changes nothing the agent or the grade sees (a build timeout, artifacts).
 */
import path from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { TOOLCHAIN_PATHS } from '../../verifier/toolchain.js';
import { isTable, Reader, type Table, type TaskNote } from './toml-reader.js';

export type { TaskNote } from './toml-reader.js';

export interface HealthcheckSpec {
  command: string;
  intervalS: number;
  timeoutS: number;
  retries: number;
  startPeriodS?: number;
  startIntervalS?: number;
}

export interface HarborStep {
  name: string;
  agentTimeoutS?: number;
  verifierTimeoutS?: number;
  verifierEnv: Record<string, string>;
  minReward?: number | Record<string, number>;
  healthcheck?: HealthcheckSpec;
  /** [steps.verifier] environment_mode (unset: the task's) */
  verifierMode?: VerifierPlace;
  /** the step's `artifacts`: paths of the agent's container its separate verifier gets */
  artifacts: string[];
}

/** where a verifier runs: "shared" (the agent's container) or "separate" (a fresh one of the task's image: the bundle's clean mode) */
export type VerifierPlace = 'shared' | 'separate';

export interface HarborConfig {
  schemaVersion: string;
  agentTimeoutS?: number;
  /** [agent] user: who the agent is in the env (the env's agent_user) */
  agentUser?: string;
  verifierTimeoutS?: number;
  verifierEnv: Record<string, string>;
  /** [verifier] environment_mode (unset: "shared", Harbor's default) */
  verifierMode?: VerifierPlace;
  /** the task's `artifacts`: paths of the agent's container a separate verifier gets (their sources) */
  artifacts?: string[];
  solutionEnv: Record<string, string>;
  cpus?: number;
  memoryMb?: number;
  storageMb?: number;
  workdir?: string;
  envVars: Record<string, string>;
  dockerImage?: string;
  healthcheck?: HealthcheckSpec;
  /** what [metadata] holds */
  metadata: Record<string, unknown>;
  /** what [task] holds (name, description, authors, keywords) */
  task: Record<string, unknown> | null;
  steps: HarborStep[] | null;
  stepReward?: 'mean' | 'final';
  /** the task did not say allow_internet (Harbor's default allows it) */
  internetUnsaid: boolean;
}

export interface ReadOptions {
  /** take tasks that allow the internet anyway: they run without it here */
  ignoreInternet: boolean;
}

/** `2G`, `512M`, `1024K` (Harbor's deprecated memory and storage fields) in MB */
function sizeMb(text: string): number | null {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([GMK])\s*$/i.exec(text);
  if (!m) return null;
  const n = Number(m[1]);
  const unit = m[2]!.toUpperCase();
  return Math.floor(unit === 'G' ? n * 1024 : unit === 'M' ? n : n / 1024);
}

function healthcheck(r: Reader | null): HealthcheckSpec | undefined {
  if (!r) return undefined;
  const command = r.string('command');
  if (command === undefined) {
    r.refuse('command', 'a healthcheck needs its command');
    return undefined;
  }
  const spec = {
    command,
    intervalS: r.number('interval_sec') ?? 5,
    timeoutS: r.number('timeout_sec', { min: 0.001 }) ?? 30,
    retries: r.number('retries', { min: 1 }) ?? 3,
  };
  // Docker's semantics: failures within the start period do not count toward the retries
  const startPeriodS = r.number('start_period_sec');
  const startIntervalS = r.number('start_interval_sec');
  r.rest();
  return { ...spec, ...(startPeriodS !== undefined ? { startPeriodS } : {}), ...(startIntervalS !== undefined ? { startIntervalS } : {}) };
}

/** `1000`, `1000:1000`, or a user (and group) name of the image (the env's `agent_user`) */
const USER_SPEC = /^([a-z_][a-z0-9_-]{0,31}|\d{1,10})(:([a-z_][a-z0-9_-]{0,31}|\d{1,10}))?$/;

/**
 * agent/verifier keys every phase may carry that the import cannot honour; `takeUser`: the phase
 * whose `user` the import maps (the task's [agent]: the env's agent_user), which returns it
 */
function phaseLimits(r: Reader, takeUser = false): string | undefined {
  let user: string | undefined;
  if (r.has('user')) {
    const u = r.raw('user');
    if (takeUser && typeof u === 'string' && USER_SPEC.test(u)) user = u;
    else if (takeUser && u !== null && u !== undefined) r.refuse('user', `expected a user name of the image, a uid or uid:gid, got ${JSON.stringify(u)}`);
    else if (u !== null && u !== undefined)
      r.refuse('user', `runs as ${JSON.stringify(u)}: this server runs the verifier, and each step's agent, as the task's [agent] user or the image's user`);
  }
  if (r.has('network_mode')) {
    const mode = r.raw('network_mode');
    if (mode !== 'no-network') r.refuse('network_mode', `${JSON.stringify(mode)}: envs here have no network; only "no-network" can be served`);
  }
  if (r.has('allowed_hosts')) {
    const hosts = r.raw('allowed_hosts');
    if (Array.isArray(hosts) && hosts.length > 0) r.refuse('allowed_hosts', 'an allowlist of hosts: envs here reach no host');
  }
  return user;
}

/**
 * Where a verifier ([verifier], or a step's) runs: "shared" (the agent's container: in-place) or
 * "separate" (a fresh container of the task's own image given the task's artifacts: the bundle's
 * clean mode). A [verifier.environment] of its own (another image, Dockerfile or resources) is refused.
 */
function verifierPlace(r: Reader): VerifierPlace | undefined {
  let place: VerifierPlace | undefined;
  if (r.has('environment_mode')) {
    const mode = r.raw('environment_mode');
    if (mode === 'shared' || mode === 'separate') place = mode;
    else if (mode !== null) r.refuse('environment_mode', `${JSON.stringify(mode)}: expected "shared" or "separate"`);
  }
  if (r.has('environment')) {
    const e = r.raw('environment');
    if (!(isTable(e) && Object.keys(e).length === 0))
      r.refuse(
        'environment',
        'a verifier environment of its own (an image, a Dockerfile or resources): a separate verifier here runs in a fresh container of the task\'s own image, given the task\'s artifacts (environment_mode = "separate" without [verifier.environment])',
      );
  }
  return place;
}

/**
 * `artifacts` (the task's or a step's): paths, or `{ source, destination }` tables, of the agent's
 * container; their sources are what a separate verifier gets. A path in the toolchain is refused
 * (a separate verifier takes the agent's work, never the tools it runs).
 */
function artifacts(r: Reader): string[] {
  if (!r.has('artifacts')) return [];
  const a = r.raw('artifacts');
  if (a === null || a === undefined) return [];
  if (!Array.isArray(a)) {
    r.refuse('artifacts', `expected a list of paths or { source, destination } tables, got ${JSON.stringify(a)}`);
    return [];
  }
  const out: string[] = [];
  for (const item of a) {
    const source = typeof item === 'string' ? item : isTable(item) ? item.source : undefined;
    if (typeof source !== 'string' || !source.startsWith('/')) {
      r.refuse('artifacts', `expected an absolute path or a table with an absolute source, got ${JSON.stringify(item)}`);
      continue;
    }
    const norm = path.posix.normalize(source);
    const clash = TOOLCHAIN_PATHS.find((t) => norm === '/' || norm === t || norm.startsWith(`${t}/`) || t.startsWith(`${norm}/`));
    if (clash) {
      r.refuse(
        'artifacts',
        `${source} ${norm === '/' ? 'is the whole filesystem' : `holds or is within ${clash}`}: a separate verifier takes the agent's work, never the toolchain it runs`,
      );
      continue;
    }
    if (!out.includes(norm)) out.push(norm);
  }
  return out;
}

function minReward(r: Reader): number | Record<string, number> | undefined {
  if (!r.has('min_reward')) return undefined;
  const v = r.raw('min_reward');
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  if (isTable(v) && Object.values(v).every((x) => typeof x === 'number' && Number.isFinite(x))) return v as Record<string, number>;
  if (v !== null && v !== undefined) r.refuse('min_reward', `expected a number or a table of numbers, got ${JSON.stringify(v)}`);
  return undefined;
}

export function readTaskConfig(text: string, opts: ReadOptions): { config: HarborConfig | null; refusals: TaskNote[]; notes: TaskNote[] } {
  const out = { refusals: [] as TaskNote[], notes: [] as TaskNote[] };
  let doc: Table;
  try {
    doc = parseToml(text) as Table;
  } catch (e) {
    out.refusals.push({ field: 'task.toml', message: `not valid TOML: ${(e as Error).message.split('\n')[0]}` });
    return { config: null, ...out };
  }
  const top = new Reader(doc, '', out);
  const version = top.string('schema_version') ?? top.string('version') ?? '1.0';
  if (!/^1(\.\d+)*$/.test(version)) top.refuse('schema_version', `schema ${JSON.stringify(version)}: this import reads Harbor's schema 1.x`);

  // [task] and [metadata] are kept whole, in the task's meta
  const taskInfo = top.table_('task');
  const meta = top.table_('metadata');
  if (top.has('source')) top.raw('source');

  const verifier = top.table_('verifier');
  let verifierTimeoutS: number | undefined;
  let verifierEnv: Record<string, string> = {};
  let verifierMode: VerifierPlace | undefined;
  if (verifier) {
    verifierTimeoutS = verifier.number('timeout_sec', { min: 0.001 });
    verifierEnv = verifier.vars('env');
    phaseLimits(verifier);
    verifierMode = verifierPlace(verifier);
    verifier.rest();
  }
  const agent = top.table_('agent');
  let agentTimeoutS: number | undefined;
  let agentUser: string | undefined;
  if (agent) {
    agentTimeoutS = agent.number('timeout_sec', { min: 0.001 });
    agentUser = phaseLimits(agent, true);
    agent.rest();
  }
  const solution = top.table_('solution');
  const solutionEnv = solution ? solution.vars('env') : {};
  solution?.rest();

  const env = top.table_('environment');
  const config: HarborConfig = {
    schemaVersion: version,
    verifierEnv,
    solutionEnv,
    envVars: {},
    metadata: meta?.table ?? {},
    task: taskInfo?.table ?? null,
    steps: null,
    internetUnsaid: true,
    ...(agentTimeoutS !== undefined ? { agentTimeoutS } : {}),
    ...(verifierTimeoutS !== undefined ? { verifierTimeoutS } : {}),
    ...(agentUser !== undefined ? { agentUser } : {}),
    ...(verifierMode !== undefined ? { verifierMode } : {}),
  };
  if (env) {
    const num = (k: string, min = 0) => env.number(k, { min });
    const cpus = num('cpus', 0.001);
    if (cpus !== undefined) config.cpus = cpus;
    let memoryMb = num('memory_mb', 6);
    let storageMb = num('storage_mb', 1);
    for (const [k, set] of [
      ['memory', (n: number) => (memoryMb ??= n)],
      ['storage', (n: number) => (storageMb ??= n)],
    ] as const) {
      const s = env.string(k);
      if (s === undefined) continue;
      const mb = sizeMb(s);
      if (mb === null) env.refuse(k, `expected a size such as "2G" or "512M", got ${JSON.stringify(s)}`);
      else set(mb);
    }
    if (memoryMb !== undefined) config.memoryMb = Math.round(memoryMb);
    if (storageMb !== undefined) config.storageMb = Math.round(storageMb);
    const workdir = env.string('workdir');
    if (workdir !== undefined) {
      if (!workdir.startsWith('/')) env.refuse('workdir', `expected an absolute path, got ${JSON.stringify(workdir)}`);
      else config.workdir = workdir;
    }
    config.envVars = env.vars('env');
    const image = env.string('docker_image');
    if (image !== undefined) config.dockerImage = image;
    const os = env.string('os');
    if (os !== undefined && os.toLowerCase() !== 'linux') env.refuse('os', `${JSON.stringify(os)}: envs here are Linux containers`);
    const gpus = num('gpus');
    if (gpus !== undefined && gpus > 0) env.refuse('gpus', `${gpus} GPU(s): envs here get none`);
    if (env.has('gpu_types')) {
      const g = env.raw('gpu_types');
      if (g !== null && !(Array.isArray(g) && g.length === 0)) env.refuse('gpu_types', 'GPU types: envs here get no GPU');
    }
    if (env.has('build_timeout_sec')) {
      env.raw('build_timeout_sec');
      env.note('build_timeout_sec', 'not applied: images build without a time limit here');
    }
    if (env.has('mcp_servers')) {
      const servers = env.raw('mcp_servers');
      if (Array.isArray(servers) && servers.length > 0)
        env.refuse('mcp_servers', 'MCP servers (sidecar services) are not supported: the agent gets the shell toolset only');
    }
    if (env.has('skills_dir')) {
      env.raw('skills_dir');
      env.note('skills_dir', 'agent skills are for installed agents: dropped (the model gets the shell toolset)');
    }
    config.healthcheck = healthcheck(env.table_('healthcheck'));
    if (config.healthcheck === undefined) delete config.healthcheck;
    // the internet: network_mode when given, else allow_internet (Harbor's default: allowed)
    const mode = env.has('network_mode') ? env.raw('network_mode') : undefined;
    const allow = env.has('allow_internet') ? env.raw('allow_internet') : undefined;
    const hosts = env.has('allowed_hosts') ? env.raw('allowed_hosts') : undefined;
    config.internetUnsaid = mode === undefined && allow === undefined;
    const wantsInternet = mode !== undefined ? mode !== 'no-network' : allow === true;
    if (mode === 'allowlist' || (mode === undefined && allow === false && Array.isArray(hosts) && hosts.length > 0)) {
      env.refuse(mode !== undefined ? 'network_mode' : 'allowed_hosts', 'an allowlist of hosts: envs here reach no host');
    } else if (wantsInternet) {
      const field = mode !== undefined ? 'network_mode' : 'allow_internet';
      if (opts.ignoreInternet) env.note(field, 'the task allows the internet; imported with --ignore-internet, it runs without it');
      else
        env.refuse(
          field,
          'the task allows the internet, and envs here have none: import with --ignore-internet to run it offline anyway (its tests and solution must then not need the network)',
        );
    }
    env.rest();
  }

  const rule = top.string('multi_step_reward_strategy');
  if (rule !== undefined) {
    if (rule === 'mean' || rule === 'final') config.stepReward = rule;
    else top.refuse('multi_step_reward_strategy', `${JSON.stringify(rule)}: expected "mean" or "final"`);
  }
  const taskArtifacts = artifacts(top);
  if (taskArtifacts.length > 0) config.artifacts = taskArtifacts;
  if (top.has('steps')) {
    const steps = top.raw('steps');
    if (!Array.isArray(steps) || steps.length === 0 || !steps.every(isTable)) {
      top.refuse('steps', 'expected [[steps]] tables');
    } else {
      config.steps = steps.map((raw, i) => {
        const r = new Reader(raw as Table, `[[steps]] ${i + 1}`, out);
        const name = r.string('name') ?? '';
        if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name)) r.refuse('name', `expected a step name (a folder of steps/), got ${JSON.stringify(name)}`);
        const step: HarborStep = { name, verifierEnv: {}, artifacts: [] };
        const a = r.table_('agent');
        if (a) {
          const t = a.number('timeout_sec', { min: 0.001 });
          if (t !== undefined) step.agentTimeoutS = t;
          phaseLimits(a);
          a.rest();
        }
        const v = r.table_('verifier');
        if (v) {
          const t = v.number('timeout_sec', { min: 0.001 });
          if (t !== undefined) step.verifierTimeoutS = t;
          step.verifierEnv = v.vars('env');
          phaseLimits(v);
          const place = verifierPlace(v);
          if (place !== undefined) step.verifierMode = place;
          v.rest();
        }
        const m = minReward(r);
        if (m !== undefined) step.minReward = m;
        const h = healthcheck(r.table_('healthcheck'));
        if (h) step.healthcheck = h;
        if (r.has('inherit_prior_session')) {
          const inherit = r.raw('inherit_prior_session');
          if (inherit === true)
            r.note(
              'inherit_prior_session',
              "as asked: a served episode is one conversation, each step's prompt after the steps before it (a harness from --agent starts afresh each step)",
            );
          else if (inherit === false)
            r.note(
              'inherit_prior_session',
              "not applied: a served episode is one conversation, so this step's prompt still follows the steps before it (a harness from --agent starts afresh each step)",
            );
          else r.refuse('inherit_prior_session', `expected true or false, got ${JSON.stringify(inherit)}`);
        }
        step.artifacts = artifacts(r);
        // a shared verifier sees the whole container: the step's artifacts are not collected
        if (step.artifacts.length > 0 && (step.verifierMode ?? verifierMode) !== 'separate')
          r.note('artifacts', 'not collected here (a shared verifier sees the whole container): dropped');
        r.rest();
        return step;
      });
      const names = config.steps.map((s) => s.name);
      names.forEach((n, i) => {
        if (names.indexOf(n) !== i) out.refusals.push({ field: `[[steps]] ${i + 1} name`, message: `"${n}" names two steps` });
      });
    }
  }
  // the task's artifacts go to its separate verifier(s); with none, they are not collected
  const separate = verifierMode === 'separate' || (config.steps ?? []).some((s) => s.verifierMode === 'separate');
  if (taskArtifacts.length > 0 && !separate) top.note('artifacts', 'not collected here (a shared verifier sees the whole container): dropped');
  top.rest();
  return { config, ...out };
}
