/**
 * Every server option in one zod schema: flags, environment variables, buildApp options and
 * `--help` all derive from it, so an option is declared once.
 */
import { isIP } from 'node:net';
import { z } from 'zod';
import { DEFAULT_MAX_CONCURRENT_DEPLOYS } from './defaults.js';

const seconds = (def: number) => z.coerce.number().positive().finite().default(def);
const positiveInt = (def: number) => z.coerce.number().int().positive().default(def);

const CIDR = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/;

export function parseCidr(cidr: string): { base: number; prefix: number } | null {
  const m = CIDR.exec(cidr);
  if (!m) return null;
  const octets = m.slice(1, 5).map(Number);
  const prefix = Number(m[5]);
  if (octets.some((o) => o > 255) || prefix > 30 || prefix < 8) return null;
  const base = ((octets[0]! << 24) | (octets[1]! << 16) | (octets[2]! << 8) | octets[3]!) >>> 0;
  const mask = prefix === 0 ? 0 : (~0 << (32 - prefix)) >>> 0;
  if ((base & mask) >>> 0 !== base) return null;
  return { base, prefix };
}

/** `KEY=VALUE`, repeatable */
const buildArgs = z
  .union([z.string(), z.array(z.string())])
  .transform((v) => (Array.isArray(v) ? v : [v]))
  .pipe(
    z.array(
      z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*=/, 'expected KEY=VALUE (KEY a build argument name)'),
    ),
  )
  .default([]);

const bool = z
  .union([z.boolean(), z.enum(['true', 'false', '1', '0', 'yes', 'no', ''])])
  .transform((v) => v === true || v === 'true' || v === '1' || v === 'yes' || v === '')
  .default(false);

/** Options as the CLI and the environment give them; `describe` texts feed `--help`. */
export const OptionsSchema = z
  .object({
    host: z.string().min(1).default('127.0.0.1').describe('address to listen on'),
    port: z.coerce.number().int().min(0).max(65535).default(8200).describe('port to listen on (0 picks a free one)'),
    maxConcurrentEnvs: positiveInt(8).describe('envs running at once; further resets wait in a FIFO queue'),
    warmPool: z.coerce.number().int().min(0).default(0).describe('envs kept deployed ahead of demand, each fresh and used by one episode only; they hold slots of --max-concurrent-envs (0: every reset deploys its env)'),
    maxConcurrentDeploys: positiveInt(DEFAULT_MAX_CONCURRENT_DEPLOYS).describe('envs starting at once (network, container, readiness), for resets and pool refills alike; refills yield to waiting resets'),
    maxWaiting: z.coerce.number().int().min(0).default(1024).describe('resets allowed to wait; past it a reset gets CAPACITY_REACHED at once'),
    resetTimeout: seconds(600).describe('seconds a reset waits for a slot (a reset may ask for less)'),
    toolTimeout: seconds(60).describe('seconds one tool call may take'),
    idleTimeout: seconds(1800).describe('seconds without a frame or request before a session is closed'),
    episodeTimeout: seconds(3600).describe('wall-clock seconds an episode may run'),
    maxSteps: positiveInt(64).describe('tool calls per episode; past it the episode ends, scored as is'),
    tokenEnv: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/).default('AGENTENV_TOKEN').describe('environment variable holding the bearer token'),
    reward: z.string().min(1).optional().describe('how scores become the reward: mean|sum|min|max|<score name> (default: the bundle\'s)'),
    subnetPool: z
      .string()
      .default('10.213.0.0/16')
      .refine((s) => parseCidr(s) !== null, 'expected an IPv4 CIDR such as 10.213.0.0/16 (prefix 8..30, base aligned)')
      .describe('IPv4 range the episode networks take their /28 subnets from'),
    instance: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/, 'expected letters, digits, _ . - (at most 63)')
      .default('default')
      .describe('name labelled on every container and network; a restart with the same name removes what a killed run left'),
    shutdownTimeout: seconds(30).describe('seconds SIGTERM waits for episodes to be torn down'),
    buildArg: buildArgs.describe('KEY=VALUE build argument for the env images (repeatable), e.g. NODE_IMAGE=my/node:20'),
    pingInterval: z.coerce.number().min(0).finite().default(20).describe('seconds between WebSocket pings (0 turns them off)'),
    trustProxy: z.string().optional().describe('addresses of reverse proxies whose X-Forwarded-For is trusted for logs'),
    insecureNoToken: bool.describe('allow a non-loopback --host without a token'),
    tokenInPath: bool.describe('also accept the token as a path prefix, http://host:port/t/<token>/... (for clients that send no headers; off by default because proxies log paths)'),
    inContainer: z
      .enum(['auto', 'always', 'never'])
      .default('auto')
      .describe('join each episode network from the server\'s own container (auto: when running in one)'),
    history: z.coerce.number().int().min(0).max(100_000).default(500).describe('ended episodes the web console keeps (with their transcripts) in memory'),
    record: z.string().min(1).optional().describe('folder to append every ended episode\'s transcript to, one JSON line each, in a daily file episodes-YYYY-MM-DD.jsonl'),
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
    if (o.episodeTimeout < o.toolTimeout) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ['episodeTimeout'],
        message: `episode timeout (${o.episodeTimeout} s) is shorter than the tool timeout (${o.toolTimeout} s)`,
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
    if (pool && pool.prefix > 28) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['subnetPool'], message: 'the subnet pool must be /28 or wider' });
    } else if (pool && 2 ** (28 - pool.prefix) < o.maxConcurrentEnvs) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ['subnetPool'],
        message: `the subnet pool ${o.subnetPool} holds ${2 ** (28 - pool.prefix)} episode networks, fewer than --max-concurrent-envs ${o.maxConcurrentEnvs}`,
      });
    }
  });

export type ServerOptions = z.output<typeof OptionsSchema>;
export type ServerOptionsInput = z.input<typeof OptionsSchema>;

export const OPTION_NAMES = Object.keys(OptionsSchema.innerType().shape) as (keyof ServerOptions)[];

export function kebab(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

/** OPENENV_MAX_CONCURRENT_ENVS for maxConcurrentEnvs; LOG_LEVEL is honoured too. */
export function envVarName(name: string): string {
  return `OPENENV_${kebab(name).replace(/-/g, '_').toUpperCase()}`;
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
