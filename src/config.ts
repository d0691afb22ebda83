/**
 * Every server option in one zod schema: flags, environment variables, buildApp options and
 * `--help` all derive from it, so an option is declared once. Each option of every command
 * (the server's here, the other subcommands' in src/cli/) is an OptionSpec: its type and default
 * (a zod schema), its help, and how it is spelled; src/cli/options.ts parses a command line from
 * them and prints their --help lines.
 *
 * Long because every server option is declared here once (a table of about sixty, each with its
 * help), with the checks across options that only the whole table can make.
 */
import { isIP } from 'node:net';
import { z } from 'zod';
import { parseCidr } from './util/cidr.js';
import {
  MAX_STEPS,
  DEFAULT_IMAGE_BUILD_CONCURRENCY,
  DEFAULT_MAX_CONCURRENT_DEPLOYS,
  ENV_LAYER_DEFAULTS,
  EPISODE_SUBNET_PREFIX,
  GATEWAY,
  LANE_SHARE,
  NETWORK_STOCK,
  SUBNET_POOL,
} from './defaults.js';
import { LANES, type Lane } from './protocol/lanes.js';
import { parseEngineAddress } from './util/engine-address.js';

/** One option of a command, declared once: type and default, help, spelling. */
export interface OptionSpec {
  /** the value's type and default (`.default(…)`); an option without one is optional or required */
  schema: z.ZodTypeAny;
  /** what --help says it does (the default is printed apart) */
  help: string;
  /** the value's placeholder (`N`, `DIR`, `KEY=VALUE`); absent for a switch, which takes none */
  value?: string;
  /** may be given more than once; the values form a list */
  repeatable?: boolean;
  /** a one-letter spelling (`-o`) */
  short?: string;
  /** the default in words, where the schema has none to show (a computed one, "the bundle's") */
  shownDefault?: string;
  /** environment variables read when the flag is absent (a flag wins), first set one used */
  env?: readonly string[];
}

export type OptionTable = Record<string, OptionSpec>;

/** The zod shape of a table's options, for z.object(). */
export type OptionShape<T extends OptionTable> = { [K in keyof T]: T[K]['schema'] };

export function optionShape<T extends OptionTable>(table: T): OptionShape<T> {
  return Object.fromEntries(Object.entries(table).map(([k, o]) => [k, o.schema])) as OptionShape<T>;
}

/** An option's default, through the wrappers zod puts around it (a refine is a ZodEffects, a pipe a ZodPipeline). */
export function schemaDefault(schema: z.ZodTypeAny): unknown {
  let s: { _def: { defaultValue?: () => unknown; schema?: unknown; innerType?: unknown; in?: unknown } } | undefined = schema;
  for (let i = 0; s && i < 8; i++) {
    if (typeof s._def.defaultValue === 'function') return s._def.defaultValue();
    s = (s._def.schema ?? s._def.innerType ?? s._def.in) as typeof s;
  }
  return undefined;
}

/** The default as --help and docs/options.md say it: the words given, else the schema's (`none`, `off` for a switch, `required`). */
export function shownDefault(o: OptionSpec): string {
  if (o.shownDefault !== undefined) return o.shownDefault;
  if (!o.schema.isOptional()) return 'required';
  const d = schemaDefault(o.schema);
  if (d === undefined || d === null) return 'none';
  if (typeof d === 'boolean') return d ? 'on' : 'off';
  if (Array.isArray(d)) return d.length ? d.join(' ') : 'none';
  return String(d);
}

