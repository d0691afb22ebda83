/**
 * Running one command in a container to its end, over ContainerExec:
 * - runToEnd: as it is, stdout and stderr together, until the engine closes the connection;
 * - runKillable: under a timeout, in a process group of its own that is killed whole when the
 *   timeout passes (what it started in the background too), its output bounded. Needs bash in
 *   the image (job control is what gives the command its own process group).
 */
import { BoundedOutput, type BoundedText } from './bounded-output.js';
import { ContainerGoneError, type ContainerExec, type ExecRequest } from '../../sandbox/container-exec.js';
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
 * bash -c WRAPPER openenv-run NONCE CMD...: runs CMD as a job of its own (own process group,
 * stdin /dev/null, stderr into stdout), says its pid on stderr, waits for it, then prints the end
 * line on stdout. Job notices and bash's own complaints go nowhere.
 */
const KILLABLE_WRAPPER = [
  'set -m',
  'exec 3>&2 2>/dev/null',
  '__oe_nonce=$1; shift',
  '( exec 2>&1 3>&- </dev/null; exec "$@" ) &',
  `printf '${PID_TAG} %s %s\\n' "$__oe_nonce" "$!" >&3`,
  'wait "$!"',
  `printf '\\n${END_TAG} %s %s\\n' "$__oe_nonce" "$?"`,
].join('\n');

/** Kills process group `pgid` (and the process itself, should it have left its group). */
export async function killGroup(exec: ContainerExec, pgid: number, user?: string): Promise<void> {
  await runToEnd(exec, {
    cmd: ['bash', '-c', 'kill -KILL -- "-$1" 2>/dev/null; kill -KILL -- "$1" 2>/dev/null; true', 'openenv-kill', String(pgid)],
    ...(user ? { user } : {}),
  }).catch((e: unknown) => {
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
    { ...req, cmd: ['bash', '-c', KILLABLE_WRAPPER, 'openenv-run', nonce, ...req.cmd], stdin: false },
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
    if (pid !== null) void killGroup(exec, pid, req.user).catch(() => {});
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
