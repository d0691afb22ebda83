/**
 * An episode's kind: its "play", chosen once when the episode is made (choosePlay, plays/index.ts)
 * and asked by the episode (episode.ts) for what differs between kinds: which tools it lists, how
 * it attaches to its env, how it runs a call, how a turn ends and how the episode is scored. The
 * episode keeps what every kind shares: its phase, its step queue, ending exactly once, teardown,
 * its observers and its timings. The kinds:
 * - env tools (env-tools.ts): an http env's own tools over /tools/call, scored by its /finish;
 * - the shell toolset (shell-toolset.ts): the built-in shell tools in the env's container, beside
 *   the env's own tools, if any;
 * - a verified task (verified-task.ts): a turn prepared in the container before its prompt, and a
 *   verifier at a turn's end that scores the episode (the tools are the two kinds above);
 * - a harness run (harness-run.ts): the server runs the task's harness in the env's container,
 *   turn by turn; a client's one tool is `wait`; scored as a verified task or by the env's /finish;
 * - the E2B sandbox (src/e2b/sandbox.ts, its own room, not a play): an env slot and lease held as
 *   an episode holds them (waiting → deploying → running → done, ended once, torn down once), but
 *   driven by an E2B SDK's commands and file operations rather than steps: it has no tools, no
 *   turns and no score, so it keeps its own small life next to the episode's instead of a play.
 */
import type { Logger } from 'pino';
import type { LoadedBundle, Task, ToolSpec } from '../../bundle/index.js';
import type { CallEvidence, FailureExtra } from '../../failures.js';
import type { AgentUser } from '../../container/index.js';
import type { Metrics } from '../../metrics.js';
import type { Action } from '../../protocol/frames.js';
import type { HarnessProgress } from '../../protocol/harness.js';
import type { CallObservation, EndReason, Ending, FailurePhase, FailureReason, ResetObservation, StepOutcome } from '../../protocol/observations.js';
import type { ContainerExec } from '../../sandbox/container-exec.js';
import type { Companion, EnvHandle, EnvShell } from '../../sandbox/sandbox.js';
import type { BuiltinTools } from '../builtin-tools.js';
import type { EnvInspector } from '../diagnosis.js';
import type { EnvCaller } from '../env-client.js';
import type { HarnessRun } from '../harness-task.js';
import type { ModelAccess } from '../model-access.js';
import type { EndedOutcome } from '../replies.js';
import type { RewardFn } from '../reward.js';
import type { TurnEnd, VerifierRecord } from '../verified-task.js';

/** why a scored episode ends: its turns ended, or its steps ran out */
export type FinishReason = 'turns_ended' | 'max_steps';

/** What an episode gives its play: what it is, its env's access, and the moves that change its phase. */
export interface PlayHost {
  readonly id: string;
  readonly task: Task;
  readonly seed: number | null;
  readonly bundle: LoadedBundle;
  /** the episode's log */
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly reward: RewardFn;
  readonly modelAccess?: ModelAccess | undefined;
  readonly settings: { readonly toolTimeoutMs: number };
  /** the turn it is in (1-based) */
  turn(): number;
  /** it has ended */
  ended(): boolean;
  /** aborts when the episode closes */
  readonly signal: AbortSignal;
  /** aborts env calls: the episode closing, or the env's container dying */
  callSignal(): AbortSignal;
  /** looks at the env when a call to it went wrong */
  readonly inspector: EnvInspector;
  now(): number;
  /** how the episode calls its env over HTTP */
  connect(handle: EnvHandle): EnvCaller;
  /** the longest the env's own /reset may take */
  envResetCallMs(): number;
  /** the next turn begins: its prompt is the reply to `toolName` */
  nextTurn(toolName: string): StepOutcome<CallObservation>;
  /** scores `raw` and ends the episode with `reason`, or fails it (invalid_scores) */
  settleScores(raw: unknown, reason: EndReason, phase: FailurePhase): EndedOutcome;
  /** ends the episode as failed (if it runs); the ending, as the reply to `toolName` if named */
  fail(reason: FailureReason, phase: FailurePhase, message: string, toolName: string | null, extra?: FailureExtra): EndedOutcome;
  /** an env that stopped answering: the sandbox's look at it decides why */
  failFromEnv(phase: FailurePhase, message: string, toolName: string | null, said?: CallEvidence): Promise<EndedOutcome>;
  /** the ending, for a step that finds the episode ended */
  endedOutcome(toolName: string | null): EndedOutcome;
  /** the episode is not running yet, or its end was told: the step is refused (EpisodeStateError) */
  refuseUnlessRunning(): void;
  /** the reply `build` makes tells the client the episode ended (what the env cost is added to it) */
  reportEnd(build: () => StepOutcome): Promise<StepOutcome>;
  /** a verifier ran; a harness run ended (for the observers) */
  verifierRan(r: VerifierRecord): void;
  harnessRan(run: HarnessRun): void;
}

