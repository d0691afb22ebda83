/**
 * One persistent bash per episode, driven over a single attached exec (docs/harbor.md, "the
 * shell"). The shell reads one command per line from its stdin and runs each as a job of its own:
 *
 * - a subshell in a process group of its own (`set -m`), stdin /dev/null, stderr into stdout; a
 *   call past its timeout has that group killed, whatever it started with it;
 * - when the job ends (however: `exit` included) it writes its working directory and exported
 *   variables to a state file, which the shell applies before the next command: those carry
 *   over between calls, as in a terminal (plain variables, functions and `set` options do not);
 * - the shell then prints the end line (exit code and working directory) on stdout, after
 *   everything the command wrote.
 *
 * A shell that died (killed, out of memory) is replaced at the next call by a new one, which
 * starts from the state file, and the model is told. Commands travel as one line of `printf %b`
 * escapes, so no quote or newline in a command can confuse the shell's reading of the next one.
 */
import { SHELL_TOOLS } from '../../defaults.js';
import { BoundedOutput, END_TAG, EndMarkerScanner, LineSplitter, PID_TAG, killGroup, newNonce, type BoundedText } from '../../container/index.js';
import type { ContainerExec, ExecProcess } from '../../sandbox/container-exec.js';

const READY_TAG = '__OE_READY';

/** set in a shell's environment to start it without the saved state */
const FRESH_VAR = 'OPENENV_SHELL_FRESH';

/** Where a job leaves the state the next command starts from (one file per user: /tmp is shared). */
const STATE_FILE = '/tmp/.openenv-shell-$EUID';

/** `if the state file is complete (ends with its mark, of this nonce or any), apply it` */
const applyState = (mark: string) =>
  `if IFS= read -r -d '' __oe_s < "$__oe_file"; [[ $__oe_s == *${mark}* ]]; then __oe_x=$(compgen -e); unset -v $__oe_x; eval "$__oe_s"; fi`;

/** The shell's program (bash -c). Only builtins on a call's path, but one `compgen` capture. */
export const SHELL_BOOT = [
  'set -m',
  // fd 3 carries the control lines (stderr of the exec). Until the shell is ready bash's own
  // complaints go there too (a start that fails quotes them: a fork that failed at the pids limit);
  // from then on, they and job notices go nowhere
  'exec 3>&2',
  `__oe_file=${STATE_FILE}`,
  // a fresh start (the saved state could not be applied) skips it
  `[[ -n $${FRESH_VAR} ]] || { ${applyState(`$'\\n'__oe_saved=`)}; }`,
  `unset -v ${FRESH_VAR}`,
  `printf '${READY_TAG} %s %s\\n' "$$" "$PWD" >&3`,
  'exec 2>/dev/null',
  'while IFS= read -r __oe_line; do',
  '  __oe_nonce=${__oe_line%% *}',
  '  printf -v __oe_cmd \'%b\' "${__oe_line#* }"',
  '  (',
  '    exec 2>&1 </dev/null 3>&-',
  `    trap '{ export -p; printf "cd -- %q\\n__oe_saved=%s\\n" "$PWD" "$__oe_nonce"; } >"$__oe_file" 2>/dev/null' EXIT`,
  '    eval "$__oe_cmd"',
  '  ) &',
  `  printf '${PID_TAG} %s %s\\n' "$__oe_nonce" "$!" >&3`,
  '  wait "$!"',
  '  __oe_rc=$?',
  `  ${applyState('"__oe_saved=$__oe_nonce"')}`,
  `  printf '\\n${END_TAG} %s %s %s\\n' "$__oe_nonce" "$__oe_rc" "$PWD"`,
  'done',
].join('\n');

/** A command as one line of `printf %b` input: printable ASCII as it is, every other byte as \xHH. */
export function encodeCommand(command: string): string {
  const bytes = Buffer.from(command, 'utf8');
  const parts: string[] = [];
  for (const b of bytes) {
    if (b === 0x5c) parts.push('\\\\');
    else if (b >= 0x20 && b < 0x7f) parts.push(String.fromCharCode(b));
    else parts.push(`\\x${b.toString(16).padStart(2, '0')}`);
  }
  return parts.join('');
}

