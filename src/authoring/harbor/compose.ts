/**
 * A Harbor task's `environment/docker-compose.yaml` (or .yml, compose.yaml) read into what the
 * import can serve: Harbor lays the file over its own compose, whose `main` service is the
 * agent's container. What changes `main` in ways every env here already is (no network, its own
 * build of environment/) or that the env maps (environment, working_dir, healthcheck, depends_on
 * as the order) is taken; every other service becomes a sidecar of the env (its image or a build
 * of a folder of environment/, environment, healthcheck), on the episode's own network and
 * reached by its name. Anything else (ports, host volumes, privileges, a network that reaches
 * out, a one-shot service) refuses the task, naming it. Nothing is written here.
 */
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { SIDECAR_NAME_PATTERN } from '../../bundle/schema.js';
import type { TaskNote, HealthcheckSpec } from './task-config.js';

/** what a main-only compose file gives the env */
export interface ComposeMain {
  environment: Record<string, string>;
  workdir?: string;
  healthcheck?: HealthcheckSpec;
}

/**
 * A service beside main (a database, a cache): the env's sidecar (bundle.json's
 * envs.<env>.sidecars), on the episode's network, reached from main by its name.
 */
export interface ComposeSidecar {
  name: string;
  /** the folder of environment/ its image builds from (holding a Dockerfile), relative to environment/ ('.' for environment/ itself) */
  build?: string;
  image?: string;
  environment: Record<string, string>;
  healthcheck?: HealthcheckSpec;
  /** the check's program and arguments when the file gave them as ["CMD", …]: run with no shell (an image may have none) */
  healthcheckArgv?: string[];
}

export interface ComposeRead {
  main: ComposeMain;
  sidecars: ComposeSidecar[];
  refusals: TaskNote[];
  notes: TaskNote[];
}

type Table = Record<string, unknown>;
const isTable = (v: unknown): v is Table => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Harbor's own compose variables for the main image and its build context: naming them is naming the default */
const HARBOR_IMAGE_VARS = /^\$\{?(MAIN_IMAGE_NAME|IMAGE_NAME)\}?$/;
const HARBOR_CONTEXT_VARS = /^\$\{?(CONTEXT_DIR|ENVIRONMENT_DIR)\}?$/;

/** main's keys that are dropped with a note: they change nothing the agent or the grade sees */
const DROPPED = new Set([
  'container_name',
  'hostname',
  'labels',
  'restart',
  'init',
  'tty',
  'stdin_open',
  'expose',
  'stop_signal',
  'stop_grace_period',
  'logging',
]);
/** main's keys for resources: task.toml's [environment] cpus / memory_mb are the env's limits here */
const RESOURCES = new Set(['deploy', 'mem_limit', 'memswap_limit', 'cpus', 'cpu_count', 'pids_limit', 'shm_size']);
/** main's keys refused by name, and why */
const REFUSED: Record<string, string> = {
  ports: "publishes ports on the host: an env here is reached only through the server's tools",
  volumes: "mounts volumes (the host's folders, or volumes kept beyond the episode): an env here holds only its image's files",
  privileged: 'a privileged container: envs here run with no extra privilege',
  cap_add: 'adds capabilities: envs here run with the default set, fewer when locked down',
  cap_drop: "changes the container's capabilities: the server sets them",
  devices: "the host's devices: envs here get none",
  security_opt: "security options: the server sets the env's profile",
  pid: 'shares a process namespace: an env here has its own',
  ipc: 'shares an IPC namespace: an env here has its own',
  userns_mode: "a user namespace mode: the server sets the env's",
  sysctls: 'kernel settings: not applied to an env here',
  ulimits: "limits of the container's own: the server sets the env's",
  extra_hosts: 'host names to addresses: an env here reaches no host',
  dns: 'DNS servers: an env here reaches no network',
  dns_search: 'DNS settings: an env here reaches no network',
  links: 'links to other services: services reach each other by name here (their sidecar names)',
  external_links: 'links to containers outside the file: an env here reaches only its own sidecars',
  env_file: "reads variables from a file of the host running Harbor: give them in task.toml's [environment] env",
  user: "runs main as another user: give it as task.toml's [agent] user",
  command: "replaces main's command: the env's first process is the server's here",
  entrypoint: "replaces main's entrypoint: the env's first process is the server's here",
  runtime: "a container runtime: the server chooses the env's",
  gpus: 'GPUs: envs here get none',
  secrets: "secrets of the host: give values in task.toml's [environment] env",
  configs: 'configs of the host: put the files in environment/ and COPY them',
  platform: "a platform: envs here run the engine's own",
  cgroup_parent: "a cgroup of the host: the server places the env's",
};
/** top-level keys refused by name when they declare anything, and why */
const TOP_REFUSED: Record<string, string> = {
  volumes: "named volumes: an env here holds only its image's files, and keeps nothing beyond its episode",
  secrets: "secrets of the host: give values in task.toml's [environment] env",
  configs: 'configs of the host: put the files in environment/ and COPY them',
};

