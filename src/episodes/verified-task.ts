/**
 * A verified task's part of an episode (docs/harbor.md, "verifiers", "multi-step tasks";
 * docs/security.md, "Verification modes"): each turn prepared in the env's container before its
 * prompt (its upload, setup.sh, ready check), and at a turn's end the verifier the task names for
 * it: the turn's own (per_turn), or the task's at the episode's end (its last turn ended, its steps
 * or its time budget ran out). Before a verifier runs, the agent's shell is ended and every process
 * the agent started is killed (src/container/stop.ts). Then, by the verifier's mode:
 * - in-place: the toolchain check (src/verifier/toolchain.ts) looks at what the agent changed; a
 *   change to what test.sh runs ends the episode `toolchain_tampered`, never scored; else the
 *   tests run in the agent's container;
 * - clean: a fresh container of the env's image (no network) gets the agent's outputs, copied
 *   through the engine, and the tests run there; it is removed after the turn's end is answered
 *   (the env's teardown, which frees its slot, waits for that: removed()).
 * Either way the verifier finds the agent's trajectory (its prompt and tool calls, in ATIF) at
 * /logs/agent/trajectory.json, as Harbor gives it (src/verifier/trajectory.ts).
 * A verifier that could not run its tests (src/verifier/bootstrap.ts) is a failure, never scored.
 * A turn's tests and reward files are removed before the next turn starts. Per-turn scores combine
 * by the task's turn_reward; a turn under its min_reward ends the episode there. What the verifier
 * printed goes to the episode's observers (transcript, record), never into an observation. The
 * verified-task play (plays/verified-task.ts) decides what each outcome means for the episode.
 */
import path from 'node:path';
import type { LoadedBundle, Task, VerifierManifest } from '../bundle/index.js';
import { AgentIntervals, containerClock, runTrusted, stopAgentProcesses, type AgentUser, type ClockMark } from '../container/index.js';
import type { VerifierEvent } from '../protocol/console.js';
import type { ContainerExec } from '../sandbox/container-exec.js';
import type { Companion } from '../sandbox/sandbox.js';
import {
  DEFAULT_TURN_REWARD,
  LOGS_DIR,
  TESTS_DIR,
  clearVerifierFiles,
  combineTurnScores,
  meetsMinReward,
  outputTail,
  prepareTurn,
  prepareVerifierDirs,
  rootAdditions,
  runVerifier,
  tamperedPaths,
  type Scores,
  type VerifierOutcome,
} from '../verifier/index.js';
import type { BuiltinTools } from './builtin-tools.js';

/** How long a turn's setup.sh may run before its turn starts (Harbor gives it no timeout of its own). */
const TURN_SETUP_TIMEOUT_MS = 120_000;

/** What a verifier run leaves for the transcript (its event there, without kind and time): never shown to the model. */
export type VerifierRecord = Omit<VerifierEvent, 'kind' | 'at' | 'output'> & { output: string };

/** How a turn's end came: end_turn (or its time budget), or the episode's end otherwise (max steps, the task's time budget). */
export type TurnEnd = 'end_turn' | 'episode_end';

export type TurnEndOutcome =
  /** the next turn is prepared: its prompt may be given */
  | { kind: 'next' }
  /** the episode is over and scored: these are its scores (`stoppedEarly`: a turn under its min_reward) */
  | { kind: 'scored'; scores: Scores; stoppedEarly: string | null }
  /** the task has no verifier: the env scores it (/finish) */
  | { kind: 'unverified' }
  /** the verifier wrote no (or a malformed) reward, ran past its timeout, could not run its tests, or found its toolchain changed */
  | { kind: 'failed'; reason: 'invalid_scores' | 'verifier_timeout' | 'verifier_failed' | 'toolchain_tampered'; message: string; tail: string }
  /** a turn's setup or ready check failed */
  | { kind: 'setup_failed'; message: string; output: string };

/** What a verification needs of the episode's env beyond its container. */
export interface VerificationEnv {
  exec: ContainerExec;
  /** the agent's user (container/users.ts) */
  agentUser: AgentUser;
  /** a fresh container of the env's image beside it, for a clean verifier */
  companion(): Promise<Companion>;
  /** the agent's trajectory so far (ATIF: src/verifier/trajectory.ts), given to each verifier at /logs/agent/trajectory.json */
  trajectory?: () => unknown;
}

/**
 * How long each step of a verified turn's end took, in ms, in the order they ended (the shell's
 * end, the stop, the clock's mark, the tests' install, the wait for the toolchain check, the tests,
 * the settle, the reward's read; `toolchain_check` is the check's own time, run beside the install;
 * `total` the whole): the episode's debug log says it (event `turn_end_steps`).
 */
