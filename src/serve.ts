#!/usr/bin/env node
/**
 * The process: `node dist/serve.js <bundle folder | bundle.tar.gz> [options]`. Parses flags and
 * environment through the one options schema, loads the bundle, listens, and on SIGTERM/SIGINT
 * drains (no new episodes, waiting resets told why, every episode torn down) and exits 0.
 * The only file that listens.
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { parseArgs } from 'node:util';
import pino, { type Logger } from 'pino';
import { buildApp } from './app.js';
import { loadBundle, type LoadedBundle } from './bundle/index.js';
import { envVarName, formatZodError, isLoopback, kebab, OPTION_NAMES, OptionsSchema, type ServerOptions } from './config.js';
import { checkRecordDir } from './episodes/recorder.js';
import { CLOSE_GRACE_MS, SHUTDOWN_RELEASE_MS } from './defaults.js';
import { loggerHygiene } from './logging.js';
import { tokenProblem } from './plugins/auth.js';
import { exitWith, isEntryPoint, runAsProcess } from './cli/process-entry.js';

const BOOLEAN = new Set(['insecureNoToken', 'tokenInPath']);
const MULTIPLE = new Set(['buildArg']);

/** an option's default, through the wrappers zod puts around it (a refine is a ZodEffects) */
function defaultOf(schema: { _def: { defaultValue?: () => unknown; schema?: unknown; innerType?: unknown } }): unknown {
  let s: typeof schema | undefined = schema;
  for (let i = 0; s && i < 8; i++) {
    if (typeof s._def.defaultValue === 'function') return s._def.defaultValue();
    s = (s._def.schema ?? s._def.innerType) as typeof schema | undefined;
  }
  return undefined;
}

export function helpText(command = 'node dist/serve.js'): string {
  const shape = OptionsSchema.innerType().shape as Record<
    string,
    { description?: string; _def: { defaultValue?: () => unknown; schema?: unknown; innerType?: unknown } }
  >;
  const lines = [
    `Usage: ${command} <bundle folder or .tar.gz> [options]`,
    '',
    'Serves a bundle of agent tasks as an OpenEnv environment: every episode gets a fresh env',
    'container in its own Docker network. The bearer token comes from the file --token-file names,',
    'else from the environment variable --token-env names (never from a flag).',
    '',
    'Options (each also read from the environment variable shown; a flag wins):',
  ];
  for (const name of OPTION_NAMES) {
    const s = shape[name]!;
    const def = defaultOf(s);
    const flag = BOOLEAN.has(name) ? `--${kebab(name)}` : `--${kebab(name)} <value>`;
    const shownDefault = Array.isArray(def) ? (def.length ? def.join(' ') : 'none') : def === undefined ? 'none' : String(def);
    lines.push(`  ${flag.padEnd(30)} ${s.description ?? ''}`);
    lines.push(`  ${''.padEnd(30)} default: ${shownDefault}; env: ${name === 'logLevel' ? 'LOG_LEVEL' : envVarName(name)}`);
  }
  lines.push('  --help                         print this help');
  return lines.join('\n');
}

export interface Cli {
  bundlePath: string;
  options: ServerOptions;
}

