/**
 * ProcessSandbox: the Sandbox interface of src/sandbox/sandbox.ts backed by child processes on
 * 127.0.0.1 instead of containers, so protocol, session and admission tests run without Docker.
 * Tests only: it is never shipped.
 *
 * An "image" is an env build context with a Node entry script (default `server.mjs`): deploy runs
 * `node <entry>` in the script's directory with PORT=<a free loopback port> and the EnvSpec's environment
 * (nothing of the test process' own environment but PATH). Same failure modes as DockerSandbox:
 *
 * - readiness: GET <readyPath> until 200, racing the process' exit and the deploy timeout, with
 *   the engine backends' own wait strategy (src/sandbox/engine/readiness.ts) and their verdict
 *   (notReadyVerdict in src/failures.ts): `deploy_timeout` with the log tail, `env_crashed` with
 *   the exit code and log tail;
 * - memory: node runs with --max-old-space-size=<memoryMb> (heap exhaustion aborts it), and a
 *   watchdog kills it (exit 137, like the kernel's OOM killer in a container) when its resident
 *   memory passes memoryMb, as a cgroup limit would: Buffers live outside the V8 heap, so the
 *   heap limit alone would never stop ECHO_ALLOCATE_MB. Either way diagnose() says oomKilled and
 *   a deploy fails with `env_oom`;
 * - abort (the request's signal, a teardown, close()): kills what the deploy started and rejects
 *   with an AbortError;
 * - a failed deploy leaves no process behind; teardown kills the process and waits for its exit,
 *   idempotent and shared between concurrent calls.
 *
 * Where Docker has a network per episode this has a loopback port: networksInUse() counts the
 * episodes holding one (from spawn until teardown, as Docker's subnet pool does). Of the Sandbox's
 * optional capabilities it has only `usage`, from Linux /proc: the env process' CPU time
 * (utime + stime) and peak resident memory (VmHWM); bytes written is null (a process writes to the
 * host's own filesystem: there is no layer of its own to measure). No instance claim, no stock
 * made ahead of demand.
 * `live()`, `held()` and `peak` are what tests assert "nothing left" and "never more than N" with.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { access, readFile } from 'node:fs/promises';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { freePort } from '../../scripts/lib/free-port.js';
import { constants as osConstants } from 'node:os';
import path from 'node:path';
import { abortError, throwIfAborted } from '../../src/util/abort.js';
import { lastLines } from '../../src/sandbox/engine/logs.js';
import { notReadyVerdict } from '../../src/failures.js';
import { waitForHttp } from '../../src/sandbox/engine/readiness.js';
import {
  SandboxError,
  type DeployRequest,
  type EnvDiagnosis,
  type EnvHandle,
  type EnvImages,
  type EnvUsage,
  type EnvUsageReading,
  type EnvSpec,
  type ImageBuildRequest,
  type Sandbox,
  type SweepResult,
  type TeardownOptions,
} from '../../src/sandbox/sandbox.js';
import { EnvLifecycles } from '../../src/sandbox/env-lifecycles.js';

/** as many lines as DockerSandbox's log tail (LOG_TAIL_LINES) */
const LOG_TAIL_LINES = 20;
/** lines of output kept per env process */
const LOG_KEEP_LINES = 200;
/** characters kept of one line (the engine splits log entries at 16 KiB) */
const LINE_KEEP_CHARS = 16 * 1024;
/** deploy attempts when another process took the free port between our probe and the env's listen */
const PORT_ATTEMPTS = 3;

export interface ProcessSandboxOptions {
  /**
   * the script an env's build context runs with node, relative to the context: one for every env,
   * or one per env name (default `server.mjs`). It runs in its own directory, as in a container's
   * WORKDIR.
   */
  entry?: string | Record<string, string>;
  /** how often the memory watchdog reads each env's resident memory (default 25 ms) */
  memoryPollMs?: number;
}

interface EnvProcess {
  episodeId: string;
  envName: string;
  child: ChildProcess;
  port: number;
  containerId: string;
  networkId: string;
  lines: string[];
  /** an unfinished last line, per stream */
  partial: { stdout: string; stderr: string };
  /** set when the process exits: its code, or 128 + the signal number (Docker's convention) */
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** killed by the memory watchdog, or died of V8 heap exhaustion */
  oomKilled: boolean;
  /** resolves with the exit code once the process has exited and its output is read */
  closed: Promise<number>;
  watchdog: NodeJS.Timeout | null;
}