/** `5s`, `1m30s`, `100ms`, `2h`, or a plain number of seconds */
function durationS(v: unknown): number | null {
  if (typeof v === 'number' && Number.isFinite(v) && v >= 0) return v;
  if (typeof v !== 'string') return null;
  const text = v.trim();
  if (!/^(\d+(\.\d+)?(h|ms|m|s|us|ns))+$/.test(text)) return null;
  const unit: Record<string, number> = { h: 3600, m: 60, s: 1, ms: 1e-3, us: 1e-6, ns: 1e-9 };
  let total = 0;
  for (const m of text.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s|us|ns)/g)) total += Number(m[1]) * unit[m[2]!]!;
  return total;
}

/** Compose's `test`: a string (run by the shell), ["CMD-SHELL", cmd], ["CMD", argv…]; null for NONE or what is not one */
/** a service's `build` (a context string, or a mapping): its context, its Dockerfile and what else it sets */
function buildOf(v: unknown): { ctx: unknown; dockerfile: unknown; extra: string[] } {
  if (!isTable(v)) return { ctx: typeof v === 'string' ? v : undefined, dockerfile: undefined, extra: [] };
  return { ctx: v.context, dockerfile: v.dockerfile, extra: Object.keys(v).filter((x) => x !== 'context' && x !== 'dockerfile') };
}

function healthcheckCommand(test: unknown): string | null {
  if (typeof test === 'string') return test.trim() === '' ? null : test;
  if (!Array.isArray(test) || test.length === 0 || !test.every((x) => typeof x === 'string')) return null;
  const [kind, ...rest] = test as string[];
  if (kind === 'CMD-SHELL' && rest.length === 1) return rest[0]!;
  if (kind === 'CMD' && rest.length > 0) return rest.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');
  return null;
}

type Refuse = (where: string, message: string) => void;

/** a service's `environment` (a mapping or a list of NAME=VALUE), each value given in the file */
function readEnvironment(v: unknown, at: (k: string) => string, refuse: Refuse): Record<string, string> {
  const out: Record<string, string> = {};
  const entries: [string, unknown][] = Array.isArray(v)
    ? v.map((e) => {
        const s = String(e);
        const eq = s.indexOf('=');
        return eq < 0 ? [s, undefined] : [s.slice(0, eq), s.slice(eq + 1)];
      })
    : isTable(v)
      ? Object.entries(v)
      : [];
  if (!Array.isArray(v) && !isTable(v)) refuse(at('environment'), 'expected a mapping or a list of NAME=VALUE');
  for (const [name, val] of entries) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) refuse(at(`environment.${name}`), 'expected a variable name ([A-Za-z_][A-Za-z0-9_]*)');
    else if (val === undefined || val === null) refuse(at(`environment.${name}`), 'takes its value from the host running Harbor: give it a value');
    else if (typeof val === 'object') refuse(at(`environment.${name}`), `expected a value, got ${JSON.stringify(val)}`);
    else if (/\$\{?[A-Za-z_]/.test(String(val)))
      refuse(at(`environment.${name}`), `its value ${JSON.stringify(val)} reads a variable of the host running Harbor; give it a value`);
    else out[name] = String(val);
  }
  return out;
}