export function kebab(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

/** OPENENV_MAX_CONCURRENT_ENVS for maxConcurrentEnvs. */
export function envVarName(name: string): string {
  return `OPENENV_${kebab(name).replace(/-/g, '_').toUpperCase()}`;
}

const seconds = (def: number) => z.coerce.number().positive().finite().default(def);
/** a default bound of envs' writable layers: a whole number, 0 or `off` for none */
const layerDefault = (def: number) =>
  z
    .preprocess((v) => (typeof v === 'string' && v.trim().toLowerCase() === 'off' ? 0 : v), z.coerce.number().int('expected a whole number, or off').min(0))
    .default(def);
const positiveInt = (def: number) => z.coerce.number().int().positive().default(def);

/** `KEY=VALUE`, repeatable */
export const buildArgsSchema = z
  .union([z.string(), z.array(z.string())])
  .transform((v) => (Array.isArray(v) ? v : [v]))
  .pipe(z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*=/, 'expected KEY=VALUE (KEY a build argument name)')))
  .default([]);

function isNodeEngineAddress(a: string): boolean {
  try {
    parseEngineAddress(a);
    return true;
  } catch {
    return false;
  }
}

/** `SPLIT=PRIORITY`, repeatable or comma-separated */
const splitPrioritySchema = commaList(
  z.string().regex(new RegExp(`^[^=\\s]+=(${LANES.join('|')})$`), `expected SPLIT=PRIORITY, PRIORITY one of ${LANES.join(', ')}`),
  (s) => s,
  ['eval=high'],
);

/** a switch; from the environment also true/false, 1/0, yes/no */
const bool = z
  .union([z.boolean(), z.enum(['true', 'false', '1', '0', 'yes', 'no', ''])])
  .transform((v) => v === true || v === 'true' || v === '1' || v === 'yes' || v === '')
  .default(false);

