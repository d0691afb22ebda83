/**
 * A verified task's part of an episode (docs/harbor.md, "verifiers", "multi-step tasks"): each
 * turn prepared in the env's container before its prompt (its upload, setup.sh, ready check),
 * and at a turn's end the verifier the task names for it: the turn's own (per_turn), or the
 * task's at the episode's end (its last turn ended, its steps or its time budget ran out). Before
 * a verifier runs, the agent's shell is ended and every process the agent started is killed
 * (src/verifier/stop-agent.ts). Per-turn scores combine by the task's turn_reward; a turn under its
 * min_reward ends the episode there. What the verifier printed goes to the episode's observers
 * (transcript, record), never into an observation. The episode (episode.ts) decides what each
 * outcome means for its phase and reply.
 */
import path from 'node:path';
import type { LoadedBundle, Task, VerifierManifest } from '../bundle/index.js';
import { TURN_SETUP_TIMEOUT_MS } from '../defaults.js';
import type { VerifierEvent } from '../protocol/console.js';
import type { ContainerExec } from '../sandbox/container-exec.js';
import { runToEnd } from '../tools/shell/run-command.js';
import {
  AgentIntervals,
  DEFAULT_TURN_REWARD,
  combineTurnScores,
  containerClock,
  meetsMinReward,
  outputTail,
  prepareTurn,
  runVerifier,
  stopAgentProcesses,
  type Scores,
} from '../verifier/index.js';
import type { BuiltinTools } from './builtin-tools.js';

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
  /** the verifier wrote no (or a malformed) reward, or ran past its timeout */
  | { kind: 'failed'; reason: 'invalid_scores' | 'verifier_timeout'; message: string; tail: string }
  /** a turn's setup or ready check failed */
  | { kind: 'setup_failed'; message: string; output: string };

export class TaskVerification {
  private readonly perTurn: (Scores | null)[] = [];
  private readonly intervals = new AgentIntervals();
  private workdir = '/';

  constructor(
    private readonly bundle: LoadedBundle,
    private readonly task: Task,
    private readonly exec: ContainerExec,
    private readonly tools: BuiltinTools | null,
    /** the bundle's reward rule, for a numeric min_reward */
    private readonly reward: (s: Scores) => number,
    private readonly record: (r: VerifierRecord) => void,
  ) {}

  /** the task needs the env's container at its turns' ends or starts: it is verified, or a turn has an upload or ready check */
  static needed(task: Task): boolean {
    return task.verifier !== undefined || (task.per_turn ?? []).some((t) => t.verifier || t.upload !== undefined || t.ready_check);
  }

  private get turns(): number {
    return this.task.turns.length;
  }

  /** Before the first prompt: the working directory found, the first turn prepared, the agent's part begun. */
  async start(): Promise<{ ok: true } | { ok: false; message: string; output: string }> {
    const env = this.bundle.envOf(this.task).spec;
    if (env.workdir) this.workdir = env.workdir;
    else {
      const pwd = await runToEnd(this.exec, { cmd: ['pwd'] });
      this.workdir = pwd.exitCode === 0 && pwd.output.text.trim() ? pwd.output.text.trim() : '/';
    }
    return this.prepare(0);
  }

  /** turn `i` (0-based) prepared, then the agent's part (re)begins */
  private async prepare(i: number): Promise<{ ok: true } | { ok: false; message: string; output: string }> {
    const spec = this.task.per_turn?.[i];
    if (spec?.upload !== undefined || spec?.ready_check) {
      const ready = await prepareTurn(this.exec, {
        workdir: this.workdir,
        setupTimeoutMs: TURN_SETUP_TIMEOUT_MS,
        ...(spec.upload !== undefined ? { upload: path.join(this.bundle.dir, spec.upload) } : {}),
        ...(spec.ready_check
          ? {
              readyCheck: {
                command: spec.ready_check.command,
                intervalMs: spec.ready_check.interval_s * 1000,
                timeoutMs: spec.ready_check.timeout_s * 1000,
                retries: spec.ready_check.retries,
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
    } else if (ending) {
      if (!this.task.verifier) return { kind: 'unverified' };
      const r = await this.verify(this.task.verifier, i, 'task');
      return r.kind === 'failed' ? r : { kind: 'scored', scores: r.scores, stoppedEarly: null };
    }
    // the next turn: the server's setup is not the agent's
    this.intervals.pause(await containerClock(this.exec));
    const next = await this.prepare(i + 1);
    return next.ok ? { kind: 'next' } : { kind: 'setup_failed', message: next.message, output: next.output };
  }

  /** the agent's shell ended and its processes killed, then the verifier */
  private async verify(
    v: VerifierManifest,
    i: number,
    scope: VerifierRecord['scope'],
  ): Promise<{ kind: 'ok'; scores: Scores } | Extract<TurnEndOutcome, { kind: 'failed' }>> {
    await this.tools?.endShell();
    const killed = await stopAgentProcesses(this.exec, this.intervals);
    this.intervals.pause(await containerClock(this.exec));
    const out = await runVerifier(this.exec, {
      testsDir: path.join(this.bundle.dir, v.tests),
      timeoutMs: v.timeout_s * 1000,
      env: v.env,
      workdir: this.workdir,
    });
    const run = out.run;
    this.record({
      turn: i + 1,
      scope,
      status: out.status,
      scores: out.status === 'scored' ? out.scores : null,
      exit_code: run.exitCode,
      duration_s: run.durationMs / 1000,
      agent_processes_killed: killed,
      output: run.output.text,
      output_bytes: run.output.totalBytes,
      dropped_bytes: run.output.droppedBytes,
    });
    if (out.status === 'scored') return { kind: 'ok', scores: out.scores };
    return {
      kind: 'failed',
      reason: out.status === 'timeout' ? 'verifier_timeout' : 'invalid_scores',
      message: `${scope === 'turn' ? `turn ${i + 1}'s verifier` : "the task's verifier"}: ${out.message}`,
      tail: outputTail(run),
    };
  }
}