export interface ShellSettings {
  /** where the first shell starts; default: the image's WORKDIR */
  workdir?: string;
  /**
   * the user the shell and the file tools run as: uid:gid as the episode resolved it
   * (container/users.ts: a name is looked up before the agent can touch /etc/passwd); default: the
   * image's USER
   */
  user?: string;
  /** variables added to the container's environment for the shell */
  env?: Record<string, string>;
  /** a shell of this episode ran before this session (a shell that cannot start now was broken since) */
  ranBefore?: boolean;
}

export interface ShellLimits {
  headBytes: number;
  tailBytes: number;
  killGraceMs: number;
  startTimeoutMs: number;
}

export const DEFAULT_LIMITS: ShellLimits = {
  headBytes: SHELL_TOOLS.outputHeadBytes,
  tailBytes: SHELL_TOOLS.outputTailBytes,
  killGraceMs: SHELL_TOOLS.killGraceMs,
  startTimeoutMs: SHELL_TOOLS.startTimeoutMs,
};

/**
 * Why a shell did not start: it did not say it was ready in time, it could not start a process
 * (the pids limit), it could not start at all (no bash, a user that does not exist), or it cannot
 * start again after a shell ran in the container (what the agent's commands did broke it).
 */
export type ShellStartFailure = 'start_timeout' | 'out_of_processes' | 'no_shell' | 'broken_after_running';

/** The shell could not be started at all (no bash in the image, a user that does not exist, …). */
export class ShellStartError extends Error {
  override readonly name = 'ShellStartError';
  readonly kind: ShellStartFailure;
  /** what happened, without the advice the message ends with (a fresh shell's note quotes it) */
  readonly what: string;
  /**
   * The shell's own line saying it could not start a process (`bash: fork: retry: Resource
   * temporarily unavailable`: the container's processes hold its pids limit, a fork bomb), or null.
   */
  readonly outOfProcesses: string | null;
  /**
   * A shell ran in this container earlier in the episode, and neither a new one nor a fresh one
   * (without the saved state) can start now: something the agent's commands did broke it (bash
   * removed or replaced, its libraries), not the image.
   */
  readonly brokenAfterRunning: boolean;
  constructor(kind: ShellStartFailure, what: string, said = '', advice = '') {
    super(advice ? `${what}; ${advice}` : what);
    this.kind = kind;
    this.what = what;
    // bash's own words (from the container, not ours): the only way it tells a failed fork
    this.outOfProcesses = FORK_FAILED.exec(said)?.[0] ?? null;
    this.brokenAfterRunning = kind === 'broken_after_running';
  }
}

/** what bash writes when fork() fails for want of a process slot (EAGAIN: the pids limit, RLIMIT_NPROC) */
const FORK_FAILED = /^.*\bfork: (?:retry: )?Resource temporarily unavailable$/m;

interface Ready {
  pid: number;
  cwd: string;
}

type CallEnd = { kind: 'ended'; exitCode: number; cwd: string } | { kind: 'died'; started: boolean };

interface ActiveCall {
  nonce: string;
  scanner: EndMarkerScanner;
  out: BoundedOutput;
  pid: number | null;
  finish(end: CallEnd): void;
}

/** One bash process and its connection (ShellSession, in shell-session.ts, replaces it when it dies). */
export class ShellProcess {
  ready: Ready | null = null;
  /** the connection ended: the shell is gone */
  private gone = false;
  private why: Promise<string> | null = null;
  private proc!: ExecProcess;
  private call: ActiveCall | null = null;
  /** output that came between calls (processes left in the background), shown with the next call */
  private pending: BoundedOutput;
  private startup: BoundedOutput;
  private onReady: ((r: Ready) => void) | null = null;
  /** stops the call in flight as its timeout would (set while one runs) */
  private stopCall: ((why: string) => void) | null = null;
  private onStartFailed: ((e: Error) => void) | null = null;
  /** bytes the control channel carried since the last call began (or the shell started) */
  private controlBytes = 0;
  /** the control channel carried more than SHELL_TOOLS.controlMaxBytes: the shell was ended for it */
  private flooded = false;