/** The env's container as the episode's plays reach it (null parts: the sandbox gives no access). */
export interface PlayEnv {
  handle: EnvHandle;
  exec: ContainerExec | null;
  shell: EnvShell | null;
  agentUser: AgentUser | null;
  /** the toolset's built-in tools in it, if the toolset has any */
  builtin: BuiltinTools | null;
  /** a fresh container of the env's image beside it (a clean verifier's) */
  companion(): Promise<Companion>;
}

export interface EpisodePlay {
  /** the tools its reset lists */
  readonly tools: ToolSpec[];
  /** its turn's time budgets are the episode's turn clock's to keep (a harness's are its own) */
  readonly clocked: boolean;
  /**
   * Attaches to a fresh env (again after a dead pooled env was replaced): its container parts,
   * then the env's /reset. Throws TurnSetupError when a turn's setup failed, else the env's failure.
   */
  attach(env: PlayEnv): Promise<void>;
  /** the reset reply is ready: the kind may add to it or record it */
  onReset(outcome: StepOutcome<ResetObservation>): void;
  /** the episode runs (after its reset reply) */
  onRunning(): void;
  /** a step of its own instead of the episode's queue (a harness episode's wait) */
  step?(action: Action): Promise<StepOutcome>;
  /** a call of one of its tools (its name listed, its arguments an object), end_turn aside */
  call(name: string, args: Record<string, unknown>): Promise<StepOutcome<CallObservation | Ending>>;
  /** a call answered (the episode's queue): the kind may record it */
  onCall(record: { step: number; turn: number; tool: string; arguments: unknown; observation: unknown }): void;
  /** the model's end_turn, with its answer */
  endTurn(answer: string | null): Promise<StepOutcome<CallObservation | Ending>>;
  /** the episode ends scored (its last turn ended, its steps ran out); the ending as the reply to end_turn */
  finish(reason: FinishReason): Promise<StepOutcome<CallObservation | Ending>>;
  /** a time budget passed between steps: the turn (`end_turn`) or the episode ends */
  budgetPassed(how: TurnEnd): Promise<StepOutcome<CallObservation | Ending>>;
  /** a harness's run of a turn ended: that turn ends (`end_turn`), or the episode (`episode_end`) */
  runEnded(how: TurnEnd): Promise<StepOutcome<CallObservation | Ending>>;
  /** a harness episode's harness, as far as it got (null: none) */
  progress(): HarnessProgress | null;
  /** stops the command in flight, if any, saying why */
  interrupt(why: string): void;
  /** its teardown begins: what is in flight is recorded (a harness's model calls) */
  onTeardown(): void;
  /** its part of the teardown, before the env goes (its shell ended) */
  close(): Promise<void>;
}

/** A turn's setup (its upload's setup.sh, its ready check) failed before its prompt: the episode cannot start. */
export class TurnSetupError extends Error {
  override readonly name = 'TurnSetupError';
  constructor(
    message: string,
    readonly output: string,
  ) {
    super(message);
  }
}
