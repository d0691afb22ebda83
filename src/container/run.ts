/**
 * Running processes in an env's container, over ContainerExec:
 * - runTrusted: one of the server's own steps, a script of the toolbox's shell (never a binary of
 *   the image: src/sandbox/toolbox.ts), as root or as the agent's user, its stdout kept as bytes
 *   (bounded), its stderr as text;
 * - runToEnd: a command as it is (the agent's side: a harness, a turn's setup), stdout and stderr
 *   together, until the engine closes the connection;
 * - runKillable: a command under a timeout, as a session of its own (the toolbox's `setsid`), its
 *   whole process group killed when the timeout passes (what it started in the background too),
 *   its output bounded. The wrapper is the toolbox's shell; the command itself is the caller's
 *   (`bash /tests/test.sh` runs the image's bash: src/verifier/ decides when that can be trusted).
 */
import { BoundedOutput, type BoundedText } from './bounded-output.js';
import { ContainerGoneError, type ContainerExec, type ExecProcess, type ExecRequest } from '../sandbox/container-exec.js';
import { toolboxCommand } from '../sandbox/toolbox.js';
import { END_TAG, EndMarkerScanner, LineSplitter, PID_TAG, newNonce } from './end-marker.js';

export interface RunResult {
  exitCode: number | null;
  output: BoundedText;
}

export interface Bounds {
  headBytes: number;
  tailBytes: number;
}

const SMALL: Bounds = { headBytes: 16 * 1024, tailBytes: 16 * 1024 };

/** The container has no toolbox: none of the server's steps can run in it. */
export class NoToolboxError extends Error {
  override readonly name = 'NoToolboxError';
}

/** the container's toolbox binary, or a NoToolboxError saying what needs it */
export function toolboxOf(exec: ContainerExec, forWhat: string): string {
  if (exec.toolbox === null) throw new NoToolboxError(`container ${exec.id.slice(0, 12)} has no toolbox, which ${forWhat} needs`);
  return exec.toolbox;
}

export interface TrustedRun {
  exitCode: number | null;
  /** what it wrote on stdout, at most the `maxStdout` first bytes */
  stdout: Buffer;
  /** how many bytes it wrote on stdout in all */
  stdoutBytes: number;
  /** what it wrote on stderr (its first 16 KiB), as text */
  stderr: string;
}

export interface TrustedOptions {
  /** uid[:gid] (numeric, as resolved for the episode) or '0'; default root */
  user?: string;
  /** run as the container's own user instead (resolving it: users.ts) */
  imageUser?: boolean;
  /** keep the container's environment (to read what the image sets: its PATH, HOME); default: none of it */
  keepEnv?: boolean;
  /** written to its stdin, which then closes */
  stdin?: Buffer;
  /** stdout kept, in bytes (default 64 KiB); the rest is counted */
  maxStdout?: number;
  /** called with each stdout chunk as it comes (for a script that talks: the stop); the bytes are kept too */
  onStdout?: (chunk: Buffer, proc: ExecProcess) => void;
}

/**
 * Runs `script` with the toolbox's shell in the container (`$0` is `name`, `$1`… are `args`), with
 * an empty environment and the toolbox alone on PATH, as root unless `user` says otherwise.
 */
export async function runTrusted(
  exec: ContainerExec,
  name: string,
  script: string,
  args: readonly string[] = [],
  opts: TrustedOptions = {},
): Promise<TrustedRun> {
  const toolbox = toolboxOf(exec, name);
  const cmd = opts.keepEnv ? [toolbox, 'sh', '-c', script, name, ...args] : toolboxCommand(toolbox, name, script, args);
  const max = opts.maxStdout ?? 64 * 1024;
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let got = 0;
  let errBytes = 0;
  let finished!: (e?: Error) => void;
  const ended = new Promise<Error | undefined>((resolve) => (finished = resolve));
  let proc: ExecProcess | null = null;
  const pending: Buffer[] = [];
  proc = await exec.start(
    { cmd, ...(opts.imageUser ? {} : { user: opts.user ?? '0' }), ...(opts.stdin || opts.onStdout ? { stdin: true } : {}) },
    {
      stdout: (c) => {
        if (got < max) out.push(c.subarray(0, max - got));
        got += c.length;
        if (opts.onStdout) {
          if (proc) opts.onStdout(c, proc);
          else pending.push(c);
        }
      },
      stderr: (c) => {
        if (errBytes < 16 * 1024) err.push(c.subarray(0, 16 * 1024 - errBytes));
        errBytes += c.length;
      },
      end: (e) => finished(e),
    },
  );
  const started = proc;
  for (const c of pending.splice(0)) opts.onStdout?.(c, started);
  if (opts.stdin) {
    if (opts.stdin.length) proc.write(opts.stdin);
    if (!opts.onStdout) proc.endInput();
  }
  const e = await ended;
  if (e) throw e;
  return { exitCode: await proc.exitCode(), stdout: Buffer.concat(out), stdoutBytes: got, stderr: Buffer.concat(err).toString('utf8').trim() };
}