/** every env process of every ProcessSandbox in this test process, killed if the process exits */
const ALL_CHILDREN = new Set<ChildProcess>();
let exitHookInstalled = false;
function trackChild(child: ChildProcess): void {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on('exit', () => {
      for (const c of ALL_CHILDREN) c.kill('SIGKILL');
    });
  }
  ALL_CHILDREN.add(child);
  child.once('exit', () => ALL_CHILDREN.delete(child));
}

/**
 * Whether process `pid` holds the socket listening on TCP `port` (Linux /proc: the listening
 * socket's inode among the process's open files). True where /proc cannot tell (not Linux).
 */
export function listensOn(pid: number | undefined, port: number): boolean {
  if (pid === undefined) return false;
  const hexPort = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      return true;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address, state 0A (LISTEN), inode
      if (f.length > 9 && f[1]!.endsWith(hexPort) && f[3] === '0A') inodes.add(f[9]!);
    }
  }
  if (inodes.size === 0) return false;
  try {
    return readdirSync(`/proc/${pid}/fd`).some((fd) => {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        return m !== null && inodes.has(m[1]!);
      } catch {
        return false;
      }
    });
  } catch {
    return false;
  }
}

/** the kernel's clock ticks a second, as /proc/<pid>/stat counts CPU time (USER_HZ: 100 on Linux) */
const CLOCK_TICKS = 100;

/** a process' CPU seconds and peak resident memory, from /proc (each null when it cannot be read) */
export function processUsage(pid: number | undefined): EnvUsageReading {
  const out: EnvUsageReading = { cpuS: null, peakMemoryBytes: null, bytesWritten: null };
  if (pid === undefined) return out;
  try {
    // the fields after the command name, which is in parentheses and may hold spaces
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime: fields 14 and 15 of stat(5), 12 and 13 after the state
    out.cpuS = (Number(f[11]) + Number(f[12])) / CLOCK_TICKS;
  } catch {
    // not Linux, or the process is gone
  }
  try {
    const m = /^VmHWM:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    if (m) out.peakMemoryBytes = Number(m[1]) * 1024;
  } catch {
    // the same
  }
  return out;
}

/** resident memory of a process in MB, from /proc (null when it cannot be read) */
function residentMb(pid: number): number | null {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : null;
  } catch {
    return null;
  }
}

const HEAP_EXHAUSTED = /JavaScript heap out of memory|Reached heap limit/;

export class ProcessSandbox implements Sandbox {
  private readonly entry: string | Record<string, string>;
  private readonly memoryPollMs: number;
  /** image tag -> the script it runs */
  private readonly scripts = new Map<string, string>();
  /** episode id -> its env process, from spawn until teardown (or a failed deploy) */
  private readonly envs = new Map<string, EnvProcess>();
  private readonly lifecycles = new EnvLifecycles();
  private closed = false;
  private highWater = 0;
  /** processes started, failed deploys' retries included */
  spawned = 0;
  /** deploy() calls running now, and the most that ran at once (--max-concurrent-deploys) */
  deploying = 0;
  deployPeak = 0;
  /** 'spawn' (episodeId) when an env process starts, 'exit' (episodeId, exitCode) when it has exited */
  readonly events = new EventEmitter();
  private nextEnvironment: Record<string, string> | null = null;
  private deployFault: ((episodeId: string) => string | null) | null = null;

  constructor(opts: ProcessSandboxOptions = {}) {
    this.entry = opts.entry ?? 'server.mjs';
    this.memoryPollMs = opts.memoryPollMs ?? 25;
  }

  // --- what tests assert with ------------------------------------------------------------------

  /** episode ids whose env process is running */
  live(): string[] {
    return [...this.envs.values()].filter((p) => p.exitCode === null).map((p) => p.episodeId);
  }

  /** episode ids still holding an env process, running or exited (what a teardown removes) */
  held(): string[] {
    return [...this.envs.keys()];
  }

  /** the most env processes held at once */
  get peak(): number {
    return this.highWater;
  }

  /**
   * Adds `environment` to the next deploy's env only, e.g. { ECHO_READY_AFTER_MS: '60000' } for a
   * deploy that stays in progress until something aborts it.
   */
  overrideNextDeploy(environment: Record<string, string>): void {
    this.nextEnvironment = environment;
  }