/** a service's `healthcheck`; undefined when disabled or refused */
function readHealthcheck(v: unknown, at: (k: string) => string, refuse: Refuse, note: Refuse): HealthcheckSpec | undefined {
  if (!isTable(v)) {
    refuse(at('healthcheck'), 'expected a mapping');
    return undefined;
  }
  if (v.disable === true) {
    note(at('healthcheck'), 'disabled: no check');
    return undefined;
  }
  const command = healthcheckCommand(v.test);
  if (command === null) {
    refuse(at('healthcheck.test'), `expected a command ("CMD-SHELL", …, or "CMD", …), got ${JSON.stringify(v.test)}`);
    return undefined;
  }
  const num = (key: string, dflt: number, parse: (x: unknown) => number | null) => {
    if (v[key] === undefined) return dflt;
    const n = parse(v[key]);
    if (n === null)
      refuse(at(`healthcheck.${key}`), `expected ${key === 'retries' ? 'a whole number' : 'a duration (5s, 1m30s)'}, got ${JSON.stringify(v[key])}`);
    return n ?? dflt;
  };
  const out: HealthcheckSpec = {
    command,
    intervalS: num('interval', 5, durationS),
    timeoutS: num('timeout', 30, durationS),
    retries: num('retries', 3, (x) => (typeof x === 'number' && Number.isInteger(x) && x >= 1 ? x : null)),
    ...(v.start_period !== undefined ? { startPeriodS: num('start_period', 0, durationS) } : {}),
    ...(v.start_interval !== undefined ? { startIntervalS: num('start_interval', 5, durationS) } : {}),
  };
  for (const key of Object.keys(v)) {
    if (!['test', 'interval', 'timeout', 'retries', 'start_period', 'start_interval', 'disable'].includes(key))
      refuse(at(`healthcheck.${key}`), 'not a healthcheck setting this import reads');
  }
  return out;
}

/** `depends_on` conditions taken as the order main is deployed in (after each sidecar runs, and is healthy when it has a check) */
const DEPENDS_CONDITIONS = new Set(['service_started', 'service_healthy']);

/** a `depends_on` (a list of names, or names with conditions): the services named; what cannot be served is refused */
function readDependsOn(v: unknown, at: (k: string) => string, services: readonly string[], refuse: Refuse): string[] {
  const names = Array.isArray(v) ? v.map(String) : isTable(v) ? Object.keys(v) : null;
  if (names === null) {
    refuse(at('depends_on'), 'expected a list of services or a mapping of services to conditions');
    return [];
  }
  for (const n of names) {
    if (!services.includes(n)) refuse(at(`depends_on.${n}`), 'names no service of this file');
    const cond = isTable(v) && isTable(v[n]) ? (v[n] as Table).condition : undefined;
    if (cond !== undefined && !DEPENDS_CONDITIONS.has(String(cond)))
      refuse(
        at(`depends_on.${n}.condition`),
        `${JSON.stringify(cond)}: a sidecar here runs for the whole episode (one that exits ends the deploy); only service_started and service_healthy can be served`,
      );
  }
  return names;
}

/** a sidecar's keys, besides those main's rules decide alike (ports, volumes, privileges… refused; container_name, restart… dropped) */
const SIDECAR_TAKES = 'build (a folder of environment/), image, environment, healthcheck, depends_on, internal networks';

/** a sidecar's keys refused in words of their own */
const SIDECAR_REFUSED: Record<string, string> = {
  command: "replaces the image's command: not supported for a sidecar yet; build one (a folder of environment/) whose CMD runs it",
  entrypoint: "replaces the image's entrypoint: not supported for a sidecar yet; build one (a folder of environment/) whose ENTRYPOINT runs it",
  user: 'runs it as another user: not supported for a sidecar yet; build one whose USER is it',
  env_file: 'reads variables from a file of the host running Harbor: give them in its environment',
};