/** A host name as --allowed-hosts takes it: a name, `.name` (it and every name under it), or `*`. */
const HOST_NAME = /^(\*|\.?[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?)$/;

/** a comma-separated list (or a list of them, from repeated flags), each item checked, then normalised; `fallback` when not given */
function commaList(item: z.ZodString | z.ZodEffects<z.ZodString>, normal: (s: string) => string, fallback: string[] = []) {
  return z
    .union([z.string(), z.array(z.string())])
    .transform((v) =>
      (Array.isArray(v) ? v : [v])
        .flatMap((s) => s.split(','))
        .map((s) => s.trim())
        .filter((s) => s !== ''),
    )
    .pipe(z.array(item))
    .transform((list) => list.map(normal))
    .default(fallback);
}

const S = 'S';
const N = 'N';

/** Every server option, in the order --help lists them. Each is also read from OPENENV_<NAME> (envVarName). */
export const SERVER_OPTIONS = {
  host: { schema: z.string().min(1).default('127.0.0.1'), value: 'HOST', help: 'address to listen on; a non-loopback address needs a token' },
  port: { schema: z.coerce.number().int().min(0).max(65535).default(8200), value: 'PORT', help: 'port to listen on (0 picks a free one)' },
  maxConcurrentEnvs: {
    schema: positiveInt(8),
    value: N,
    help: 'envs running at once; further resets wait, FIFO per lane',
  },
  warmPool: {
    schema: z.coerce.number().int().min(0).default(0),
    value: N,
    help: 'envs kept deployed ahead of demand, each fresh and used by one episode only; they hold slots of --max-concurrent-envs (0: every reset deploys its env)',
  },
  warmPoolGroup: {
    schema: z
      .union([z.literal('auto'), z.coerce.number().int().positive()], { errorMap: () => ({ message: 'a whole number of resets (1 or more), or auto' }) })
      .default(1),
    value: 'N|auto',
    help: "with --warm-pool: a reset of an env starts up to N-1 more of that env for the rest of its group (a GRPO trainer's rollouts of one task), counting those pooled or deploying; auto learns N from how resets of one env arrive (1: off)",
  },
  maxConcurrentDeploys: {
    schema: positiveInt(DEFAULT_MAX_CONCURRENT_DEPLOYS),
    value: N,
    help: 'envs starting at once (network, container, readiness), for resets and pool refills alike; refills yield to waiting resets',
  },
  networkStock: {
    schema: z.coerce.number().int().min(0).optional(),
    value: N,
    help: 'episode networks made ahead of demand, each used by one episode at a time; they count against nothing (0: each deploy makes its network)',
    shownDefault: `--max-concurrent-envs, at most ${NETWORK_STOCK.defaultMax}`,
  },
  noNetworkRecycling: {
    schema: bool,
    help: "remove a stocked network with its episode instead of giving it back to the stock once found empty (docker sandbox; the swarm's are never recycled)",
  },
  maxWaiting: { schema: z.coerce.number().int().min(0).default(1024), value: N, help: 'resets allowed to wait; past it a reset gets CAPACITY_REACHED at once' },
  resetTimeout: { schema: seconds(600), value: S, help: 'seconds a reset waits for a slot (a reset may ask for less)' },
  splitPriority: {
    schema: splitPrioritySchema,
    value: 'SPLIT=PRIORITY',
    repeatable: true,
    help: `the lane (${LANES.join(', ')}) a split's resets wait in for a slot unless a reset names its own priority; other splits: normal. Higher lanes go first, and at least one of every ${LANE_SHARE.oldestEvery} grants goes to the oldest waiting reset of any lane. Repeatable or comma-separated; giving it replaces the default (eval=normal: every split waits in the normal lane)`,
  },
  toolTimeout: { schema: seconds(60), value: S, help: 'seconds one tool call may take' },
  idleTimeout: { schema: seconds(1800), value: S, help: 'seconds without a frame or request before a session is closed' },
  episodeTimeout: { schema: seconds(3600), value: S, help: 'wall-clock seconds an episode may run' },
  maxSteps: {
    schema: z.coerce.number().int().positive().optional(),
    value: N,
    help: 'tool calls per episode; past it the episode ends, scored as is',
    shownDefault: `${MAX_STEPS.calls}, or for a task with a time budget one per ${MAX_STEPS.secondsPerCall} s of it when more`,
  },
  tokenEnv: {
    schema: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/)
      .default('AGENTENV_TOKEN'),
    value: 'NAME',
    help: 'environment variable holding the bearer token (the token itself is never a flag)',
  },
  tokenFile: {
    schema: z.string().min(1).optional(),
    value: 'FILE',
    help: 'file holding the bearer token (e.g. a swarm or compose secret, /run/secrets/<name>); wins over --token-env',
  },
  reward: {
    schema: z.string().min(1).optional(),
    value: 'RULE',
    help: 'how scores become the reward: mean|sum|min|max|<score name>',
    shownDefault: "the bundle's, else mean",
  },
  subnetPool: {
    schema: z
      .string()
      .default(SUBNET_POOL)
      .superRefine((s, ctx) => {
        const r = parseCidr(s);
        if ('problem' in r) ctx.addIssue({ code: z.ZodIssueCode.custom, message: r.problem });
      }),
    value: 'CIDR',
    help: `IPv4 range the episode networks take their /${EPISODE_SUBNET_PREFIX} subnets from`,
  },
  instance: {
    schema: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/, 'expected letters, digits, _ . - (at most 63)')
      .default('default'),
    value: 'NAME',
    help: 'name labelled on every container and network; a restart with the same name removes what a killed run left',
  },
  toolbox: {
    schema: z.string().min(1).optional(),
    value: 'PATH',
    help: "a statically linked busybox the server runs inside envs for its own steps (stopping the agent, verifiers, the file tools), never the image's binaries (Debian: apt-get install busybox-static)",
    shownDefault: 'the first static one of toolbox/busybox beside dist/, /usr/lib/openenv/busybox, /bin/busybox, /usr/bin/busybox',
  },
  noReaper: {
    schema: bool,
    help: 'start no watcher beside the server: what a server killed hard leaves then waits for the next start with its --instance (docker sandbox)',
  },
  shutdownTimeout: { schema: seconds(30), value: S, help: 'seconds SIGTERM waits for episodes (and the network stock) to be torn down' },
  headersTimeout: {
    schema: seconds(30),
    value: S,
    help: "seconds a connection may take to send a request's headers (from connecting, or from the request's first byte); past it the connection is closed",
  },
  requestTimeout: {
    schema: seconds(300),
    value: S,
    help: 'seconds a client may take to send a whole request, headers and body (an answer may take longer: a reset waiting for a slot is not cut)',
  },
  maxConnections: {
    schema: z.coerce.number().int().min(0).default(0),
    value: N,
    help: "open client connections at most; at the bound a new one closes the oldest connection that is idle or still sending its headers, else it is refused (0: the process's open-file limit less a reserve for the engine socket and the envs)",
  },
  buildArg: {
    schema: buildArgsSchema,
    value: 'KEY=VALUE',
    repeatable: true,
    help: 'build argument for the env images (repeatable), e.g. NODE_IMAGE=openenv-local/node:20 on a machine that reaches no registry',
  },
  imageBuildConcurrency: {
    schema: positiveInt(DEFAULT_IMAGE_BUILD_CONCURRENCY),
    value: N,
    help: "env images built (or checked) at once, in the background from start, each cached by the hash of its context; a reset whose image is not ready waits for it (it is built next); a failed build fails only its env's resets",
  },
  images: {
    schema: z.enum(['build', 'prebuilt']).default('build'),
    value: 'build|prebuilt',
    help: "build: the server builds the env images it lacks, in the background; prebuilt: it builds nothing, looks each image up under the tag `openenv-bundle build` gives it, serves the tasks whose images exist and fails the others' resets at once, naming the command that builds them",
  },
  pingInterval: { schema: z.coerce.number().min(0).finite().default(20), value: S, help: 'seconds between WebSocket pings (0 turns them off)' },
  trustProxy: { schema: z.string().optional(), value: 'ADDRS', help: 'addresses of reverse proxies whose X-Forwarded-For is trusted for logs' },
  insecureNoToken: { schema: bool, help: 'allow a non-loopback --host without a token' },
  tokenInPath: {
    schema: bool,
    help: 'also accept the token as a path prefix, http://host:port/t/<token>/... (for clients that send no headers; off by default because proxies log paths)',
  },
  allowedHosts: {
    schema: commaList(z.string().regex(HOST_NAME, 'expected a host name such as envs.example.com, .example.com (it and every name under it) or *'), (h) =>
      h.toLowerCase().replace(/\.$/, ''),
    ),
    value: 'NAMES',
    help: "host names (comma-separated; .example.com: it and every name under it; *: any) requests may name in Host besides loopback names and IP addresses, e.g. the TLS proxy's public name; any other Host gets 403 (DNS rebinding)",
  },
  allowedOrigins: {
    schema: commaList(
      z.string().refine((o) => o === '*' || normalOrigin(o) !== null, 'expected an origin such as https://console.example.com (scheme://host[:port]) or *'),
      (o) => (o === '*' ? o : normalOrigin(o)!),
    ),
    value: 'ORIGINS',
    help: 'origins (comma-separated scheme://host[:port], or *) whose browser pages may call the server besides its own page and loopback pages; any other Origin header gets 403, on every route and upgrade (cross-site requests)',
  },
  sandbox: {
    schema: z.enum(['docker', 'swarm']).default('docker'),
    value: 'docker|swarm',
    help: 'where envs run: docker (one engine, a bridge per episode) or swarm (a service and an overlay per episode, on any node of a swarm; the server must run in a container on a manager)',
  },
  registry: {
    schema: z
      .string()
      .regex(/^[A-Za-z0-9.-]+(:\d{1,5})?(\/[a-z0-9._/-]+)?$/, 'expected HOST:PORT of a registry (optionally /PATH)')
      .optional(),
    value: 'HOST:PORT',
    help: 'registry every swarm node pulls from: env images are pushed there and run by digest',
  },
  swarmNodeEngine: {
    schema: z
      .union([z.string(), z.array(z.string())])
      .transform((v) => (Array.isArray(v) ? v : [v]))
      .pipe(z.array(z.string().refine(isNodeEngineAddress, 'expected a Docker engine address unix:///PATH or tcp://HOST:PORT')))
      .default([]),
    value: 'ADDRESS',
    repeatable: true,
    help: "the Docker engine of another swarm node (repeatable; unix:///PATH, e.g. an SSH-forwarded socket, or tcp://HOST:PORT): envs placed there report what they used, keep their storage_mb and an OOM kill is seen, and no-new-privileges counts as kept when every node's engine sets it (dockerd --no-new-privileges); the manager's own engine is always asked",
  },
  inContainer: {
    schema: z.enum(['auto', 'always', 'never']).default('auto'),
    value: 'auto|always|never',
    help: "join each episode network from the server's own container (auto: when running in one)",
  },
  runtime: {
    schema: z.enum(['runc', 'runsc']).default('runc'),
    value: 'runc|runsc',
    help: "what runs every env's container: runc (the engine's own) or runsc (gVisor: its own kernel between the env and the host; the engine must have it registered, which the server checks at start); an env may also ask for runsc in bundle.json",
  },
  defaultStorageMb: {
    schema: layerDefault(ENV_LAYER_DEFAULTS.storageMb),
    value: 'MB|off',
    help: "what an env may write to its container's writable layer when its bundle gives no storage_mb; past it the env is stopped and its episode ends storage_exceeded (0 or off: no bound, such an env writes until the host's disk is full)",
  },
  defaultMaxFiles: {
    schema: layerDefault(ENV_LAYER_DEFAULTS.maxFiles),
    value: 'N|off',
    help: 'files and directories an env may create, change or delete in its writable layer when its bundle gives no max_files; past it the env is stopped and its episode ends storage_exceeded (0 or off: no bound)',
  },
  history: {
    schema: z.coerce.number().int().min(0).max(100_000).default(500),
    value: N,
    help: 'ended episodes the web console keeps (with their transcripts) in memory',
  },
  record: {
    schema: z.string().min(1).optional(),
    value: 'DIR',
    help: "folder to append every ended episode's transcript to, one JSON line each, in a daily file episodes-YYYY-MM-DD.jsonl",
  },
  modelUrl: {
    schema: z
      .string()
      .url()
      .refine((u) => /^https?:$/.test(new URL(u).protocol), 'expected an http:// or https:// URL')
      .optional(),
    value: 'URL',
    help: "the model API (an OpenAI- or Anthropic-style base, e.g. http://127.0.0.1:30000/v1) every episode's env may call through the model gateway, with a credential of its own (docs/gateway.md)",
  },
  model: { schema: z.string().min(1).optional(), value: 'NAME', help: 'the model every call through the gateway names upstream, whatever the env asked for' },
  modelKeyEnv: {
    schema: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/)
      .optional(),
    value: 'NAME',
    help: "environment variable holding --model-url's API key, sent upstream as Authorization: Bearer (it never reaches an env)",
  },
  modelFromReset: {
    schema: bool,
    help: "a reset may name its episode's model upstream (reset data `model`: base_url, headers, model), e.g. a trainer's per-rollout session; the server connects to whatever URL a client gives",
  },
  gatewayPort: {
    schema: z.coerce.number().int().min(0).max(65535).default(GATEWAY.port),
    value: 'PORT',
    help: "port of each episode's gateway door, on the server's address in that episode's network (0: a free port per door)",
  },
  modelCallTimeout: {
    schema: seconds(GATEWAY.callTimeoutMs / 1000),
    value: S,
    help: 'seconds one model call through the gateway may take, start to end (a stream too); past it the episode fails (model_upstream_timeout)',
  },
  modelCalls: {
    schema: z.coerce.number().int().positive().optional(),
    value: N,
    help: 'model calls an episode may make through the gateway; past it the episode fails (model_calls_exhausted)',
  },
  modelTokens: {
    schema: z.coerce.number().int().positive().optional(),
    value: N,
    help: 'tokens (input and output, as the upstream reports them) an episode may use; past it the episode fails (model_tokens_exhausted)',
  },
  modelTime: {
    schema: z.coerce.number().positive().finite().optional(),
    value: S,
    help: "seconds from an episode's deploy after which its model access ends and the episode fails (model_time_exhausted)",
  },
  e2bImageKey: {
    schema: z
      .string()
      .regex(/^[A-Za-z0-9_./-]{1,128}$/, 'expected a metadata key such as image')
      .optional(),
    value: 'KEY',
    help: "E2B sandboxes (docs/e2b.md): the metadata key whose value names a sandbox's image (slime's SLIME_AGENT_SANDBOX_IMAGE_METADATA_KEY, e.g. image); unset, a sandbox's templateID names an env of the bundle",
  },
  e2bImages: {
    schema: commaList(
      z.string().regex(/^[A-Za-z0-9*?][A-Za-z0-9._/:@*?-]{0,254}$/, 'expected an image pattern such as docker.io/swebench/* (* any characters, ? one)'),
      (s) => s,
    ),
    value: 'PATTERN',
    repeatable: true,
    help: 'E2B sandboxes: the images --e2b-image-key may name (* any characters, ? one; repeatable or comma-separated); one the engine lacks is pulled. Unset: none',
  },
  egressAllow: {
    schema: commaList(z.string().regex(/^[A-Za-z0-9.-]{1,253}:\d{1,5}$/, 'expected HOST:PORT (an IPv4 address or a host name, and a TCP port)'), (s) =>
      s.toLowerCase(),
    ),
    value: 'HOST:PORT',
    repeatable: true,
    help: "E2B sandboxes: destinations a sandbox may open TCP connections to (repeatable or comma-separated; a host name is resolved at start), e.g. the trainer's adapter; a sandbox's own allow_internet_access and network.allowOut/denyOut choose within them; every other destination is closed. Needs rules in the engine host's DOCKER-USER and INPUT chains (the server checks at start). Unset: sandboxes reach nothing outside their network",
  },
  e2bModelDoor: {
    schema: bool,
    help: "E2B sandboxes: each gets a door of the model gateway on its network, as an episode does (--model-url's upstream, the --model-* budgets; its calls in the sandbox's transcript) and the variables the SDKs read (OPENAI_BASE_URL, OPENAI_API_KEY, ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY); on the engine's host, everything else of the host is closed to it by rules in INPUT (checked at start)",
  },
  e2bModelDoorHost: {
    schema: z
      .string()
      .regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/, 'expected a host name such as slime-head')
      .optional(),
    value: 'NAME',
    help: "E2B sandboxes: inside each sandbox NAME resolves to its model door, which then takes the harness's own key and sends it upstream as its bearer: for a harness configured outside the sandbox (slime's SLIME_HEAD_HOST=NAME with --gateway-port its SHIM_PORT and --model-url its adapter; docs/e2b.md). Implies --e2b-model-door",
  },
  logLevel: {
    schema: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    value: 'LEVEL',
    help: 'log level: fatal, error, warn, info, debug, trace or silent',
    env: ['OPENENV_LOG_LEVEL', 'LOG_LEVEL'],
  },
} satisfies OptionTable;

