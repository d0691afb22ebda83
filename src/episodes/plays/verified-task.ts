/**
 * The verified-task play: each turn prepared in the env's container before its prompt, and at a
 * turn's end the verifier the task names (TaskVerification, ../verified-task.ts): the next turn,
 * or the episode scored by its verifiers (or by the env's /finish when the task has none), or
 * failed. The tools are its inner play's (the env's own, the shell toolset); what the model saw
 * and did is kept for the verifiers (/logs/agent/trajectory.json).
 */
import { END_TURN, type ToolSpec } from '../../bundle/index.js';
import type { CallObservation, Ending, ResetObservation, StepOutcome } from '../../protocol/observations.js';
import { TrajectoryLog } from '../../verifier/trajectory.js';
import { textResult } from '../outcomes.js';
import { TaskVerification, type TurnEnd, type TurnEndOutcome, type VerifierRecord } from '../verified-task.js';
import { TurnSetupError, type EpisodePlay, type FinishReason, type PlayEnv, type PlayHost } from './play.js';

export class VerifiedTaskPlay implements EpisodePlay {
  readonly clocked = true;
  private verification: TaskVerification | null = null;
  /** what the model saw and did, for a verifier's /logs/agent/trajectory.json */
  private trajectory: TrajectoryLog | null = null;

  constructor(
    private readonly host: PlayHost,
    /** whose tools the model calls */
    private readonly inner: EpisodePlay,
  ) {}

  get tools(): ToolSpec[] {
    return this.inner.tools;
  }

  /** Prepares the first turn in the env's container (its setup failing: TurnSetupError), then the inner play attaches. */
  async attach(env: PlayEnv): Promise<void> {
    const h = this.host;
    const { exec, shell, agentUser } = env;
    if (!exec || !shell || !agentUser) throw new Error(`task ${h.task.task_id} is verified in its env's container, but the sandbox gives no access to it`);
    const venv = { exec, agentUser, companion: env.companion, trajectory: () => this.trajectory?.build({ id: h.id }) };
    this.trajectory = new TrajectoryLog();
    this.verification = new TaskVerification(
      h.bundle,
      h.task,
      venv,
      env.builtin,
      h.reward,
      (r) => this.verified(r),
      (steps) => h.log.debug({ event: 'turn_end_steps', turn: h.turn(), ms: steps }, 'the steps of a turn end'),
    );
    const ready = await this.verification.start();
    if (!ready.ok) throw new TurnSetupError(ready.message, ready.output);
    await this.inner.attach(env);
  }

  /** a verifier ran: its log line, and the observers hear of it */
  private verified(r: VerifierRecord): void {
    const fields = { turn: r.turn, scope: r.scope, status: r.status, scores: r.scores, exit_code: r.exit_code, duration_s: r.duration_s };
    this.host.log.info({ event: 'verified', ...fields, killed: r.agent_processes_killed }, `verifier ${r.status}`);
    this.host.verifierRan(r);
  }

  onReset(outcome: StepOutcome<ResetObservation>): void {
    this.inner.onReset(outcome);
    this.trajectory?.reset(outcome.observation);
  }

  onRunning(): void {
    this.inner.onRunning();
  }

  call(name: string, args: Record<string, unknown>): Promise<StepOutcome<CallObservation | Ending>> {
    return this.inner.call(name, args);
  }

  onCall(record: { step: number; turn: number; tool: string; arguments: unknown; observation: unknown }): void {
    this.trajectory?.call(record);
  }

  /** end_turn: its verifier runs; the next turn's prompt, or the episode scored (or failed) */
  async endTurn(answer: string | null): Promise<StepOutcome<CallObservation | Ending>> {
    const ended = await this.turnEnded('end_turn', END_TURN);
    // the next turn's prompt, or a failure's reply (its error kept)
    if (!ended.done || (ended.observation as Ending).failure) return ended;
    const early = this.host.turn() < this.host.task.turns.length;
    const text = early ? 'The turn scored under its min_reward: the episode ends here and is scored.' : 'The last turn ended; the episode is scored.';
    return {
      observation: { ...ended.observation, tool_name: END_TURN, result: textResult(text, { answer }), error: null },
      reward: ended.reward,
      done: true,
    };
  }

  finish(reason: FinishReason): Promise<StepOutcome<CallObservation | Ending>> {
    return this.turnEnded('episode_end', END_TURN, reason);
  }

  budgetPassed(how: TurnEnd): Promise<StepOutcome<CallObservation | Ending>> {
    return this.turnEnded(how, null);
  }

  runEnded(how: TurnEnd): Promise<StepOutcome<CallObservation | Ending>> {
    return this.turnEnded(how, null);
  }

  /**
   * A turn ends (end_turn, its time budget, or the episode's end): its verifier or the task's
   * runs, then the next turn is prepared, or the episode is scored (or failed).
   */
  private async turnEnded(how: TurnEnd, toolName: string | null, reason: FinishReason = 'turns_ended'): Promise<StepOutcome<CallObservation | Ending>> {
    const h = this.host;
    let r: TurnEndOutcome;
    try {
      r = await this.verification!.turnEnded(h.turn() - 1, how);
    } catch (e) {
      if (h.ended()) return h.endedOutcome(toolName);
      return h.failFromEnv('finish', `the end of turn ${h.turn()} failed in the env's container: ${(e as Error).message}`, toolName);
    }
    if (h.ended()) return h.endedOutcome(toolName); // the episode timed out or closed meanwhile
    switch (r.kind) {
      case 'next':
        return h.nextTurn(toolName ?? END_TURN);
      case 'scored':
        if (r.stoppedEarly) h.log.info({ event: 'stopped_early', why: r.stoppedEarly }, 'a turn scored under its min_reward: the episode ends');
        return h.settleScores(r.scores, reason, 'finish');
      case 'unverified':
        return this.inner.finish(reason);
      case 'failed':
        return h.fail(r.reason, 'finish', r.message, toolName, { log_tail: r.tail });
      case 'setup_failed':
        return h.fail('setup_failed', 'reset', r.message, toolName, { log_tail: r.output });
    }
  }

  progress(): null {
    return null;
  }

  interrupt(why: string): void {
    this.inner.interrupt(why);
  }

  onTeardown(): void {
    this.inner.onTeardown();
  }

  /** the inner play's close, and the clean verifiers' containers gone (before the env's slot is freed) */
  async close(): Promise<void> {
    await Promise.all([this.inner.close(), this.verification?.removed()]);
  }
}
