/**
 * envd's process service, in a sandbox's container: a command started through the API runs as
 * envd runs it (`/bin/bash -l -c CMD` as the user the SDK names, in its cwd, else the template's
 * working directory, else the user's home,
 * with its envs), over one exec of the engine, wrapped by the toolbox's shell (never a binary of
 * the image): the wrapper starts the command in a session of its own (its pid is its process
 * group, so a signal reaches what it started too), says the pid on stderr before the command
 * writes a byte, waits for it, and says its exit code at the end of both stdout and stderr. So
 * the output is whole when the end is read even while something the command left in the
 * background holds the pipes, and stdout and stderr stay apart, as envd keeps them.
 *
 * A process outlives its call: its output is read for as long as it runs, handed to whoever is
 * connected (the Start call, later Connect calls; none: dropped), paused while a reader falls
 * behind. Its `timeout` (the call's Connect-Timeout-Ms, as envd takes it) kills its group.
 */
import { E2B } from '../defaults.js';
import { BoundedOutput, newNonce, signalGroup, toolboxOf, type BoundedText } from '../container/index.js';
import { ContainerGoneError, type ContainerExec, type ExecProcess } from '../sandbox/container-exec.js';
import type { ProcessEvent, ProcessInfo, ProcessSelector } from '../protocol/e2b.js';
import { ConnectError } from './connect-rpc.js';
import { TagScanner } from './tag-scanner.js';

const PID_TAG = '__OE_PID';
const END_TAG = '__OE_END';
const NO_CWD_TAG = '__OE_NOCWD';

/**
 * The toolbox's shell: $1 the toolbox, $2 the nonce, $3 the cwd ('' for the user's home), the
 * rest the program and its arguments. Only the command itself is the image's.
 */
const WRAPPER = [
  'exec 3>&2',
  'tb=$1; nonce=$2; cwd=$3; shift 3',
  `if [ -n "$cwd" ]; then cd -- "$cwd" 2>/dev/null || { printf '${NO_CWD_TAG} %s \\n' "$nonce" >&2; exit 1; }; elif [ "$PWD" = / ]; then cd -- "\${HOME:-/}" 2>/dev/null || cd /; fi`,
  // a background job of a non-interactive shell is in its group: setsid makes it a session of its own without forking
  `"$tb" setsid "$tb" sh -c 'printf "${PID_TAG} %s %s\\n" "$1" "$$" >&2; shift; exec "$@"' e2b-process "$nonce" "$@" <&0 3>&- &`,
  'pid=$!',
  // the command holds stdin now: the client's end of it reaches the command alone
  'exec 0</dev/null',
  'wait "$pid"',
  'rc=$?',
  `printf '${END_TAG} %s %s\\n' "$nonce" "$rc"`,
  `printf '${END_TAG} %s %s\\n' "$nonce" "$rc" >&3`,
  'exit "$rc"',
].join('\n');

export interface StartSpec {
  cmd: string;
  args: string[];
  envs: Record<string, string>;
  /** where it starts; absent: the user's home */
  cwd?: string;
  tag?: string;
  /** its stdin is the API's (SendInput, CloseStdin); else it reads nothing */
  stdin: boolean;
  /** a user name or uid of the sandbox; null: the image's user */
  user: string | null;
  /** killed (its whole group) past it; null: never */
  timeoutMs: number | null;
}

/** How a process ended. */
export interface ProcessEnd {
  exitCode: number;
  /** false: it did not end on its own (killed at its timeout, or its connection was lost) */
  exited: boolean;
  status: string;
  error?: string;
}

/** Whoever reads a process's events: false from `write` means it falls behind (the process waits for `drained`). */
export interface ProcessReader {
  write(event: ProcessEvent): boolean;
  drained(): Promise<void>;
  end(): void;
}