export type TurnEndSteps = Record<string, number>;

/** marks the end of each step of a turn's end */
class StepClock {
  readonly steps: TurnEndSteps = {};
  private readonly started = performance.now();
  private last = this.started;

  ended(step: string): void {
    const now = performance.now();
    this.steps[step] = Math.round(now - this.last);
    this.last = now;
  }

  /** a step run beside the others: its own time */
  took(step: string, since: number): void {
    this.steps[step] = Math.round(performance.now() - since);
  }

  done(): TurnEndSteps {
    this.steps.total = Math.round(performance.now() - this.started);
    return this.steps;
  }
}

/** the toolchain check found a change: test.sh does not run */
class ToolchainTampered extends Error {
  override readonly name = 'ToolchainTampered';
}

/** what an in-place verifier's toolchain check reads of the container before the agent acts */
interface Scope {
  pathVar: string;
  home: string;
}

export class TaskVerification {
  private readonly perTurn: (Scores | null)[] = [];
  private readonly intervals = new AgentIntervals();
  private workdir = '/';
  private scope: Scope = { pathVar: '', home: '/' };
  /** the clean verifiers' containers being removed */
  private readonly removals: Promise<void>[] = [];

  constructor(
    private readonly bundle: LoadedBundle,
    private readonly task: Task,
    private readonly env: VerificationEnv,
    private readonly tools: BuiltinTools | null,
    /** the bundle's reward rule, for a numeric min_reward */
    private readonly reward: (s: Scores) => number,
    private readonly record: (r: VerifierRecord) => void,
    /** how long the steps of a verifier's run took (for the episode's debug log) */
    private readonly timed: (steps: TurnEndSteps) => void = () => undefined,
  ) {}

  /** the task needs the env's container at its turns' ends or starts: it is verified, or a turn has an upload or ready check */
  static needed(task: Task): boolean {
    return task.verifier !== undefined || (task.per_turn ?? []).some((t) => t.verifier || t.upload !== undefined || t.ready_check);
  }

  private get turns(): number {
    return this.task.turns.length;
  }

  private get exec(): ContainerExec {
    return this.env.exec;
  }

  /**
   * Before the first prompt: the working directory found, what the toolchain check needs read (the
   * verifier's PATH and home, as the image has them), the first turn prepared, the agent's part begun.
   */
  async start(): Promise<{ ok: true } | { ok: false; message: string; output: string }> {
    const spec = this.bundle.envOf(this.task).spec;
    // the image's own view: its WORKDIR, and the PATH and HOME test.sh will get (read by the toolbox, before the agent ran anything)
    const r = await runTrusted(this.exec, 'openenv-scope', 'pwd; printf "%s\\n%s\\n" "$PATH" "$HOME"', [], { imageUser: true, keepEnv: true });
    const [pwd = '', pathVar = '', home = ''] = r.stdout.toString('utf8').split('\n');
    this.workdir = spec.workdir ?? (r.exitCode === 0 && pwd ? pwd : '/');
    this.scope = { pathVar, home: home || '/' };
    return this.prepare(0);
  }

  /** turn `i` (0-based) prepared, then the agent's part (re)begins */
  private async prepare(i: number): Promise<{ ok: true } | { ok: false; message: string; output: string }> {
    const spec = this.task.per_turn?.[i];
    if (spec?.upload !== undefined || spec?.ready_check) {
      const ready = await prepareTurn(this.exec, {
        workdir: this.workdir,
        setupTimeoutMs: TURN_SETUP_TIMEOUT_MS,
        ...(spec.upload !== undefined ? { uploadUser: await this.env.agentUser.get() } : {}),
        ...(spec.upload !== undefined ? { upload: path.join(this.bundle.dir, spec.upload) } : {}),
        ...(spec.ready_check
          ? {
              readyCheck: {
                command: spec.ready_check.command,
                intervalMs: spec.ready_check.interval_s * 1000,
                timeoutMs: spec.ready_check.timeout_s * 1000,
                retries: spec.ready_check.retries,
                startPeriodMs: spec.ready_check.start_period_s * 1000,
                ...(spec.ready_check.start_interval_s !== undefined ? { startIntervalMs: spec.ready_check.start_interval_s * 1000 } : {}),
              },
            }
          : {}),
      });
      if (!ready.ok) return { ok: false, message: `turn ${i + 1} of task ${this.task.task_id}: ${ready.message}`, output: ready.output };
    }
    this.intervals.begin(await containerClock(this.exec));
    return { ok: true };
  }

