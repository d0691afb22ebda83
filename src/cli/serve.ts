/**
 * `openenv-bundle serve BUNDLE [options]`, also `node dist/serve.js BUNDLE [options]` (src/serve.ts):
 * the server process. Its options are the one schema of src/config.ts, read from flags and the
 * environment; it loads the bundle, listens, and on SIGTERM/SIGINT drains (no new episodes, waiting
 * resets told why, every episode torn down) and exits 0. The only file that listens.
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import pino, { type Logger } from 'pino';
import { z } from 'zod';
import { buildApp } from '../app.js';
import { loadBundle, type LoadedBundle } from '../bundle/index.js';
import { checkServerOptions, isLoopback, SERVER_OPTIONS, serverOptionEnv, type ServerOptions } from '../config.js';
import { checkRecordDir } from '../console/recorder.js';
import { CLOSE_GRACE_MS } from '../defaults.js';
import { loggerHygiene } from '../logging.js';
import { tokenProblem } from '../plugins/auth.js';
import { startReaper, type Reaper } from '../sandbox/docker/reaper.js';
import { defineCommand, EXIT, type CliIo } from './command.js';
import { UsageError } from './options.js';
import { progressBar } from './progress.js';
import { exitWith } from './process-entry.js';
import { visible } from './terminal-text.js';

/** The longest an exit waits for the instance name to be given back (one engine call or two). */
const SHUTDOWN_RELEASE_MS = 3000;

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
      throw new UsageError(`--token-file ${o.tokenFile}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}: cannot read the token`, { cause: e });
    }
    const token = text.trim();
    if (!token) throw new UsageError(`--token-file ${o.tokenFile} is empty`);
    if (tokenProblem(token)) throw new UsageError(`--token-file ${o.tokenFile}: ${tokenProblem(token)}`);
    return token;
  }
  const token = env[o.tokenEnv] || null;
  const problem = token === null ? null : tokenProblem(token);
  if (problem) throw new UsageError(`${o.tokenEnv}: ${problem}`);
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
 * The server with these options. Resolves with an exit code when it cannot start (a command line
 * to fix is a UsageError; 1: the bundle or the address fails); once it serves, the process ends
 * from the signal handlers.
 */
async function serve(bundlePath: string, o: ServerOptions, io: CliIo): Promise<number> {
  const token = readToken(o, io.env);
  if (!token && !isLoopback(o.host) && !o.insecureNoToken) {
    throw new UsageError(
      `refusing to listen on ${o.host} without a token: set ${o.tokenEnv}, or pass --insecure-no-token to let anyone who reaches this address deploy and drive envs`,
    );
  }
  if (o.record) {
    try {
      await checkRecordDir(o.record);
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
  }
  const log = makeLogger(o.logLevel, token);
  let bundle: LoadedBundle;
  try {
    bundle = await loadBundle(bundlePath);
  } catch (e) {
    io.stderr.write(`error: cannot serve ${visible(bundlePath)}:\n${visible((e as Error).message)}\n`);
    return EXIT.problems;
  }
  const { tokenEnv: _t, tokenFile: _f, host, port, insecureNoToken: _checkedAbove, reward, ...appOptions } = o;
  // a --host given by name is a name the server answers to (plugins/site-guard.ts)
  const allowedHosts = isIP(host) ? appOptions.allowedHosts : [...appOptions.allowedHosts, host.toLowerCase()];
  // the env images at start: a bar on a terminal's stderr (the log's own lines, n/total, stay in
  // the log; at debug when the log is on that terminal too), nothing but the lines elsewhere
  const imageProgress = io.stderr.isTTY ? { ...progressBar(io.stderr), quiet: Boolean(io.stdout.isTTY) } : undefined;
  const app = await buildApp(bundle, { ...appOptions, allowedHosts, reward, token, logger: log, ...(imageProgress ? { imageProgress } : {}) });
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
  /** the watcher that removes what this server leaves should it be killed (sandbox/docker/reaper.ts) */
  let reaper: Reaper | null = null;
  const exit = async (code: number): Promise<never> => {
    // drained: the watcher has nothing to remove (any other way out leaves it to remove what is left)
    if (code === 0) reaper?.stop();
    const released = app.openenv.sandbox.instanceClaim?.release().catch((e) => log.warn({ err: (e as Error).message }, 'could not release the instance name'));
    // a wait the exit awaits holds the process open (released or not, it exits after)
    await Promise.race([released, new Promise((r) => setTimeout(r, SHUTDOWN_RELEASE_MS))]);
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
    // last resort should the engine hang the sandbox's close (it holds the process open: should
    // the close hang on nothing Node waits for, this still ends it)
    const closeBudget = setTimeout(() => {
      log.error('server did not close in time; exiting');
      void exit(1);
    }, 5000 + CLOSE_GRACE_MS);
    await app.close().catch((e) => log.error({ err: (e as Error).message }, 'close failed'));
    clearTimeout(closeBudget);
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
  // a failed start-up is logged once, by its owner (the runtime: "the server cannot serve episodes")
  let startedUp = false;
  try {
    await app.openenv.ready;
    startedUp = true;
    if (o.sandbox === 'docker' && !o.noReaper) {
      reaper = startReaper(o.instance);
      if (reaper) log.info({ event: 'reaper', pid: reaper.pid }, 'a watcher removes what this server leaves should it be killed and never restarted');
      else log.warn('no reaper (running from sources): what a killed server leaves waits for the next start');
    }
    log.info(
      { event: 'ready' },
      `serving ${bundle.manifest.name} (${Object.entries(bundle.splitCounts)
        .map(([s, n]) => `${s}: ${n}`)
        .join(', ')})`,
    );
  } catch (e) {
    // a signal that came during the start-up stopped it: that drain exits (0 when it drained)
    if (!stopping) {
      log.fatal(startedUp ? { err: (e as Error).message } : {}, 'cannot serve episodes; stopping');
      await stop('startup-failure', 1);
    }
  }
  // serving: the signal handlers end the process
  return new Promise<number>(() => undefined);
}

export const serveCommand = defineCommand({
  name: 'serve',
  summary: 'serve a bundle (folder or .tar.gz) as an OpenEnv environment',
  synopsis: 'BUNDLE [options]',
  about: [
    'Serves a bundle of agent tasks as an OpenEnv environment: every episode gets a fresh env',
    'container in its own Docker network. The bearer token comes from the file --token-file names,',
    'else from the environment variable --token-env names (never from a flag). Each option is also',
    'read from the environment variable shown; a flag wins.',
  ],
  envOf: serverOptionEnv,
  positionals: { bundlePath: { name: 'BUNDLE', schema: z.string().min(1), help: 'a bundle folder or a .tar.gz made by pack' } },
  options: SERVER_OPTIONS,
  refine: checkServerOptions,
  run: ({ bundlePath, ...options }, io) => serve(bundlePath, options, io),
});