  /**
   * Deploys for which `fault` returns a message fail at once with SandboxError('engine_failed',
   * message), starting nothing (null: every deploy runs). E.g. only the warm pool's refills:
   * `(id) => (id.startsWith('pool-') ? 'no' : null)`.
   */
  failDeploysWhere(fault: ((episodeId: string) => string | null) | null): void {
    this.deployFault = fault;
  }

  /** SIGKILLs an env's process behind the server's back (as `docker kill` from outside would); resolves once it has exited */
  async killBehindBack(episodeId: string): Promise<void> {
    const proc = this.envs.get(episodeId);
    if (!proc) throw new Error(`no env process of ${episodeId}`);
    await this.kill(proc);
  }

  /** the container id (process-<pid>-<episode id>) of an env process held now */
  containerIdOf(episodeId: string): string | undefined {
    return this.envs.get(episodeId)?.containerId;
  }

  /** resolves with the episode id of the next env process started */
  nextSpawn(): Promise<string> {
    return new Promise((resolve) => this.events.once('spawn', resolve));
  }

  // --- Sandbox -------------------------------------------------------------------------------

  private assertOpen(): void {
    if (this.closed) throw new SandboxError('engine_failed', 'the process sandbox is closed');
  }

  async ping(): Promise<void> {
    this.assertOpen();
  }

  private entryOf(envName: string): string {
    return typeof this.entry === 'string' ? this.entry : (this.entry[envName] ?? 'server.mjs');
  }

  readonly images: EnvImages = { build: (req) => this.buildImage(req), check: (ref) => this.checkImage(ref) };

  /** no build: checks the context has the entry script; the tag hashes it and the build args */
  private async buildImage(req: ImageBuildRequest): Promise<string> {
    this.assertOpen();
    const entry = this.entryOf(req.envName);
    const script = path.join(req.contextDir, entry);
    let content: Buffer;
    try {
      content = await readFile(script);
    } catch {
      throw new SandboxError('no_image', `the process sandbox cannot run env \`${req.envName}\`: its build context ${req.contextDir} has no ${entry}`);
    }
    const hash = createHash('sha256').update(content);
    for (const [k, v] of Object.entries(req.buildArgs).sort(([a], [b]) => a.localeCompare(b))) hash.update(`\0${k}=${v}`);
    const tag = `openenv-bundle/${req.bundleName}-${req.envName}:${hash.digest('hex').slice(0, 12)}`;
    this.scripts.set(tag, script);
    req.onProgress?.(`process sandbox: ${tag} runs node ${script}`);
    return tag;
  }

  /** only images this sandbox "built" exist: a prebuilt registry image cannot run as a process */
  private async checkImage(ref: string): Promise<void> {
    this.assertOpen();
    const script = this.scripts.get(ref);
    if (!script) throw new SandboxError('no_image', `the process sandbox has no image ${ref}: it runs only envs built from a context with a Node entry script`);
    try {
      await access(script);
    } catch {
      throw new SandboxError('no_image', `image ${ref}: ${script} is gone`);
    }
  }

  networksInUse(): number {
    return this.envs.size;
  }

  /**
   * The model gateway's door of an env process: the loopback address (every env process shares
   * the host's), so the door's source check admits any local process; the credential is the check.
   */
  readonly modelDoors = true;

  async deploy(req: DeployRequest): Promise<EnvHandle> {
    this.assertOpen();
    const fault = this.deployFault?.(req.envId);
    if (fault) throw new SandboxError('engine_failed', fault);
    return this.lifecycles.deploy(
      req,
      (id) => this.envs.has(id),
      async (signal) => {
        this.deploying++;
        this.deployPeak = Math.max(this.deployPeak, this.deploying);
        try {
          const doorEnv = req.modelDoor ? (await req.modelDoor({ address: '127.0.0.1', subnet: '127.0.0.0/8' })).env : {};
          throwIfAborted(signal);
          return await this.runDeploy(req.envId, { ...req.env, environment: { ...req.env.environment, ...doorEnv } }, signal);
        } finally {
          this.deploying--;
        }
      },
    );
  }