  /** The end of turn `i` (0-based), as `how` says it came. */
  async turnEnded(i: number, how: TurnEnd): Promise<TurnEndOutcome> {
    const last = i === this.turns - 1;
    const ending = how === 'episode_end' || last;
    const own = this.task.per_turn?.[i]?.verifier;
    if (own) {
      const r = await this.verify(own, i, 'turn');
      if (r.kind === 'failed') return r;
      this.perTurn[i] = r.scores;
      const min = this.task.per_turn?.[i]?.min_reward;
      const gate = !ending && min !== undefined ? meetsMinReward(r.scores, min, this.reward) : { ok: true as const };
      if (ending || !gate.ok) {
        return {
          kind: 'scored',
          scores: combineTurnScores(this.task.turn_reward ?? DEFAULT_TURN_REWARD, this.perTurn, this.turns),
          stoppedEarly: gate.ok ? null : `turn ${i + 1}: ${gate.why}`,
        };
      }
      // the next turn's agent finds neither this turn's tests nor its reward files
      await clearVerifierFiles(this.exec);
    } else if (ending) {
      if (!this.task.verifier) return { kind: 'unverified' };
      const r = await this.verify(this.task.verifier, i, 'task');
      return r.kind === 'failed' ? r : { kind: 'scored', scores: r.scores, stoppedEarly: null };
    } else {
      // the next turn: the server's setup is not the agent's
      this.intervals.pause(await containerClock(this.exec));
    }
    const next = await this.prepare(i + 1);
    return next.ok ? { kind: 'next' } : { kind: 'setup_failed', message: next.message, output: next.output };
  }

  /** the agent's shell ended and its processes killed, then the verifier in the mode the task asks */
  private async verify(
    v: VerifierManifest,
    i: number,
    scope: VerifierRecord['scope'],
  ): Promise<{ kind: 'ok'; scores: Scores } | Extract<TurnEndOutcome, { kind: 'failed' }>> {
    const clock = new StepClock();
    try {
      return await this.verifyTimed(v, i, scope, clock);
    } finally {
      this.timed(clock.done());
    }
  }

  private async verifyTimed(
    v: VerifierManifest,
    i: number,
    scope: VerifierRecord['scope'],
    clock: StepClock,
  ): Promise<{ kind: 'ok'; scores: Scores } | Extract<TurnEndOutcome, { kind: 'failed' }>> {
    await this.tools?.endShell();
    clock.ended('end_shell');
    const stopped = await stopAgentProcesses(this.exec, this.intervals);
    clock.ended('stop');
    if (stopped.left > 0) throw new Error(`${stopped.left} of the agent's processes were still there after the stop, so the verifier did not run`);
    // Nothing of the agent's runs now. In place, three steps of the server's begin at once: the
    // engine's list of changes (the toolchain check: the engine holds the container while it
    // reads it, the longest of the three, and the archive API waits for it), the clock's mark,
    // and the verifier's folders emptied (they touch only the server's paths, which the check
    // leaves out). test.sh waits for the check (the gate).
    const inPlace = v.mode === 'in-place';
    const checkStarted = performance.now();
    const checking = inPlace ? this.tampered(v).finally(() => clock.took('toolchain_check', checkStarted)) : null;
    checking?.catch(() => undefined);
    const prepared = inPlace ? prepareVerifierDirs(this.exec) : undefined;
    prepared?.catch(() => undefined);
    const paused = await containerClock(this.exec);
    clock.ended('clock');
    this.intervals.pause(paused);
    const stepEnded = (step: string) => clock.ended(step);
    const who = scope === 'turn' ? `turn ${i + 1}'s verifier` : "the task's verifier";
    const base = { turn: i + 1, scope, mode: v.mode, agent_processes_killed: stopped.killed } as const;
    if (checking) {
      let tampered: string[] = [];
      const gate = async () => {
        tampered = await checking;
        if (tampered.length > 0) throw new ToolchainTampered();
      };
      try {
        const hooks = { prepared, gate, settle: this.settler(this.exec, paused), stepEnded };
        return this.finish(await runVerifier(this.exec, this.verifierSpec(v), hooks), who, base);
      } catch (e) {
        if (!(e instanceof ToolchainTampered)) throw e;
      }
      this.record({ ...base, status: 'tampered', tampered, scores: null, exit_code: null, duration_s: 0, output: '', output_bytes: 0, dropped_bytes: 0 });
      const shown = tampered.slice(0, 8).join(', ') + (tampered.length > 8 ? `, and ${tampered.length - 8} more` : '');
      return {
        kind: 'failed',
        reason: 'toolchain_tampered',
        message: `${who} did not run: the agent changed what its tests run (${shown}); the reward is refused`,
        tail: '',
      };
    }
    const clean = await this.env.companion();
    clock.ended('clean_container');
    try {
      await this.copyOutputs(v, clean.exec);
      clock.ended('copy_outputs');
      const mark = await containerClock(clean.exec);
      clock.ended('clean_clock');
      return this.finish(await runVerifier(clean.exec, this.verifierSpec(v), { settle: this.settler(clean.exec, mark), stepEnded }), who, base);
    } finally {
      // removed after the reply (the reward is read by now): the env's teardown waits for it (removed())
      this.removals.push(clean.remove().catch(() => undefined));
    }
  }

