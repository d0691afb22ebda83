/**
 * The harness-run play: the server runs the task's harness in the env's container, turn by turn
 * (HarnessTask, ../harness-task.ts), and each run's end is scored as end_turn (or, past its time
 * budget, the episode's end) would score it: by its inner play (a verified task's verifiers, else
 * the env's /finish). A client's one tool is `wait`: until the episode ends or its timeout_s
 * passes, for the progress; the first reply after the end carries the ending. Its steps wait on
 * the server's run, never in line with it (not the episode's step queue).
 */
import type { HarnessManifest, ToolSpec } from '../../bundle/index.js';
import { HARNESS } from '../../defaults.js';
import { toolErrorType } from '../../failures.js';
import type { Action } from '../../protocol/frames.js';
import { WAIT_TOOL, WAIT_TOOL_NAME, WaitArgsSchema, type HarnessProgress } from '../../protocol/harness.js';
import type { CallObservation, Ending, ResetObservation, StepOutcome } from '../../protocol/observations.js';
import { seconds3 } from '../../util/time.js';
import { HarnessTask, progressText } from '../harness-task.js';
import { textResult, toolError } from '../outcomes.js';
import type { TurnEnd } from '../verified-task.js';
import type { EpisodePlay, FinishReason, PlayEnv, PlayHost } from './play.js';

export class HarnessRunPlay implements EpisodePlay {
  readonly tools: ToolSpec[] = [WAIT_TOOL];
  /** a harness episode's time budgets are its harness's */
  readonly clocked = false;

  constructor(
    private readonly host: PlayHost,
    private readonly spec: HarnessManifest,
    /** who scores a run's end */
    private readonly inner: EpisodePlay,
  ) {}

  /** the task's harness in the env's container, once attached */
  private harness: HarnessTask | null = null;

  /** Makes the harness, run as the agent's user, then the inner play attaches. */
  async attach(env: PlayEnv): Promise<void> {
    const h = this.host;
    const { exec, agentUser } = env;
    if (!exec || !agentUser) throw new Error(`task ${h.task.task_id} names a harness, but the sandbox gives no access to its env's container`);
    const workdir = h.bundle.envOf(h.task).spec.workdir;
    const access = h.modelAccess;
    this.harness = new HarnessTask(this.spec, h.task, exec, {
      ...(workdir ? { workdir } : {}),
      user: await agentUser.get(),
      use: () => access?.gateway.use(h.id) ?? null,
      now: () => h.now(),
    });
    await this.inner.attach(env);
  }

  onReset(outcome: StepOutcome<ResetObservation>): void {
    outcome.observation.harness = true;
    this.inner.onReset(outcome);
  }

  /** the harness starts once the reset is answered */
  onRunning(): void {
    void this.drive(this.harness!);
  }

  /** `wait` (until the episode ends, or its timeout_s, for the progress) or list_tools; later steps than the end's are refused */
  async step(action: Action): Promise<StepOutcome> {
    const h = this.host;
    h.refuseUnlessRunning();
    if (action.type === 'list_tools') return { observation: { tools: this.tools }, reward: null, done: false };
    const name = action.tool_name;
    if (name !== WAIT_TOOL_NAME) {
      return toolError(name, 'tool_not_found', `a harness episode is run by the server: its one tool is ${WAIT_TOOL_NAME} (no "${name}")`);
    }
    const args = WaitArgsSchema.safeParse(action.arguments ?? {});
    if (!args.success) return toolError(name, 'invalid_args', args.error.issues.map((i) => `${i.path.join('.') || 'arguments'}: ${i.message}`).join('; '));
    if (!h.ended()) await abortableSleep((args.data.timeout_s ?? HARNESS.waitDefaultS) * 1000, h.signal);
    const progress = this.progress();
    if (!h.ended()) {
      return {
        observation: { tool_name: name, result: textResult(progress ? progressText(progress, false) : 'The harness has not started.', progress), error: null },
        reward: null,
        done: false,
      };
    }
    return h.reportEnd(() => {
      const ending = h.endedOutcome(null).observation as Ending;
      const text = progress ? progressText(progress, true) : 'The episode ended.';
      const error = ending.failure ? { error_type: toolErrorType(ending.failure), message: ending.failure.message } : null;
      return { observation: { ...ending, tool_name: name, result: textResult(text, progress), error }, reward: ending.reward, done: true };
    });
  }

  /** Runs the harness turn by turn, each run's end scored by the inner play. */
  private async drive(harness: HarnessTask): Promise<void> {
    const h = this.host;
    try {
      while (!h.ended()) {
        const run = await harness.runTurn(h.turn() - 1);
        if (h.ended()) return;
        h.log.info(
          { event: 'harness_ended', turn: run.turn, ended: run.ended, exit_code: run.exitCode, duration_s: seconds3(run.durationMs) },
          'the harness ended',
        );
        h.harnessRan(run);
        const out = await this.inner.runEnded(run.ended === 'time_budget' ? 'episode_end' : 'end_turn');
        if (out.done) return;
      }
    } catch (e) {
      if (!h.ended()) await h.failFromEnv('tool', `the harness could not run in the env's container: ${(e as Error).message}`, null);
    }
  }

  call(name: string, args: Record<string, unknown>): Promise<StepOutcome<CallObservation | Ending>> {
    return this.inner.call(name, args);
  }

  onCall(): void {}

  endTurn(answer: string | null): Promise<StepOutcome<CallObservation | Ending>> {
    return this.inner.endTurn(answer);
  }

  finish(reason: FinishReason): Promise<StepOutcome<CallObservation | Ending>> {
    return this.inner.finish(reason);
  }

  budgetPassed(how: TurnEnd): Promise<StepOutcome<CallObservation | Ending>> {
    return this.inner.budgetPassed(how);
  }

  runEnded(how: TurnEnd): Promise<StepOutcome<CallObservation | Ending>> {
    return this.inner.runEnded(how);
  }

  progress(): HarnessProgress | null {
    return this.harness?.progress() ?? null;
  }

  interrupt(why: string): void {
    this.inner.interrupt(why);
  }

  /** model calls in flight are cut short (and recorded) before the env goes */
  onTeardown(): void {
    this.harness?.noteUse();
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

/** resolves after `ms`, or at once when `signal` aborts */
function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