/** reads one service beside main into a sidecar */
function readSidecar(name: string, svc: unknown, services: readonly string[], refuse: Refuse, note: Refuse): ComposeSidecar | null {
  const at = (k: string) => `services.${name}${k ? `.${k}` : ''}`;
  if (!SIDECAR_NAME_PATTERN.test(name)) {
    refuse(
      at(''),
      `a service beside main becomes a sidecar reached by its name, and ${JSON.stringify(name)} is no host name here (${SIDECAR_NAME_PATTERN.source})`,
    );
    return null;
  }
  if (!isTable(svc)) {
    refuse(at(''), 'expected a mapping');
    return null;
  }
  const sc: ComposeSidecar = { name, environment: {} };
  for (const [k, v] of Object.entries(svc)) {
    if (k.startsWith('x-')) continue;
    switch (k) {
      case 'build': {
        const { ctx, dockerfile, extra } = buildOf(v);
        const folder = typeof ctx === 'string' ? path.posix.normalize(ctx.replace(/^\$\{?(CONTEXT_DIR|ENVIRONMENT_DIR)\}?/, '.')) : null;
        if (folder === null || folder.startsWith('..') || path.posix.isAbsolute(folder) || folder.includes('$'))
          refuse(at('build'), `builds ${JSON.stringify(ctx)}: a sidecar builds a folder of environment/ here`);
        else if (!(dockerfile === undefined || dockerfile === 'Dockerfile' || dockerfile === './Dockerfile') || extra.length > 0)
          refuse(
            at('build'),
            `builds with ${extra.length ? extra.join(', ') : `dockerfile ${JSON.stringify(dockerfile)}`}: a sidecar builds its folder's Dockerfile here`,
          );
        else sc.build = folder.replace(/\/$/, '') || '.';
        break;
      }
      case 'image':
        if (typeof v === 'string' && /^\S+$/.test(v) && !v.includes('$')) sc.image = v;
        else refuse(at('image'), `expected an image reference, got ${JSON.stringify(v)}`);
        break;
      case 'environment':
        sc.environment = readEnvironment(v, at, refuse);
        break;
      case 'healthcheck': {
        const h = readHealthcheck(v, at, refuse, note);
        if (h) sc.healthcheck = h;
        const test = isTable(v) ? v.test : undefined;
        if (h && Array.isArray(test) && test[0] === 'CMD') sc.healthcheckArgv = (test as string[]).slice(1);
        break;
      }
      case 'depends_on':
        readDependsOn(v, at, services, refuse);
        note(at('depends_on'), 'sidecars start together here: the order among them is not kept (a sidecar waits for another by retrying)');
        break;
      case 'networks': {
        const names = Array.isArray(v) ? v.map(String) : isTable(v) ? Object.keys(v) : [];
        note(at('networks'), `${names.join(', ')}: every sidecar is on the episode's own network here, with main, reaching nothing outside`);
        break;
      }
      case 'network_mode':
        refuse(at('network_mode'), `${JSON.stringify(v)}: a sidecar here is on the episode's own network, with main`);
        break;
      default:
        if (DROPPED.has(k)) note(at(k), 'changes nothing the agent or the grade sees: dropped');
        else if (RESOURCES.has(k)) note(at(k), 'a sidecar gets small limits of its own here (docs/bundle-format.md, Sidecars): dropped');
        else
          refuse(
            at(k),
            SIDECAR_REFUSED[k] ?? REFUSED[k]?.replace(/\benv(s)?\b/g, 'sidecar$1') ?? `not supported for a sidecar: it takes only ${SIDECAR_TAKES} here`,
          );
    }
  }
  if (sc.build === undefined && sc.image === undefined) {
    refuse(at(''), 'neither build nor image: a sidecar needs one');
    return null;
  }
  if (sc.build !== undefined && sc.image !== undefined) note(at('image'), 'with build: the image built here (its name is dropped)');
  if (sc.build !== undefined) delete sc.image;
  return sc;
}