/** What a finished (or lost) process leaves for the console. */
export interface ProcessRecord {
  spec: StartSpec;
  pid: number | null;
  end: ProcessEnd;
  stdout: BoundedText;
  stderr: BoundedText;
  ms: number;
}

export class SandboxProcess {
  readonly readers = new Set<ProcessReader>();
  endInfo: ProcessEnd | null = null;
  readonly ended: Promise<ProcessEnd>;
  private resolveEnd!: (e: ProcessEnd) => void;
  private proc: ExecProcess | null = null;
  private timer: NodeJS.Timeout | null = null;
  private waiting = 0;
  readonly stdoutKept = new BoundedOutput(E2B.transcript.headBytes, E2B.transcript.tailBytes);
  readonly stderrKept = new BoundedOutput(E2B.transcript.headBytes, E2B.transcript.tailBytes);
  private timedOut = false;
  /** what it wrote before its first reader came (the Start call's, a moment after the start); null once one did */
  private backlog: ProcessEvent[] | null = [];

  constructor(
    readonly pid: number,
    readonly spec: StartSpec,
    private readonly exec: ContainerExec,
  ) {
    this.ended = new Promise((r) => (this.resolveEnd = r));
  }

  get running(): boolean {
    return this.endInfo === null;
  }

  /** @internal the table hands it its connection once started */
  attach(proc: ExecProcess): void {
    this.proc = proc;
    if (this.spec.timeoutMs !== null) {
      this.timer = setTimeout(() => {
        this.timedOut = true;
        void this.signal('KILL').catch(() => {});
      }, this.spec.timeoutMs);
      this.timer.unref();
    }
  }

  info(): ProcessInfo {
    const s = this.spec;
    return {
      config: { cmd: s.cmd, args: s.args, envs: s.envs, ...(s.cwd !== undefined ? { cwd: s.cwd } : {}) },
      pid: this.pid,
      ...(s.tag ? { tag: s.tag } : {}),
    };
  }

  /** a reader from now on: the start event first, then what the process writes, then its end; returns the unsubscribe */
  subscribe(reader: ProcessReader): () => void {
    reader.write({ start: { pid: this.pid } });
    // the Start call's reader gets what came before it subscribed (a microtask after the start)
    const backlog = this.backlog;
    this.backlog = null;
    for (const ev of backlog ?? []) reader.write(ev);
    if (this.endInfo) {
      reader.write({ end: this.endInfo });
      reader.end();
      return () => {};
    }
    this.readers.add(reader);
    return () => this.readers.delete(reader);
  }

  /** @internal output of the command, to every reader; the connection waits while one falls behind */
  emit(which: 'stdout' | 'stderr', chunk: Buffer): void {
    if (chunk.length === 0) return;
    (which === 'stdout' ? this.stdoutKept : this.stderrKept).push(chunk);
    const event = { data: which === 'stdout' ? { stdout: chunk.toString('base64') } : { stderr: chunk.toString('base64') } } as ProcessEvent;
    if (this.backlog) {
      this.backlog.push(event);
      return;
    }
    for (const r of this.readers) {
      if (r.write(event)) continue;
      this.waiting++;
      if (this.waiting === 1) this.proc?.pause();
      void r.drained().then(() => {
        this.waiting--;
        if (this.waiting === 0) this.proc?.resume();
      });
    }
  }

  /** @internal the process ended (or its connection did): told to every reader, once */
  finish(end: ProcessEnd): void {
    if (this.endInfo) return;
    if (this.timer) clearTimeout(this.timer);
    const final =
      this.timedOut && end.exited ? { ...end, exited: false, status: 'signal: killed', error: 'the command ran past its timeout and was killed' } : end;
    this.endInfo = final;
    for (const r of this.readers) {
      r.write({ end: final });
      r.end();
    }
    this.readers.clear();
    this.proc?.close();
    this.resolveEnd(final);
  }