  private async runDeploy(episodeId: string, env: EnvSpec, signal: AbortSignal): Promise<EnvHandle> {
    const script = this.scripts.get(env.image);
    if (!script) throw new SandboxError('no_image', `the process sandbox has no image ${env.image} for env \`${env.name}\``);
    if (this.nextEnvironment) {
      env = { ...env, environment: { ...env.environment, ...this.nextEnvironment } };
      this.nextEnvironment = null;
    }
    const deadline = Date.now() + env.deployTimeoutMs;
    for (let attempt = 1; ; attempt++) {
      throwIfAborted(signal);
      const port = await freePort();
      throwIfAborted(signal);
      const proc = this.start(episodeId, env, script, port);
      try {
        let outcome = await waitForHttp({ url: `http://127.0.0.1:${port}${env.readyPath}`, deadline, exited: proc.closed, signal });
        throwIfAborted(signal);
        // Another process may have taken the probed port first (an env of another episode or test
        // file): its answer is not our env's. Wait until our process holds the listener, or exits
        // (EADDRINUSE: the next attempt takes another port).
        while (outcome.kind === 'ready' && !listensOn(proc.child.pid, port)) {
          if (Date.now() > deadline) {
            outcome = { kind: 'timeout', lastAnswer: `an answer from another process on port ${port}` };
            break;
          }
          const code = await Promise.race([proc.closed, new Promise<null>((r) => setTimeout(() => r(null), 20))]);
          if (code !== null) outcome = { kind: 'exited', exitCode: code };
          throwIfAborted(signal);
        }
        if (outcome.kind === 'ready') {
          return { envId: episodeId, baseUrl: `http://127.0.0.1:${port}`, containerId: proc.containerId, networkId: proc.networkId };
        }
        if (outcome.kind === 'exited') await proc.closed;
        const logTail = tailOf(proc);
        if (outcome.kind === 'exited' && !proc.oomKilled && /EADDRINUSE/.test(logTail) && attempt < PORT_ATTEMPTS) {
          this.envs.delete(episodeId);
          continue;
        }
        const seen = outcome.kind === 'exited' ? { kind: 'exited' as const, exitCode: proc.exitCode, oomKilled: proc.oomKilled } : outcome;
        // the same verdict as the engine sandboxes', on the port this env was given
        const verdict = notReadyVerdict(seen, { env: { ...env, port }, runs: 'process' });
        throw new SandboxError(verdict.fact, verdict.message, { exitCode: seen.kind === 'exited' ? seen.exitCode : null, logTail });
      } catch (err) {
        await this.kill(proc);
        if (this.envs.get(episodeId) === proc) this.envs.delete(episodeId);
        if (signal.aborted) throw abortError(signal.reason);
        throw err;
      }
    }
  }