  /** The clean verifiers' containers gone: their removal runs after the turn's end; the env's teardown waits for it. */
  async removed(): Promise<void> {
    await Promise.all(this.removals);
  }

  /**
   * What runs between test.sh's end and the reward's reading: every process started since `mark`
   * (taken before the tests: the verifier's own, and what the agent's code it ran left behind) is
   * stopped, so that nothing writes the reward file after test.sh.
   */
  private settler(exec: ContainerExec, mark: ClockMark): () => Promise<void> {
    const since = new AgentIntervals();
    since.begin(mark);
    return async () => {
      const r = await stopAgentProcesses(exec, since);
      if (r.left > 0) throw new Error(`${r.left} process(es) the verifier left were still there after the stop, so its reward was not read`);
    };
  }

  private verifierSpec(v: VerifierManifest) {
    return {
      testsDir: path.join(this.bundle.dir, v.tests),
      timeoutMs: v.timeout_s * 1000,
      env: v.env,
      workdir: this.workdir,
      ...(this.env.trajectory ? { trajectory: this.env.trajectory } : {}),
    };
  }

  /** the changed paths of the agent's container that tamper with the toolchain (toolchain.ts) */
  private async tampered(v: VerifierManifest): Promise<string[]> {
    const changes = await this.exec.changes();
    const toolbox = this.exec.toolbox ? path.posix.dirname(this.exec.toolbox) : null;
    const server = [TESTS_DIR, LOGS_DIR, ...(toolbox ? [toolbox] : [])];
    // a root addition's kind is asked of the engine (one call each), but for the server's own paths, which never count
    const rootFiles = new Set<string>();
    for (const p of rootAdditions(changes).filter((p) => !server.includes(p))) {
      const st = await this.exec.stat(p);
      if (st && (st.mode & (2 ** 31)) === 0) rootFiles.add(p);
    }
    return tamperedPaths(
      changes,
      { pathVar: this.scope.pathVar, home: this.scope.home, workdir: this.workdir, protect: v.protect, allow: v.allow_changes, server },
      rootFiles,
    );
  }

  /**
   * The agent's outputs into the clean container, through the engine's archive API (from the
   * stopped agent's container to the fresh one, streamed): each path removed there first, so what
   * the agent deleted stays deleted.
   */
  private async copyOutputs(v: VerifierManifest, into: ContainerExec): Promise<void> {
    for (const p of v.outputs ?? [this.workdir]) {
      const there = await this.exec.stat(p);
      const cleared = await runTrusted(into, 'openenv-clear-output', 'rm -rf -- "$1"; mkdir -p -- "$(dirname -- "$1")"', [p]);
      if (cleared.exitCode !== 0) throw new Error(`could not make room for the agent's ${p} in the clean container: ${cleared.stderr}`);
      if (there === null) continue;
      await into.putArchive(path.posix.dirname(p), await this.exec.getArchive(p), { copyUidGid: true });
    }
  }

  private finish(
    out: VerifierOutcome,
    who: string,
    base: Pick<VerifierRecord, 'turn' | 'scope' | 'mode' | 'agent_processes_killed'>,
  ): { kind: 'ok'; scores: Scores } | Extract<TurnEndOutcome, { kind: 'failed' }> {
    const run = out.run;
    this.record({
      ...base,
      status: out.status,
      tampered: [],
      scores: out.status === 'scored' ? out.scores : null,
      exit_code: run.exitCode,
      duration_s: run.durationMs / 1000,
      output: run.output.text,
      output_bytes: run.output.totalBytes,
      dropped_bytes: run.output.droppedBytes,
    });
    if (out.status === 'scored') return { kind: 'ok', scores: out.scores };
    return {
      kind: 'failed',
      reason: out.status === 'timeout' ? 'verifier_timeout' : out.status === 'failed' ? 'verifier_failed' : 'invalid_scores',
      message: `${who}: ${out.message}`,
      tail: outputTail(run),
    };
  }
}