  async writeStdin(data: Buffer): Promise<void> {
    if (!this.spec.stdin)
      throw new ConnectError('failed_precondition', `process ${this.pid} was started without stdin (start it with stdin: true to send it input)`);
    if (!this.proc || this.endInfo) throw new ConnectError('not_found', `process ${this.pid} has ended`);
    if (!this.proc.write(data)) await this.proc.drained();
  }

  closeStdin(): void {
    if (!this.spec.stdin) throw new ConnectError('failed_precondition', `process ${this.pid} was started without stdin`);
    this.proc?.endInput();
  }

  /** the signal to the process's group (as root: the server's own step) */
  async signal(sig: 'KILL' | 'TERM'): Promise<void> {
    if (this.endInfo) throw new ConnectError('not_found', `process ${this.pid} has ended`);
    await signalGroup(this.exec, this.pid, sig, '0');
  }
}

/** The processes one sandbox runs through the API, by pid. */
export class ProcessTable {
  private readonly byPid = new Map<number, SandboxProcess>();

  constructor(
    private readonly exec: ContainerExec,
    /** told of every process that ended (the console's transcript) */
    private readonly onEnded: (r: ProcessRecord) => void,
    private readonly now: () => number = Date.now,
  ) {}

  get size(): number {
    return this.byPid.size;
  }

  find(sel: ProcessSelector): SandboxProcess {
    if (sel.pid !== undefined) {
      const p = this.byPid.get(sel.pid);
      if (p) return p;
      throw new ConnectError(
        'not_found',
        `no process with pid ${sel.pid} runs in this sandbox (only processes started through the API are known, while they run)`,
      );
    }
    if (sel.tag !== undefined) {
      for (const p of this.byPid.values()) if (p.spec.tag === sel.tag) return p;
      throw new ConnectError('not_found', `no process tagged ${JSON.stringify(sel.tag)} runs in this sandbox`);
    }
    throw new ConnectError('invalid_argument', 'process names no pid and no tag');
  }

  list(): ProcessInfo[] {
    return [...this.byPid.values()].map((p) => p.info());
  }

