/**
 * The episode's shell as the bash tool uses it: one ShellProcess (shell-process.ts) started at the
 * first call and replaced when it dies, a fresh one when the saved state cannot be applied, one
 * call at a time, and what each call's reply says of it (ShellRun).
 */
import type { BoundedText } from '../../container/index.js';
import type { ContainerExec } from '../../sandbox/container-exec.js';
import { DEFAULT_LIMITS, ShellProcess, ShellStartError, type ShellLimits, type ShellSettings } from './shell-process.js';

export interface ShellRun {
  output: BoundedText;
  /** the command's exit code (137 for one killed at its timeout); null when the shell died under it */
  exitCode: number | null;
  /** the call's timeout passed: its process group was killed */
  timedOut: boolean;
  /** the call was stopped before its timeout (ShellSession.interrupt): why; else null */
  interrupted: string | null;
  /** the shell itself exited while the command ran (a new one starts with the next call) */
  shellDied: boolean;
  /** a new shell ran this command because the previous one had exited: why; else null */
  restartedBecause: string | null;
  /** that new shell could not apply the state the last command left, and started afresh in the working directory: why */
  startedAfresh: string | null;
  /** the shell's working directory after the command */
  cwd: string | null;
  durationMs: number;
}

/** The episode's shell: started at the first call, replaced when it dies, one call at a time. */
export class ShellSession {
  private shell: ShellProcess | null = null;
  /** a shell of this session started (so one that cannot start now was broken since, not missing) */
  private ranOnce = false;
  private cwd: string | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly exec: ContainerExec,
    private readonly settings: ShellSettings = {},
    private readonly limits: ShellLimits = DEFAULT_LIMITS,
  ) {
    this.ranOnce = settings.ranBefore === true;
  }

  /** a shell of this session (or of the episode before it) has run */
  get hasRun(): boolean {
    return this.ranOnce;
  }

  /** one at a time, in the order called */
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.queue.then(fn, fn);
    this.queue = next.catch(() => {});
    return next;
  }

  /** A running shell: the current one, or a new one (and why the old one had to go). */
  private async live(): Promise<{ shell: ShellProcess; restartedBecause: string | null; startedAfresh: string | null }> {
    if (this.closed) throw new Error('the shell session is closed');
    if (this.shell?.alive) return { shell: this.shell, restartedBecause: null, startedAfresh: null };
    const why = this.shell ? `the previous shell had ended (${await this.shell.whyEnded()})` : null;
    let afresh: string | null = null;
    // a replacement starts in the workdir, then moves to where the last completed command left off (the state file)
    try {
      this.shell = await ShellProcess.start(this.exec, this.settings, this.limits);
    } catch (e) {
      // the first shell of the episode, or out of process slots: the image's or the fork bomb's, as it says
      if (!(e instanceof ShellStartError) || !this.ranOnce || e.outOfProcesses) throw e;
      try {
        this.shell = await ShellProcess.start(this.exec, this.settings, this.limits, true);
        afresh = e.what;
      } catch (again) {
        if (!(again instanceof ShellStartError)) throw again;
        throw new ShellStartError('broken_after_running', `${again.message} (a shell ran in this env earlier in the episode)`);
      }
    }
    this.ranOnce = true;
    this.cwd = this.shell.ready!.cwd;
    return { shell: this.shell, restartedBecause: why, startedAfresh: afresh };
  }

  run(command: string, timeoutMs: number): Promise<ShellRun> {
    return this.serial(async () => {
      const started = Date.now();
      let { shell, restartedBecause, startedAfresh } = await this.live();
      let result = await shell.run(command, timeoutMs);
      if (result.end.kind === 'died' && !result.end.started) {
        // the shell was gone before the command started: a new one runs it
        ({ shell, restartedBecause, startedAfresh } = await this.live());
        result = await shell.run(command, timeoutMs);
      }
      const { end, output, timedOut, interrupted } = result;
      if (end.kind === 'ended') this.cwd = end.cwd;
      return {
        output,
        exitCode: end.kind === 'ended' ? end.exitCode : null,
        timedOut,
        interrupted,
        shellDied: end.kind === 'died',
        restartedBecause,
        startedAfresh,
        cwd: this.cwd,
        durationMs: Date.now() - started,
      };
    });
  }

  /** The shell's working directory (starting the shell if none runs), for the file tools' relative paths. */
  where(): Promise<{ cwd: string }> {
    return this.serial(async () => {
      const { shell } = await this.live();
      return { cwd: this.cwd ?? shell.ready!.cwd };
    });
  }

  /**
   * Stops the command in flight (not the calls queued after it) as its timeout would, and says
   * `why` in its reply: a time budget that passed while it ran.
   */
  interrupt(why: string): void {
    this.shell?.interrupt(why);
  }

  /** Ends the shell (its stdin closes); what its commands left running stays until the container goes. */
  close(): Promise<void> {
    return this.serial(async () => {
      this.closed = true;
      this.shell?.close();
    });
  }
}