/** The environment variables a server option is read from: OPENENV_<NAME> (LOG_LEVEL besides for the log level). */
export function serverOptionEnv(name: string, o: OptionSpec): readonly string[] {
  return o.env ?? [envVarName(name)];
}

/** how many episode networks (/EPISODE_SUBNET_PREFIX) a subnet pool of this prefix holds */
const episodeNetworks = (poolPrefix: number) => 2 ** (EPISODE_SUBNET_PREFIX - poolPrefix);

type ServerOptionValues = z.output<z.ZodObject<OptionShape<typeof SERVER_OPTIONS>>>;

/** The checks across server options: settings that contradict each other are refused at start. */
export function checkServerOptions(o: ServerOptionValues, ctx: z.RefinementCtx): void {
  if (o.idleTimeout < o.toolTimeout) {
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      path: ['idleTimeout'],
      message: `idle timeout (${o.idleTimeout} s) is shorter than the tool timeout (${o.toolTimeout} s): a slow tool call would close its own session`,
    });
  }
  if (o.sandbox === 'swarm' && o.inContainer === 'never') {
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      path: ['inContainer'],
      message:
        '--sandbox swarm reaches envs on their overlay networks, which exist only inside containers: the server must run in a container on a manager node (--in-container auto or always)',
    });
  }
  if (o.sandbox !== 'swarm' && o.swarmNodeEngine.length > 0) {
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      path: ['swarmNodeEngine'],
      message: '--swarm-node-engine names the engines of swarm nodes: it needs --sandbox swarm',
    });
  }
  if (o.episodeTimeout < o.toolTimeout) {
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      path: ['episodeTimeout'],
      message: `episode timeout (${o.episodeTimeout} s) is shorter than the tool timeout (${o.toolTimeout} s)`,
    });
  }
  if (o.headersTimeout > o.requestTimeout) {
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      path: ['headersTimeout'],
      message: `the headers timeout (${o.headersTimeout} s) is longer than the request timeout (${o.requestTimeout} s), which includes the headers`,
    });
  }
  if (o.warmPool > o.maxConcurrentEnvs) {
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      path: ['warmPool'],
      message: `the warm pool (${o.warmPool}) is larger than --max-concurrent-envs (${o.maxConcurrentEnvs}): pooled envs hold env slots, so at most ${o.maxConcurrentEnvs} can be pooled`,
    });
  }
  if (o.e2bImages.length > 0 && o.e2bImageKey === undefined) {
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      path: ['e2bImages'],
      message: "--e2b-images allows images named by a sandbox's metadata: it takes effect only with --e2b-image-key KEY",
    });
  }
  if (o.egressAllow.length > 0 && o.sandbox === 'swarm') {
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      path: ['egressAllow'],
      message: "--egress-allow sets rules on the Docker engine's host: --sandbox swarm does not serve it",
    });
  }
  for (const e of o.egressAllow) {
    const port = Number(e.slice(e.lastIndexOf(':') + 1));
    if (port < 1 || port > 65535) ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['egressAllow'], message: `${e}: the port must be 1 to 65535` });
  }
  checkGatewayOptions(o, ctx);
  checkE2bModelDoor(o, ctx);
  const pool = parseCidr(o.subnetPool);
  if ('problem' in pool) return;
  const networks = episodeNetworks(pool.prefix);
  if (pool.prefix > EPISODE_SUBNET_PREFIX) {
    ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['subnetPool'], message: `the subnet pool must be /${EPISODE_SUBNET_PREFIX} or wider` });
  } else if (networks < o.maxConcurrentEnvs) {
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      path: ['subnetPool'],
      message: `the subnet pool ${o.subnetPool} holds ${networks} episode networks, fewer than --max-concurrent-envs ${o.maxConcurrentEnvs}`,
    });
  }
}