/** Parses argv and the environment; throws an Error whose message is for the user (exit 2). */
export function parseCli(argv: string[], env: NodeJS.ProcessEnv): Cli | 'help' {
  const parseOptions: Record<string, { type: 'string' | 'boolean'; multiple?: boolean }> = {};
  for (const name of OPTION_NAMES) {
    parseOptions[kebab(name)] = { type: BOOLEAN.has(name) ? 'boolean' : 'string', ...(MULTIPLE.has(name) ? { multiple: true } : {}) };
  }
  parseOptions.help = { type: 'boolean' };
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: parseOptions, allowPositionals: true, strict: true });
  } catch (e) {
    throw new Error(`${(e as Error).message}\nRun with --help for the options.`, { cause: e });
  }
  if (parsed.values.help) return 'help';
  if (parsed.positionals.length !== 1) {
    throw new Error(
      parsed.positionals.length === 0
        ? 'missing the bundle: node dist/serve.js <bundle folder or .tar.gz> [options]'
        : `expected one bundle path, got ${parsed.positionals.length}: ${parsed.positionals.join(' ')}`,
    );
  }
  const raw: Record<string, unknown> = {};
  for (const name of OPTION_NAMES) {
    const fromEnv = name === 'logLevel' ? (env[envVarName(name)] ?? env.LOG_LEVEL) : env[envVarName(name)];
    if (fromEnv !== undefined && fromEnv !== '') raw[name] = MULTIPLE.has(name) ? fromEnv.split(/\s+/).filter(Boolean) : fromEnv;
    const fromFlag = parsed.values[kebab(name)];
    if (fromFlag !== undefined) raw[name] = fromFlag;
  }
  const options = OptionsSchema.safeParse(raw);
  if (!options.success) throw new Error(formatZodError(options.error));
  return { bundlePath: parsed.positionals[0]!, options: options.data };
}

/**
 * The bearer token: from --token-file (a mounted secret; surrounding whitespace trimmed), else from
 * the variable --token-env names. A --token-file that cannot be read, or is empty, is an error.
 */
export function readToken(o: Pick<ServerOptions, 'tokenFile' | 'tokenEnv'>, env: NodeJS.ProcessEnv): string | null {
  if (o.tokenFile) {
    let text: string;
    try {
      text = readFileSync(o.tokenFile, 'utf8');
    } catch (e) {
      throw new Error(`--token-file ${o.tokenFile}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}: cannot read the token`, { cause: e });
    }
    const token = text.trim();
    if (!token) throw new Error(`--token-file ${o.tokenFile} is empty`);
    if (tokenProblem(token)) throw new Error(`--token-file ${o.tokenFile}: ${tokenProblem(token)}`);
    return token;
  }
  const token = env[o.tokenEnv] || null;
  const problem = token === null ? null : tokenProblem(token);
  if (problem) throw new Error(`${o.tokenEnv}: ${problem}`);
  return token;
}

function makeLogger(level: ServerOptions['logLevel'], token: string | null): Logger {
  if (process.stdout.isTTY) {
    // a person at a terminal: readable lines; pipes and containers get JSON
    return pino({ level, ...loggerHygiene(token), transport: { target: 'pino-pretty', options: { translateTime: 'SYS:HH:MM:ss', ignore: 'pid,hostname' } } });
  }
  return pino({ level, ...loggerHygiene(token) });
}

/**
 * Runs the server with these arguments. Resolves with an exit code when it cannot start (2: a
 * command line to fix; 1: the bundle or the address fails) or when --help was asked; once it
 * serves, the process ends from the signal handlers.
 */