  /**
   * Starts the command; resolves once it runs (its pid known), or rejects with a ConnectError
   * saying why it could not start (no such user or folder, the sandbox gone).
   */
  async start(spec: StartSpec): Promise<SandboxProcess> {
    if (this.byPid.size >= E2B.processes) {
      throw new ConnectError('resource_exhausted', `this sandbox already runs ${E2B.processes} processes started through the API; wait for some to end`);
    }
    const toolbox = toolboxOf(this.exec, 'a process of the API');
    const started = this.now();
    const nonce = newNonce();
    const stdoutScan = new TagScanner(END_TAG, nonce);
    const stderrScan = new TagScanner(END_TAG, nonce);
    let head = Buffer.alloc(0);
    let pid: number | null = null;
    /** stdout that came before the pid line (the streams race): the command's, handed on once it is known */
    const early: Buffer[] = [];
    let proc: SandboxProcess | null = null;
    let settle!: (p: SandboxProcess | ConnectError) => void;
    const ready = new Promise<SandboxProcess | ConnectError>((r) => (settle = r));
    let execProc: ExecProcess | null = null;
    const ends = () => stdoutScan.value !== null && stderrScan.value !== null;
    const finish = async (lost?: Error) => {
      if (!proc) {
        settle(startFailure(spec, Buffer.concat(early).subarray(0, 4096).toString('utf8'), head, lost));
        return;
      }
      if (proc.endInfo) return;
      proc.emit('stdout', stdoutScan.flush());
      proc.emit('stderr', stderrScan.flush());
      const rc = stdoutScan.value ?? stderrScan.value;
      let end: ProcessEnd;
      if (rc !== null && /^\d+$/.test(rc)) {
        const code = Number(rc);
        end = { exitCode: code, exited: true, status: `exit status ${code}`, ...(code !== 0 ? { error: `exit status ${code}` } : {}) };
      } else {
        const code = lost ? null : await execProc?.exitCode().catch(() => null);
        end = {
          exitCode: code ?? -1,
          exited: false,
          status: 'connection lost',
          error: `the process's connection ended before it did${lost ? `: ${lost.message}` : ' (the sandbox stopped?)'}`,
        };
      }
      this.byPid.delete(proc.pid);
      proc.finish(end);
      this.onEnded({ spec, pid: proc.pid, end: proc.endInfo!, stdout: proc.stdoutKept.render(), stderr: proc.stderrKept.render(), ms: this.now() - started });
    };
    try {
      execProc = await this.exec.start(
        {
          cmd: [toolbox, 'sh', '-c', WRAPPER, 'e2b-wrapper', toolbox, nonce, spec.cwd ?? '', spec.cmd, ...spec.args],
          ...(Object.keys(spec.envs).length > 0 ? { env: spec.envs } : {}),
          ...(spec.user !== null ? { user: spec.user } : {}),
          stdin: spec.stdin,
        },
        {
          stdout: (c) => {
            if (!proc) {
              early.push(c);
              return;
            }
            proc.emit('stdout', stdoutScan.push(c));
            if (ends()) void finish();
          },
          stderr: (c) => {
            if (pid === null) {
              if (head.length > 8192) return;
              head = Buffer.concat([head, c]);
              const nl = head.indexOf(0x0a);
              if (nl < 0 && head.length < 4096) return;
              const line = head.subarray(0, nl < 0 ? head.length : nl).toString('utf8');
              const m = new RegExp(`^${PID_TAG} ${nonce} (\\d+)$`).exec(line);
              if (!m) return;
              pid = Number(m[1]);
              proc = new SandboxProcess(pid, spec, this.exec);
              this.byPid.set(pid, proc);
              if (execProc) proc.attach(execProc);
              const rest = nl < 0 ? Buffer.alloc(0) : head.subarray(nl + 1);
              head = Buffer.alloc(0);
              settle(proc);
              for (const e of early.splice(0)) proc.emit('stdout', stdoutScan.push(e));
              proc.emit('stderr', stderrScan.push(rest));
              if (ends()) void finish();
              return;
            }
            proc!.emit('stderr', stderrScan.push(c));
            if (ends()) void finish();
          },
          end: (e) => void finish(e),
        },
      );
    } catch (e) {
      if (e instanceof ContainerGoneError) throw new ConnectError('unavailable', `the sandbox's container is not running: ${e.message}`);
      throw e;
    }
    const sp = proc as SandboxProcess | null;
    if (sp) sp.attach(execProc);
    const got = await ready;
    if (got instanceof ConnectError) {
      execProc.close();
      throw got;
    }
    return got;
  }

  /** drops every process's connection (the sandbox is going away): each ends as lost */
  closeAll(): void {
    for (const p of this.byPid.values()) p.finish({ exitCode: -1, exited: false, status: 'sandbox ended', error: 'the sandbox ended while the process ran' });
    this.byPid.clear();
  }
}

/** why a command never started, from what its wrapper (or the engine) said */
function startFailure(spec: StartSpec, stdout: string, stderrHead: Buffer, lost?: Error): ConnectError {
  const said = `${stdout}${stderrHead.toString('utf8')}`.trim();
  if (said.includes(NO_CWD_TAG))
    return new ConnectError('invalid_argument', `cwd ${JSON.stringify(spec.cwd)} is not a folder the user can enter in this sandbox`);
  if (/unable to find user|no matching entries in passwd/i.test(said))
    return new ConnectError('unauthenticated', `user ${JSON.stringify(spec.user)} does not exist in this sandbox (create it first, e.g. useradd, as root)`);
  if (lost) return new ConnectError('unavailable', `the sandbox's container did not run the command: ${lost.message}`);
  return new ConnectError('internal', `the command could not be started${said ? `: ${said.slice(0, 500)}` : ''}`);
}