/** Runs `req` until its output closes; stdout and stderr interleaved as the engine sent them. */
export async function runToEnd(exec: ContainerExec, req: ExecRequest, bounds: Bounds = SMALL): Promise<RunResult> {
  const out = new BoundedOutput(bounds.headBytes, bounds.tailBytes);
  let finished!: (e?: Error) => void;
  const ended = new Promise<Error | undefined>((resolve) => (finished = resolve));
  const proc = await exec.start(req, { stdout: (c) => out.push(c), stderr: (c) => out.push(c), end: (e) => finished(e) });
  const error = await ended;
  if (error) throw error;
  return { exitCode: await proc.exitCode(), output: out.render() };
}

/**
 * The toolbox's shell: $1 the toolbox, $2 the nonce, the rest the command. The command runs as a
 * session of its own (the toolbox's setsid, so its pid is its process group's), stdin /dev/null,
 * stderr into stdout; its pid is said on stderr, then its end line on stdout once it exits. The
 * command keeps the container's environment and PATH (`env -i` is not used here): it is the
 * caller's, and needs them.
 */
const KILLABLE_WRAPPER = [
  'exec 3>&2 2>/dev/null',
  '__oe_tb=$1; __oe_nonce=$2; shift 2',
  '"$__oe_tb" setsid "$@" </dev/null 2>&1 3>&- &',
  '__oe_pid=$!',
  `printf '${PID_TAG} %s %s\\n' "$__oe_nonce" "$__oe_pid" >&3`,
  'wait "$__oe_pid"',
  `printf '\\n${END_TAG} %s %s\\n' "$__oe_nonce" "$?"`,
].join('\n');

/**
 * Kills process group `pgid` (and the process itself, should it have left its group) with the
 * toolbox's kill, as `user` (root for a group the server started itself; the agent's user for a
 * pid the agent's shell reported; null: the container's own user).
 */
export async function killGroup(exec: ContainerExec, pgid: number, user: string | null): Promise<void> {
  await signalGroup(exec, pgid, 'KILL', user);
}

/** Sends `signal` to process group `pgid` (and the process itself, should it have left its group), as killGroup does. */
export async function signalGroup(exec: ContainerExec, pgid: number, signal: 'KILL' | 'TERM', user: string | null): Promise<void> {
  const as = user === null ? { imageUser: true } : { user };
  await runTrusted(exec, 'openenv-kill', 'kill -s "$2" -- "-$1"; kill -s "$2" -- "$1"; true', [String(pgid), signal], as).catch((e: unknown) => {
    if (!(e instanceof ContainerGoneError)) throw e;
  });
}

export interface KillableResult extends RunResult {
  /** the timeout passed and the command's process group was killed */
  timedOut: boolean;
  durationMs: number;
}

/**
 * Runs `req.cmd` under `timeoutMs`; past it, kills its process group and waits `graceMs` more for
 * the output to close before giving up on it.
 */
export async function runKillable(exec: ContainerExec, req: ExecRequest, timeoutMs: number, bounds: Bounds, graceMs = 5000): Promise<KillableResult> {
  const toolbox = toolboxOf(exec, 'a command under a timeout');
  const started = Date.now();
  const nonce = newNonce();
  const out = new BoundedOutput(bounds.headBytes, bounds.tailBytes);
  const scanner = new EndMarkerScanner(nonce, out);
  let pid: number | null = null;
  let finished!: (how: 'marker' | 'closed' | Error) => void;
  const done = new Promise<'marker' | 'closed' | Error>((resolve) => (finished = resolve));
  const control = new LineSplitter((line) => {
    const [tag, n, p] = line.split(' ');
    if (tag === PID_TAG && n === nonce) pid = Number(p);
  });
  const proc = await exec.start(
    { ...req, cmd: [toolbox, 'sh', '-c', KILLABLE_WRAPPER, 'openenv-run', toolbox, nonce, ...req.cmd], stdin: false },
    {
      stdout: (c) => {
        if (scanner.push(c)) finished('marker');
      },
      stderr: (c) => control.push(c),
      end: (e) => finished(e ?? 'closed'),
    },
  );
  let timedOut = false;
  let grace: NodeJS.Timeout | undefined;
  const timer = setTimeout(() => {
    timedOut = true;
    if (pid !== null) void killGroup(exec, pid, '0').catch(() => {});
    grace = setTimeout(() => finished('closed'), graceMs);
  }, timeoutMs);
  let how: 'marker' | 'closed' | Error;
  try {
    how = await done;
  } finally {
    clearTimeout(timer);
    clearTimeout(grace);
  }
  if (how instanceof Error) throw how;
  scanner.flush();
  // the wrapper's own exit code is its command's; a connection closed without the end line means
  // the wrapper itself died (the container stopped, or something killed it)
  const exitCode = how === 'marker' ? (scanner.end?.exitCode ?? null) : timedOut ? null : await proc.exitCode();
  proc.close();
  return { exitCode, output: out.render(), timedOut, durationMs: Date.now() - started };
}