export async function serveMain(argv: string[]): Promise<number> {
  let cli: Cli | 'help';
  try {
    cli = parseCli(argv, process.env);
  } catch (e) {
    process.stderr.write(`error: ${(e as Error).message}\n`);
    return 2;
  }
  if (cli === 'help') {
    process.stdout.write(helpText() + '\n');
    return 0;
  }
  const { options: o, bundlePath } = cli;
  let token: string | null;
  try {
    token = readToken(o, process.env);
  } catch (e) {
    process.stderr.write(`error: ${(e as Error).message}\n`);
    return 2;
  }
  if (!token && !isLoopback(o.host) && !o.insecureNoToken) {
    process.stderr.write(
      `error: refusing to listen on ${o.host} without a token: set ${o.tokenEnv}, or pass --insecure-no-token to let anyone who reaches this address deploy and drive envs\n`,
    );
    return 2;
  }
  if (o.record) {
    try {
      await checkRecordDir(o.record);
    } catch (e) {
      process.stderr.write(`error: ${(e as Error).message}\n`);
      return 2;
    }
  }
  const log = makeLogger(o.logLevel, token);
  let bundle: LoadedBundle;
  try {
    bundle = await loadBundle(bundlePath);
  } catch (e) {
    process.stderr.write(`error: cannot serve ${bundlePath}:\n${(e as Error).message}\n`);
    return 1;
  }
  const { tokenEnv: _t, tokenFile: _f, host, port, insecureNoToken: _checkedAbove, reward, ...appOptions } = o;
  // a --host given by name is a name the server answers to (plugins/site-guard.ts)
  const allowedHosts = isIP(host) ? appOptions.allowedHosts : [...appOptions.allowedHosts, host.toLowerCase()];
  const app = await buildApp(bundle, { ...appOptions, allowedHosts, reward, token, logger: log });
  if (!token) {
    log.warn(
      isLoopback(host)
        ? 'no token: the server is open to anyone on this machine'
        : `no token and --insecure-no-token: anyone who reaches ${host}:${port} deploys and drives envs`,
    );
  }

  /**
   * Every way out goes through here: the instance name is given back first (a lock volume left
   * behind would make the next start wait for it to go stale), then the process exits.
   */
  const exit = async (code: number): Promise<never> => {
    const released = app.openenv.sandbox.releaseInstance?.().catch((e) => log.warn({ err: (e as Error).message }, 'could not release the instance name'));
    await Promise.race([released, new Promise((r) => setTimeout(r, SHUTDOWN_RELEASE_MS).unref())]);
    exitWith(code);
  };

  let stopping = false;
  const stop = async (signal: string, exitCode = 0) => {
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting at once');
      return exit(1);
    }
    stopping = true;
    log.info({ signal, episodes: app.openenv.manager.list().length }, 'draining: no new episodes; tearing every episode down');
    const result = await app.openenv.drain(o.shutdownTimeout * 1000);
    // app.close() closes idle, half-sent and abandoned connections itself (app.ts); this is the
    // last resort should the engine hang the sandbox's close
    const closeBudget = setTimeout(() => {
      log.error('server did not close in time; exiting');
      void exit(1);
    }, 5000 + CLOSE_GRACE_MS);
    closeBudget.unref();
    await app.close().catch((e) => log.error({ err: (e as Error).message }, 'close failed'));
    await bundle.cleanup().catch(() => undefined);
    if (result.timedOut) {
      log.error(
        { episodes: result.tornDown },
        `not everything was torn down within --shutdown-timeout (${o.shutdownTimeout} s); the next start with --instance ${o.instance} removes what is left`,
      );
      return exit(1);
    }
    log.info({ episodes: result.tornDown }, 'drained; exiting');
    return exit(exitCode);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
  // the terminal it ran in went away (a closed shell, script(1) ending): drain the same way, so
  // its envs and its instance name are given back
  process.on('SIGHUP', () => void stop('SIGHUP'));
  // a terminal that went away makes writes to it fail (EIO, EPIPE): the logs are lost, but the
  // drain goes on and the instance name is still given back
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => undefined);

  try {
    await app.listen({ host, port });
  } catch (e) {
    log.fatal({ err: (e as Error).message }, `cannot listen on ${host}:${port}`);
    // the start-up may hold the instance name already: stop gives it back
    await stop('listen-failure', 1);
  }
  const addr = app.server.address();
  const shown = typeof addr === 'object' && addr ? `${addr.address}:${addr.port}` : `${host}:${port}`;
  log.info(
    { bundle: bundle.manifest.name, address: shown, instance: o.instance, max_concurrent_envs: o.maxConcurrentEnvs, auth: token ? 'bearer' : 'none' },
    `listening on ${shown}`,
  );
  try {
    await app.openenv.ready;
    log.info(
      { event: 'ready' },
      `serving ${bundle.manifest.name} (${Object.entries(bundle.splitCounts)
        .map(([s, n]) => `${s}: ${n}`)
        .join(', ')})`,
    );
  } catch (e) {
    log.fatal({ err: (e as Error).message }, 'cannot serve episodes; stopping');
    await stop('startup-failure', 1);
  }
  // serving: the signal handlers end the process
  return new Promise<number>(() => undefined);
}

// run only as the entry point (tests import parseCli and helpText)
if (isEntryPoint(import.meta.url)) runAsProcess(() => serveMain(process.argv.slice(2)));
