/**
 * Every server option in one zod schema: flags, environment variables, buildApp options and
 * `--help` all derive from it, so an option is declared once.
 */
import { isIP } from 'node:net';
import { z } from 'zod';
import { parseCidr } from './cidr.js';
import { DEFAULT_MAX_CONCURRENT_DEPLOYS, EPISODE_SUBNET_PREFIX, NETWORK_STOCK, SUBNET_POOL } from './defaults.js';

const seconds = (def: number) => z.coerce.number().positive().finite().default(def);
const positiveInt = (def: number) => z.coerce.number().int().positive().default(def);

/** `KEY=VALUE`, repeatable */
const buildArgs = z
  .union([z.string(), z.array(z.string())])
  .transform((v) => (Array.isArray(v) ? v : [v]))
  .pipe(z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*=/, 'expected KEY=VALUE (KEY a build argument name)')))
  .default([]);

const bool = z
  .union([z.boolean(), z.enum(['true', 'false', '1', '0', 'yes', 'no', ''])])
  .transform((v) => v === true || v === 'true' || v === '1' || v === 'yes' || v === '')
  .default(false);

/** A host name as --allowed-hosts takes it: a name, `.name` (it and every name under it), or `*`. */
const HOST_NAME = /^(\*|\.?[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?)$/;

/** a comma-separated list (or a list of them, from repeated flags), each item checked, then normalised */
function commaList(item: z.ZodString | z.ZodEffects<z.ZodString>, normal: (s: string) => string) {
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
    .default([]);
}

/** Options as the CLI and the environment give them; `describe` texts feed `--help`. */
export const OptionsSchema = z
  .object({
    host: z.string().min(1).default('127.0.0.1').describe('address to listen on'),
    port: z.coerce.number().int().min(0).max(65535).default(8200).describe('port to listen on (0 picks a free one)'),
    maxConcurrentEnvs: positiveInt(8).describe('envs running at once; further resets wait in a FIFO queue'),
    warmPool: z.coerce
      .number()
      .int()
      .min(0)
      .default(0)
      .describe(
        'envs kept deployed ahead of demand, each fresh and used by one episode only; they hold slots of --max-concurrent-envs (0: every reset deploys its env)',
      ),
    maxConcurrentDeploys: positiveInt(DEFAULT_MAX_CONCURRENT_DEPLOYS).describe(
      'envs starting at once (network, container, readiness), for resets and pool refills alike; refills yield to waiting resets',
    ),
    networkStock: z.coerce
      .number()
      .int()
      .min(0)
      .optional()
      .describe(
        `episode networks made ahead of demand, each used by one episode and removed after it; they count against nothing (default: --max-concurrent-envs, at most ${NETWORK_STOCK.defaultMax}; 0: each deploy makes its network)`,
      ),
    maxWaiting: z.coerce.number().int().min(0).default(1024).describe('resets allowed to wait; past it a reset gets CAPACITY_REACHED at once'),
    resetTimeout: seconds(600).describe('seconds a reset waits for a slot (a reset may ask for less)'),
    toolTimeout: seconds(60).describe('seconds one tool call may take'),
    idleTimeout: seconds(1800).describe('seconds without a frame or request before a session is closed'),
    episodeTimeout: seconds(3600).describe('wall-clock seconds an episode may run'),
    maxSteps: positiveInt(64).describe('tool calls per episode; past it the episode ends, scored as is'),
    tokenEnv: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/)
      .default('AGENTENV_TOKEN')
      .describe('environment variable holding the bearer token'),
    tokenFile: z
      .string()
      .min(1)
      .optional()
      .describe('file holding the bearer token (e.g. a swarm or compose secret, /run/secrets/<name>); wins over --token-env'),
    reward: z.string().min(1).optional().describe("how scores become the reward: mean|sum|min|max|<score name> (default: the bundle's)"),
    subnetPool: z
      .string()
      .default(SUBNET_POOL)
      .superRefine((s, ctx) => {
        const r = parseCidr(s);
        if ('problem' in r) ctx.addIssue({ code: z.ZodIssueCode.custom, message: r.problem });
      })
      .describe(`IPv4 range the episode networks take their /${EPISODE_SUBNET_PREFIX} subnets from`),
    instance: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/, 'expected letters, digits, _ . - (at most 63)')
      .default('default')
      .describe('name labelled on every container and network; a restart with the same name removes what a killed run left'),
    shutdownTimeout: seconds(30).describe('seconds SIGTERM waits for episodes (and the network stock) to be torn down'),
    headersTimeout: seconds(30).describe(
      "seconds a connection may take to send a request's headers (from connecting, or from the request's first byte); past it the connection is closed",
    ),
    requestTimeout: seconds(300).describe(
      'seconds a client may take to send a whole request, headers and body (an answer may take longer: a reset waiting for a slot is not cut)',
    ),
    maxConnections: z.coerce
      .number()
      .int()
      .min(0)
      .default(0)
      .describe(
        "open client connections at most; at the bound a new one closes the oldest connection that is idle or still sending its headers, else it is refused (0: the process's open-file limit less a reserve for the engine socket and the envs)",
      ),
    buildArg: buildArgs.describe('KEY=VALUE build argument for the env images (repeatable), e.g. NODE_IMAGE=my/node:20'),
    pingInterval: z.coerce.number().min(0).finite().default(20).describe('seconds between WebSocket pings (0 turns them off)'),
    trustProxy: z.string().optional().describe('addresses of reverse proxies whose X-Forwarded-For is trusted for logs'),
    insecureNoToken: bool.describe('allow a non-loopback --host without a token'),
    tokenInPath: bool.describe(
      'also accept the token as a path prefix, http://host:port/t/<token>/... (for clients that send no headers; off by default because proxies log paths)',
    ),
    allowedHosts: commaList(z.string().regex(HOST_NAME, 'expected a host name such as envs.example.com, .example.com (it and every name under it) or *'), (h) =>
      h.toLowerCase().replace(/\.$/, ''),
    ).describe(
      "host names (comma-separated; .example.com: it and every name under it; *: any) requests may name in Host besides loopback names and IP addresses, e.g. the TLS proxy's public name; any other Host gets 403 (DNS rebinding)",
    ),
    allowedOrigins: commaList(
      z.string().refine((o) => o === '*' || normalOrigin(o) !== null, 'expected an origin such as https://console.example.com (scheme://host[:port]) or *'),
      (o) => (o === '*' ? o : normalOrigin(o)!),
    ).describe(
      'origins (comma-separated scheme://host[:port], or *) whose browser pages may call the server besides its own page and loopback pages; any other Origin header gets 403, on every route and upgrade (cross-site requests)',
    ),
    sandbox: z
      .enum(['docker', 'swarm'])
      .default('docker')
      .describe(
        'where envs run: docker (one engine, a bridge per episode) or swarm (a service and an overlay per episode, on any node of a swarm; the server must run in a container on a manager)',
      ),
    registry: z
      .string()
      .regex(/^[A-Za-z0-9.-]+(:\d{1,5})?(\/[a-z0-9._/-]+)?$/, 'expected HOST:PORT of a registry (optionally /PATH)')
      .optional()
      .describe('registry every swarm node pulls from (HOST:PORT): env images are pushed there and run by digest'),
    inContainer: z
      .enum(['auto', 'always', 'never'])
      .default('auto')
      .describe("join each episode network from the server's own container (auto: when running in one)"),
    history: z.coerce.number().int().min(0).max(100_000).default(500).describe('ended episodes the web console keeps (with their transcripts) in memory'),
    record: z
      .string()
      .min(1)
      .optional()
      .describe("folder to append every ended episode's transcript to, one JSON line each, in a daily file episodes-YYYY-MM-DD.jsonl"),
    logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info').describe('log level (also LOG_LEVEL)'),
  })
  .strict()
  .superRefine((o, ctx) => {
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
    const pool = parseCidr(o.subnetPool);
    if ('problem' in pool) return;
    const networks = 2 ** (EPISODE_SUBNET_PREFIX - pool.prefix);
    if (pool.prefix > EPISODE_SUBNET_PREFIX) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['subnetPool'], message: `the subnet pool must be /${EPISODE_SUBNET_PREFIX} or wider` });
    } else if (networks < o.maxConcurrentEnvs) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ['subnetPool'],
        message: `the subnet pool ${o.subnetPool} holds ${networks} episode networks, fewer than --max-concurrent-envs ${o.maxConcurrentEnvs}`,
      });
    }
  });

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
  const networks = 2 ** (EPISODE_SUBNET_PREFIX - pool.prefix);
  return Math.max(0, Math.min(wanted, networks - o.maxConcurrentEnvs));
}
export type ServerOptionsInput = z.input<typeof OptionsSchema>;

export const OPTION_NAMES = Object.keys(OptionsSchema.innerType().shape) as (keyof ServerOptions)[];

export function kebab(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

/** OPENENV_MAX_CONCURRENT_ENVS for maxConcurrentEnvs; LOG_LEVEL is honoured too. */
export function envVarName(name: string): string {
  return `OPENENV_${kebab(name).replace(/-/g, '_').toUpperCase()}`;
}

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

/** buildArg list → record; later duplicates win */
export function buildArgRecord(list: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const kv of list) {
    const i = kv.indexOf('=');
    out[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return out;
}