/** The model gateway's options against the rest: what it cannot serve yet is refused at start. */
function checkGatewayOptions(o: ServerOptionValues, ctx: z.RefinementCtx): void {
  const on = o.modelUrl !== undefined || o.modelFromReset;
  const issue = (path: string, message: string) => ctx.addIssue({ code: z.ZodIssueCode.custom, path: [path], message });
  if (!on) {
    for (const k of ['model', 'modelKeyEnv', 'modelCalls', 'modelTokens', 'modelTime'] as const) {
      if (o[k] !== undefined) issue(k, 'takes effect only with the model gateway on: give --model-url or --model-from-reset');
    }
    return;
  }
  if (o.warmPool > 0 && o.modelUrl === undefined)
    issue(
      'warmPool',
      "a warm pool's envs open their model doors at their deploy, with the server's upstream: give --model-url (a reset's own upstream, --model-from-reset, then replaces it at the hand-over)",
    );
}

/** The sandboxes' model door against the gateway's options: a sandbox has no reset to name its upstream. */
function checkE2bModelDoor(o: ServerOptionValues, ctx: z.RefinementCtx): void {
  const path = o.e2bModelDoorHost !== undefined ? 'e2bModelDoorHost' : 'e2bModelDoor';
  const asked = o.e2bModelDoorHost !== undefined ? '--e2b-model-door-host' : '--e2b-model-door';
  if (!o.e2bModelDoor && o.e2bModelDoorHost === undefined) return;
  if (o.modelUrl === undefined)
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      path: [path],
      message: `${asked} forwards a sandbox's model calls to the server's own upstream: give --model-url (a sandbox has no reset to name one)`,
    });
  if (o.e2bModelDoorHost !== undefined && o.modelKeyEnv !== undefined)
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      path: ['modelKeyEnv'],
      message: "--e2b-model-door-host sends the harness's own key upstream as its bearer: --model-key-env's key would replace it; give one of the two",
    });
}