/** Reads a compose file's text; `file` names it in findings (`environment/docker-compose.yaml`). */
export function readCompose(text: string, file: string): ComposeRead {
  const refusals: TaskNote[] = [];
  const notes: TaskNote[] = [];
  const main: ComposeMain = { environment: {} };
  const sidecars: ComposeSidecar[] = [];
  const refuse = (where: string, message: string) => refusals.push({ field: `${file} ${where}`.trim(), message });
  const note = (where: string, message: string) => notes.push({ field: `${file} ${where}`.trim(), message });
  let doc: unknown;
  try {
    doc = parseYaml(text, { merge: true, maxAliasCount: 100 });
  } catch (e) {
    refuse('', `not valid YAML: ${(e as Error).message.split('\n')[0]}`);
    return { main, sidecars, refusals, notes };
  }
  if (doc === null || doc === undefined) return { main, sidecars, refusals, notes };
  if (!isTable(doc)) {
    refuse('', 'expected a mapping (services:, …)');
    return { main, sidecars, refusals, notes };
  }

  // the networks the file declares: only internal ones (reaching nothing outside) are what an env here is
  const declared = isTable(doc.networks) ? doc.networks : {};
  const internal = (name: string) => isTable(declared[name]) && (declared[name] as Table).internal === true;
  for (const [k, v] of Object.entries(doc)) {
    if (k === 'services' || k === 'version' || k === 'name' || k.startsWith('x-')) continue;
    if (k === 'networks') {
      if (v !== null && !isTable(v)) refuse('networks', 'expected a mapping of networks');
      continue;
    }
    if ((k === 'volumes' || k === 'secrets' || k === 'configs') && (v === null || (isTable(v) && Object.keys(v).length === 0))) continue;
    refuse(k, TOP_REFUSED[k] ?? 'not supported: a task runs in one container here, its image and task.toml its settings');
  }

  const services = doc.services;
  if (services === undefined || services === null) return { main, sidecars, refusals, notes };
  if (!isTable(services)) {
    refuse('services', 'expected a mapping of services');
    return { main, sidecars, refusals, notes };
  }
  // every other service is a sidecar of the env (bundle.json's envs.<env>.sidecars)
  const names = Object.keys(services);
  for (const other of names.filter((n) => n !== 'main')) {
    const sc = readSidecar(other, services[other], names, refuse, note);
    if (sc) sidecars.push(sc);
  }
  const m = services.main;
  if (m === undefined || m === null) return { main, sidecars, refusals, notes };
  if (!isTable(m)) {
    refuse('services.main', 'expected a mapping');
    return { main, sidecars, refusals, notes };
  }
  const at = (k: string) => `services.main.${k}`;
  for (const [k, v] of Object.entries(m)) {
    if (k.startsWith('x-')) continue;
    switch (k) {
      case 'build': {
        const { ctx, dockerfile, extra } = buildOf(v);
        const sameContext = ctx === undefined || ctx === '.' || ctx === './' || (typeof ctx === 'string' && HARBOR_CONTEXT_VARS.test(ctx));
        const sameDockerfile = dockerfile === undefined || dockerfile === 'Dockerfile' || dockerfile === './Dockerfile';
        if (!sameContext || !sameDockerfile || extra.length > 0)
          refuse(
            at('build'),
            `builds ${extra.length ? `with ${extra.join(', ')}` : `${JSON.stringify(ctx ?? '.')}/${String(dockerfile ?? 'Dockerfile')}`}: main builds environment/Dockerfile here, as Harbor's own compose does`,
          );
        break;
      }
      case 'image':
        if (!(typeof v === 'string' && HARBOR_IMAGE_VARS.test(v)))
          refuse(at('image'), `${JSON.stringify(v)}: main's image is the task's (environment/Dockerfile, or [environment] docker_image in task.toml)`);
        break;
      case 'network_mode':
        if (v === 'none') note(at('network_mode'), 'none: kept (every env here has no network)');
        else refuse(at('network_mode'), `${JSON.stringify(v)}: envs here have no network; only "none" can be served`);
        break;
      case 'networks': {
        const names = Array.isArray(v) ? v.map(String) : isTable(v) ? Object.keys(v) : [];
        const open = names.filter((n) => !internal(n));
        if (open.length > 0) refuse(at('networks'), `${open.join(', ')}: a network that is not internal reaches out; envs here have no network`);
        else note(at('networks'), 'internal networks only: taken as no network (every env here has none)');
        break;
      }
      case 'environment':
        main.environment = readEnvironment(v, at, refuse);
        break;
      case 'depends_on':
        // main is deployed after its sidecars (each running, and healthy when it has a check): the order it asks for
        readDependsOn(v, at, Object.keys(services), refuse);
        break;
      case 'working_dir':
        if (typeof v === 'string' && v.startsWith('/')) main.workdir = v;
        else refuse(at('working_dir'), `expected an absolute path, got ${JSON.stringify(v)}`);
        break;
      case 'healthcheck': {
        const h = readHealthcheck(v, at, refuse, note);
        if (h) main.healthcheck = h;
        break;
      }
      default:
        if (DROPPED.has(k)) note(at(k), 'changes nothing the agent or the grade sees: dropped');
        else if (RESOURCES.has(k)) note(at(k), "resources are task.toml's here ([environment] cpus, memory_mb): dropped");
        else
          refuse(
            at(k),
            REFUSED[k] ?? 'not supported: main takes only build, image, network_mode none, internal networks, environment, working_dir and healthcheck here',
          );
    }
  }
  return { main, sidecars, refusals, notes };
}