  private constructor(
    private readonly exec: ContainerExec,
    private readonly settings: ShellSettings,
    private readonly limits: ShellLimits,
  ) {
    this.pending = new BoundedOutput(limits.headBytes, limits.tailBytes);
    this.startup = new BoundedOutput(4096, 4096);
  }

  /** `fresh`: without the state the last command saved (a start that applied it failed) */
  static async start(exec: ContainerExec, settings: ShellSettings, limits: ShellLimits, fresh = false): Promise<ShellProcess> {
    const shell = new ShellProcess(exec, settings, limits);
    await shell.boot(fresh);
    return shell;
  }

  private async boot(fresh: boolean): Promise<void> {
    const control = new LineSplitter((line) => this.controlLine(line));
    const readyP = new Promise<Ready>((resolve, reject) => {
      this.onReady = resolve;
      this.onStartFailed = reject;
    });
    this.proc = await this.exec.start(
      {
        cmd: ['bash', '--noprofile', '--norc', '-c', SHELL_BOOT],
        stdin: true,
        ...(this.settings.env || fresh ? { env: { ...this.settings.env, ...(fresh ? { [FRESH_VAR]: '1' } : {}) } } : {}),
        ...(this.settings.workdir ? { workdir: this.settings.workdir } : {}),
        ...(this.settings.user ? { user: this.settings.user } : {}),
      },
      {
        stdout: (c) => this.stdout(c),
        stderr: (c) => {
          if (this.flooded) return;
          // what fits in the budget is read (the call's pid line comes first), then the shell is ended
          const room = SHELL_TOOLS.controlMaxBytes - this.controlBytes;
          this.controlBytes += c.length;
          const part = c.length > room ? c.subarray(0, Math.max(0, room)) : c;
          if (!this.ready) this.startup.push(part);
          control.push(part);
          if (this.controlBytes > SHELL_TOOLS.controlMaxBytes) this.flood();
        },
        end: (e) => this.ended(e),
      },
    );
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const said = this.saidWhileStarting();
        const last = said.slice(said.lastIndexOf('\n') + 1);
        reject(
          new ShellStartError(
            'start_timeout',
            `the shell did not start within ${this.limits.startTimeoutMs / 1000} s${last ? ` (it said: ${last})` : ''}`,
            said,
          ),
        );
      }, this.limits.startTimeoutMs);
    });
    try {
      this.ready = await Promise.race([readyP, timeout]);
    } catch (e) {
      this.proc.close();
      throw e;
    } finally {
      clearTimeout(timer);
    }
    this.proc.pause();
  }

  /**
   * The model's commands wrote to the shell's control channel (fd 3) far past what the shell
   * itself says there: reading on would spend the server's time on it, so the shell is ended
   * (the call reports its shell died; the next call starts a new one).
   */
  private flood(): void {
    this.flooded = true;
    const groups = [this.call?.pid ?? null, this.ready?.pid ?? null];
    // the connection first: the call in flight ends as its shell's death, whatever it still prints
    this.proc.close();
    // then the command that flooded it, with what it started (a job of its own group), and the shell
    for (const pid of groups) if (pid !== null) void killGroup(this.exec, pid, this.settings.user ?? null).catch(() => {});
  }

  /** what the shell wrote before it was ready (bash's complaints: quoted when its start fails) */
  private saidWhileStarting(): string {
    return this.startup.render().text.trim();
  }

  private controlLine(line: string): void {
    const [tag, a, b, c, ...rest] = line.split(' ');
    if (tag === READY_TAG && !this.ready) {
      this.onReady?.({ pid: Number(a), cwd: [b, c, ...rest].filter((x) => x !== undefined).join(' ') });
    } else if (tag === PID_TAG && this.call && a === this.call.nonce) {
      this.call.pid = Number(b);
    }
  }

  private stdout(chunk: Buffer): void {
    if (!this.ready) {
      this.startup.push(chunk);
      return;
    }
    const call = this.call;
    if (!call) {
      this.pending.push(chunk);
      return;
    }
    if (!call.scanner.push(chunk)) return;
    const end = call.scanner.end!;
    this.call = null;
    this.proc.pause();
    if (call.scanner.leftover.length > 0) this.pending.push(call.scanner.leftover);
    call.finish({ kind: 'ended', exitCode: end.exitCode, cwd: end.rest });
  }

  private ended(error?: Error): void {
    if (this.gone) return;
    this.gone = true;
    this.why = (async () => {
      if (this.flooded) return `it was ended: something wrote more than ${SHELL_TOOLS.controlMaxBytes} bytes to its control channel (fd 3)`;
      if (error) return `its connection failed: ${error.message}`;
      const code = await this.proc.exitCode().catch(() => null);
      return code === null ? 'it exited' : `it exited with code ${code}${code === 137 ? ', killed' : ''}`;
    })();
    if (!this.ready) {
      void this.why.then((why) => {
        const said = this.saidWhileStarting();
        this.onStartFailed?.(
          FORK_FAILED.test(said)
            ? new ShellStartError('out_of_processes', `the shell could not start a process (bash --noprofile --norc: ${why}): ${said}`, said)
            : new ShellStartError(
                'no_shell',
                `the shell could not start (bash --noprofile --norc: ${why})${said ? `: ${said}` : ''}`,
                said,
                "the shell tools need bash in the env's image",
              ),
        );
      });
      return;
    }
    const call = this.call;
    this.call = null;
    if (call) {
      call.scanner.flush();
      call.finish({ kind: 'died', started: call.pid !== null });
    }
  }

  get alive(): boolean {
    return !this.gone;
  }

  /** why the shell ended (once it has) */
  whyEnded(): Promise<string> {
    return this.why ?? Promise.resolve('it is still running');
  }

  /** Runs one command; the caller runs one at a time. */
  async run(command: string, timeoutMs: number): Promise<{ end: CallEnd; output: BoundedText; timedOut: boolean; interrupted: string | null }> {
    if (this.gone) return { end: { kind: 'died', started: false }, output: new BoundedOutput(0, 0).render(), timedOut: false, interrupted: null };
    const nonce = newNonce();
    this.controlBytes = 0;
    const out = this.pending;
    this.pending = new BoundedOutput(this.limits.headBytes, this.limits.tailBytes);
    let finish!: (end: CallEnd) => void;
    const ended = new Promise<CallEnd>((resolve) => (finish = resolve));
    const call: ActiveCall = { nonce, out, scanner: new EndMarkerScanner(nonce, out), pid: null, finish };
    this.call = call;
    let timedOut = false;
    let interrupted: string | null = null;
    let grace: NodeJS.Timeout | undefined;
    const stop = () => {
      if (grace !== undefined) return;
      if (call.pid !== null) void killGroup(this.exec, call.pid, this.settings.user ?? null).catch(() => {});
      // a group that does not end when killed (or a shell that never said which group): replace the shell
      grace = setTimeout(() => void this.kill(), call.pid !== null ? this.limits.killGraceMs : 0);
    };
    const timer = setTimeout(() => {
      if (grace === undefined) timedOut = true;
      stop();
    }, timeoutMs);
    this.stopCall = (why) => {
      if (grace === undefined) interrupted = why;
      stop();
    };
    this.proc.resume();
    this.proc.write(`${nonce} ${encodeCommand(command)}\n`);
    try {
      const end = await ended;
      return { end, output: out.render(), timedOut, interrupted };
    } finally {
      this.stopCall = null;
      clearTimeout(timer);
      clearTimeout(grace);
    }
  }

  /** Stops the call in flight, if any, as its timeout would: its process group is killed. */
  interrupt(why: string): void {
    this.stopCall?.(why);
  }

  /** Kills the shell (its own process group) and drops the connection. */
  async kill(): Promise<void> {
    if (this.ready) await killGroup(this.exec, this.ready.pid, this.settings.user ?? null).catch(() => {});
    this.proc.close();
  }

  close(): void {
    this.proc.close();
  }
}