/** Options as the CLI and the environment give them. */
export const OptionsSchema = z.object(optionShape(SERVER_OPTIONS)).strict().superRefine(checkServerOptions);

export type ServerOptions = z.output<typeof OptionsSchema>;

/**
 * The network stock the server keeps: --network-stock, or its default; never more than the subnet
 * pool holds beside --max-concurrent-envs networks in use (the stock must not starve a deploy).
 */
export function networkStockSize(o: Pick<ServerOptions, 'networkStock' | 'maxConcurrentEnvs' | 'subnetPool'> & { sandbox?: ServerOptions['sandbox'] }): number {
  const wanted = o.networkStock ?? Math.min(o.maxConcurrentEnvs, NETWORK_STOCK.defaultMax);
  // swarm's overlays take their subnets from the swarm's own pool, not from --subnet-pool
  if (o.sandbox === 'swarm') return wanted;
  const pool = parseCidr(o.subnetPool);
  if ('problem' in pool) return 0;
  return Math.max(0, Math.min(wanted, episodeNetworks(pool.prefix) - o.maxConcurrentEnvs));
}
export type ServerOptionsInput = z.input<typeof OptionsSchema>;

/** --default-storage-mb and --default-max-files as the sandbox takes them (engine/hardening.ts's LayerDefaults): 0 is none */
export function layerDefaults(o: Pick<ServerOptions, 'defaultStorageMb' | 'defaultMaxFiles'>): { storageMb: number | null; maxFiles: number | null } {
  return { storageMb: o.defaultStorageMb || null, maxFiles: o.defaultMaxFiles || null };
}