  private start(episodeId: string, env: EnvSpec, script: string, port: number): EnvProcess {
    const child = spawn(process.execPath, [`--max-old-space-size=${env.resources.memoryMb}`, path.basename(script)], {
      cwd: path.dirname(script),
      // an env sees its own environment only, as in a container
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env.environment, PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    trackChild(child);
    this.spawned++;
    let resolveClosed!: (code: number) => void;
    const proc: EnvProcess = {
      episodeId,
      envName: env.name,
      child,
      port,
      containerId: `process-${child.pid ?? 'unstarted'}-${episodeId}`,
      networkId: `loopback-${port}`,
      lines: [],
      partial: { stdout: '', stderr: '' },
      exitCode: null,
      signal: null,
      oomKilled: false,
      closed: new Promise((r) => (resolveClosed = r)),
      watchdog: null,
    };
    // bounded however much the env writes, as the engine's log is: lines (and an unfinished one)
    // are cut to LINE_KEEP_CHARS, LOG_KEEP_LINES of them kept
    const onData = (stream: 'stdout' | 'stderr') => (d: Buffer) => {
      const parts = (proc.partial[stream] + d.toString('utf8')).split('\n');
      proc.partial[stream] = (parts.pop() ?? '').slice(-LINE_KEEP_CHARS);
      proc.lines.push(...parts.slice(-LOG_KEEP_LINES).map((l) => l.slice(-LINE_KEEP_CHARS)));
      if (proc.lines.length > LOG_KEEP_LINES) proc.lines.splice(0, proc.lines.length - LOG_KEEP_LINES);
    };
    child.stdout!.on('data', onData('stdout'));
    child.stderr!.on('data', onData('stderr'));
    child.on('error', (err) => {
      // spawn failures (ENOENT...) end as an exit the deploy reports as a crash
      proc.lines.push(`process sandbox: ${err.message}`);
      if (proc.exitCode === null) {
        proc.exitCode = 127;
        resolveClosed(127);
      }
    });
    child.once('exit', (code, sig) => {
      if (proc.watchdog) clearInterval(proc.watchdog);
      proc.signal = sig;
      if (proc.exitCode === null) proc.exitCode = code ?? 128 + (sig ? (osConstants.signals[sig] ?? 0) : 0);
    });
    child.once('close', () => {
      for (const stream of ['stdout', 'stderr'] as const) {
        if (proc.partial[stream]) proc.lines.push(proc.partial[stream]);
        proc.partial[stream] = '';
      }
      if (proc.signal === 'SIGABRT' && HEAP_EXHAUSTED.test(proc.lines.join('\n'))) proc.oomKilled = true;
      resolveClosed(proc.exitCode ?? -1);
      this.events.emit('exit', episodeId, proc.exitCode);
    });
    const limitMb = env.resources.memoryMb;
    if (child.pid !== undefined && process.platform === 'linux') {
      const pid = child.pid;
      proc.watchdog = setInterval(() => {
        const mb = residentMb(pid);
        if (mb !== null && mb > limitMb && proc.exitCode === null) {
          proc.oomKilled = true;
          proc.lines.push(`process sandbox: resident memory ${mb.toFixed(0)} MB over the ${limitMb} MB limit: killed`);
          child.kill('SIGKILL');
        }
      }, this.memoryPollMs);
      proc.watchdog.unref();
    }
    this.envs.set(episodeId, proc);
    this.highWater = Math.max(this.highWater, this.envs.size);
    this.events.emit('spawn', episodeId);
    return proc;
  }

  /** SIGKILL (as `docker rm -f` does) and wait until it has exited */
  private async kill(proc: EnvProcess): Promise<void> {
    if (proc.exitCode === null) proc.child.kill('SIGKILL');
    await proc.closed;
  }

  /** what an env process used, from /proc (processUsage); an env that exited reports nothing */
  readonly usage: EnvUsage = {
    read: async (handle) => {
      const proc = this.envs.get(handle.envId);
      if (!proc || proc.containerId !== handle.containerId || proc.exitCode !== null) return { cpuS: null, peakMemoryBytes: null, bytesWritten: null };
      this.usageReads++;
      return processUsage(proc.child.pid);
    },
  };
  /** usage readings answered (a test tells a read from none) */
  usageReads = 0;

  async diagnose(handle: EnvHandle): Promise<EnvDiagnosis> {
    this.assertOpen();
    const proc = this.envs.get(handle.envId);
    if (!proc || proc.containerId !== handle.containerId) return { running: false, exitCode: null, oomKilled: false, logTail: '' };
    return { running: proc.exitCode === null, exitCode: proc.exitCode, oomKilled: proc.oomKilled, logTail: tailOf(proc) };
  }

  teardown(episodeId: string, opts: TeardownOptions = {}): Promise<void> {
    return this.lifecycles.teardown(
      episodeId,
      async () => {
        const proc = this.envs.get(episodeId);
        if (proc) {
          await this.kill(proc);
          if (this.envs.get(episodeId) === proc) this.envs.delete(episodeId);
        }
        // a process has no network: its env is gone with it
        opts.onEnvRemoved?.();
      },
      opts.onEnvRemoved,
    );
  }

  /** kills every env process this sandbox holds */
  async sweep(): Promise<SweepResult> {
    this.assertOpen();
    const procs = [...this.envs.values()];
    await Promise.all(procs.map((p) => this.kill(p)));
    for (const p of procs) if (this.envs.get(p.episodeId) === p) this.envs.delete(p.episodeId);
    return { containers: procs.map((p) => p.containerId), networks: procs.map((p) => p.networkId) };
  }

  async listEnvIds(): Promise<string[]> {
    this.assertOpen();
    return this.held();
  }

  /**
   * Stops the deploys in flight (they kill what they started) and waits for teardowns, as
   * DockerSandbox.close() does; then, unlike it, kills whatever is still held, so no test can
   * leave a process behind. Tests check `held()` before closing to catch a leak.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    await this.lifecycles.close('the process sandbox is closing');
    const procs = [...this.envs.values()];
    await Promise.all(procs.map((p) => this.kill(p)));
    this.envs.clear();
    this.closed = true;
  }
}

function tailOf(proc: EnvProcess): string {
  const lines = [...proc.lines, proc.partial.stdout, proc.partial.stderr].filter((l) => l !== '');
  return lastLines(lines.join('\n'), LOG_TAIL_LINES);
}