export const OPTION_NAMES = Object.keys(SERVER_OPTIONS) as (keyof ServerOptions)[];

/** `https://Host:443/` → `https://host`: an origin as browsers send it, or null when it is not one. */
export function normalOrigin(origin: string): string | null {
  let u: URL;
  try {
    u = new URL(origin);
  } catch {
    return null;
  }
  if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.username || u.password || (u.pathname !== '/' && u.pathname !== '') || u.search || u.hash)
    return null;
  return u.origin;
}

export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  if (isIP(host) === 6) return host === '::1';
  return false;
}

/** `path.field: message` lines a person can act on */
export function formatZodError(err: z.ZodError, nameOf: (key: string) => string = (k) => `--${kebab(k)}`): string {
  return err.issues
    .map((i) => {
      const key = String(i.path[0] ?? '');
      if (i.code === z.ZodIssueCode.unrecognized_keys) return `unknown option(s): ${i.keys.map(nameOf).join(', ')}`;
      return key ? `${nameOf(key)}: ${i.message}` : i.message;
    })
    .join('\n');
}

/** splitPriority list → split → lane; later duplicates win */
export function splitLanes(list: readonly string[]): Map<string, Lane> {
  return new Map(list.map((kv) => [kv.slice(0, kv.lastIndexOf('=')), kv.slice(kv.lastIndexOf('=') + 1) as Lane]));
}

/** buildArg list → record; later duplicates win */
export function buildArgRecord(list: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const kv of list) {
    const i = kv.indexOf('=');
    out[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return out;
}
