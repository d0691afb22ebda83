/**
 * One episode's step state machine: waiting → deploying → running → done → torn down. Its env
 * lease (capacity/env-lease.ts) owns the slot and the env; the episode resets the env, runs the
 * steps one at a time, and ends exactly once whatever ends it (the env, the client, a budget, a
 * failure, the server stopping). What differs between kinds of episode (an env's tools, the shell
 * toolset, a verified task, a harness run) is its play, chosen once (plays/). Its turn's time
 * budgets: turn-clock.ts; scores to a reward: scoring.ts; what a step answers: replies.ts and
 * outcomes.ts. Why an env failed: diagnosis.ts asks, failures.ts decides.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { abortError, isAbortError } from '../util/abort.js';
import type { Task } from '../bundle/index.js';
import { maxStepsFor } from '../defaults.js';
import { DeployFailedError, EpisodeStateError } from '../errors.js';
import { makeFailure, type CallEvidence, type FailureExtra } from '../failures.js';
import type { Action } from '../protocol/frames.js';
import { DEFAULT_LANE, type Lane } from '../protocol/lanes.js';
import type { CallObservation, EndReason, EpisodeCost, EpisodeState, Failure, FailurePhase, FailureReason } from '../protocol/observations.js';
import type { Phase, ResetObservation, StepOutcome, Timings, ToolsObservation, Transport } from '../protocol/observations.js';
import type { EnvHandle } from '../sandbox/sandbox.js';
import { fmtS } from '../util/time.js';
import { EnvLease } from './capacity/env-lease.js';
import { EnvInspector } from './diagnosis.js';
import type { EpisodeDeps, EpisodeObserver } from './episode-deps.js';
import { EpisodeCostMeter } from './episode-cost.js';
import { deployedLine, toolCallFields } from './episode-log.js';
import { resetObservation } from './outcomes.js';
import { choosePlay, httpEnvClient, playCall, playEnv, type EpisodePlay, type PlayHost } from './plays/index.js';
import { endedOutcome, nextTurnOutcome, scoredOutcome, timingsOf, withEnding, type EndedOutcome } from './replies.js';
import type { Scores } from './reward.js';
import { scoreOf } from './scoring.js';
import { TurnClock } from './turn-clock.js';
import type { TurnEnd } from './verified-task.js';

export type { EpisodeDeps, EpisodeObserver, EpisodeSettings } from './episode-deps.js';

export class Episode {
  readonly id: string;
  readonly createdAt: number;
  phase: Phase = 'waiting';
  steps = 0;
  turn = 1;
  reward: number | null = null;
  scores: Scores | null = null;
  endReason: EndReason | null = null;
  failure: Failure | null = null;
  /** resolves once the env and network are gone and the slot is free */
  readonly tornDown: Promise<void>;

  /** the slot and the env: taken, deployed or pooled, and given back */
  private readonly lease: EnvLease;
  /** looks at the env when a call to it went wrong */
  private readonly inspector: EnvInspector;
  private readonly abort = new AbortController();
  /** aborts env calls: the episode closing, or the env's container dying (handle.gone) */
  private callSignal: AbortSignal = this.abort.signal;
  private episodeTimer: NodeJS.Timeout | null = null;
  private resolveTornDown!: () => void;
  private teardownStarted = false;
  /** a step reply has told the client the episode is done */
  private endReported = false;
  /** its model access ended while it deployed: it fails once running */
  private modelEnd: { reason: FailureReason; message: string } | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  /** steps taken and not yet answered (observers hear an ending step after onEnded) */
  private stepsUnanswered = 0;
  private readonly t: { queued?: number; deployed?: number; running?: number; ended?: number } = {};
  private readonly now: () => number;
  private readonly log: Logger;
  /** its kind: an env's tools, the shell toolset, a verified task, a harness run (plays/) */
  private readonly play: EpisodePlay;
  /** the task's or the turn's time budget, and the notice a call gets after a budget ended its turn */
  private readonly clock: TurnClock;
  /** the task's time budget ended the episode between steps: the next step's reply says so */
  private endedBetweenSteps = false;
  /** what its env cost, read as its teardown starts (episode-cost.ts) */
  private readonly meter: EpisodeCostMeter;

  constructor(
    private readonly deps: EpisodeDeps,
    readonly task: Task,
    readonly seed: number | null,
    readonly transport: Transport,
    /** the longest its reset waits in the queue for a slot (the reset timeout) */
    readonly queueTimeoutMs: number,
    /** the reset's own `episode_id` label, if it gave one */
    readonly clientLabel?: string,
    /** the lane its reset waits in for a slot */
    readonly lane: Lane = DEFAULT_LANE,
  ) {
    this.id = randomUUID();
    this.now = deps.now ?? Date.now;
    this.createdAt = this.now();
    this.log = deps.log.child({ episode_id: this.id, task_id: task.task_id, ...(clientLabel ? { client_episode_id: clientLabel } : {}) });
    this.lease = new EnvLease(deps, this.id, deps.bundle.envOf(task).name, this.log);
    this.inspector = new EnvInspector(deps.sandbox, () => this.lease.handle, this.ids, this.log);
    const env = () => ({ handle: this.lease.handle, since: this.lease.envSince });
    this.meter = new EpisodeCostMeter({ usage: deps.sandbox.usage, env, now: this.now, log: this.log, metrics: deps.metrics, split: task.split });
    this.clock = new TurnClock(task, this.now, (how) => this.onBudget(how));
    this.play = choosePlay(this.host());
    this.tornDown = new Promise((r) => (this.resolveTornDown = r));
    this.notify((o) => o.onCreated?.(this));
  }

  /** what its play may see and do of it (plays/play.ts) */
  private host(): PlayHost {
    return {
      ...this.deps,
      id: this.id,
      task: this.task,
      seed: this.seed,
      log: this.log,
      turn: () => this.turn,
      ended: () => this.done,
      signal: this.abort.signal,
      callSignal: () => this.callSignal,
      inspector: this.inspector,
      now: () => this.now(),
      connect: (handle) => (this.deps.connect ?? httpEnvClient)(handle),
      envResetCallMs: () => this.envResetCallMs(),
      nextTurn: (toolName) => this.nextTurn(toolName),
      settleScores: (raw, reason, phase) => this.settleScores(raw, reason, phase),
      fail: (reason, phase, message, toolName, extra) => this.fail(reason, phase, message, toolName, extra),
      failFromEnv: (phase, message, toolName, said) => this.failFromEnv(phase, message, toolName, said),
      endedOutcome: (toolName) => this.endedOutcome(toolName),
      refuseUnlessRunning: () => {
        this.refuseUntilRunning();
        if (this.done && this.endReported) throw this.doneError();
      },
      reportEnd: (build) => {
        this.endReported = true;
        return this.meter.onto(build());
      },
      verifierRan: (r) => this.notify((o) => o.onVerifier?.(this, r)),
      harnessRan: (run) => this.notify((o) => o.onHarness?.(this, run)),
    };
  }

  /**
   * The id its env's resources are labelled with: the episode id for an env deployed for it, the
   * pooled env's own id (`pool-…`) for one taken from the warm pool.
   */
  get envId(): string {
    return this.lease.envId;
  }

  /** Tells the observer, if any; whatever it throws stays out of the episode. */
  private notify(call: (o: EpisodeObserver) => void): void {
    const o = this.deps.observer;
    if (!o) return;
    try {
      call(o);
    } catch (e) {
      this.log.error({ err: (e as Error)?.message }, 'an episode observer threw; ignored');
    }
  }

  /** what its env cost: null until read (as its teardown starts), and when no env was deployed for it */
  get cost(): EpisodeCost | null {
    return this.meter.value;
  }

  get done(): boolean {
    return this.phase === 'done';
  }

  get ids() {
    return { episode_id: this.id, task_id: this.task.task_id };
  }

  state(): EpisodeState {
    return { episode_id: this.id, task_id: this.task.task_id, step_count: this.steps, turn: this.turn, done: this.done, phase: this.phase };
  }

  timings(): Timings {
    return timingsOf(this.createdAt, this.t, this.now(), this.lease.withPool ? this.lease.pooled : undefined, this.lease.imageWaitedMs);
  }

  /**
   * Waits for a slot, gets the env and resets it. Throws CapacityError, ShuttingDownError,
   * DeployFailedError or an AbortError (the episode was closed meanwhile); the episode is then
   * torn down and its slot, if it had one, freed.
   */
  async start(): Promise<StepOutcome<ResetObservation>> {
    const { admission, settings, metrics } = this.deps;
    this.log.info({ event: 'queued', lane: this.lane, waiting: admission.waitingCount, active: admission.activeCount }, 'episode queued');
    const slot = this.lease.takeSlot({ queueTimeoutMs: this.queueTimeoutMs, signal: this.abort.signal, lane: this.lane });
    const refused = await slot.then(() => null).catch((e: unknown) => ({ e }));
    this.t.queued = this.now();
    metrics.queueWait.observe({ lane: this.lane }, (this.t.queued - this.createdAt) / 1000);
    if (refused) {
      this.end('closed');
      throw refused.e;
    }
    this.phase = 'deploying';
    try {
      await this.resetEnv(await this.lease.env(this.abort.signal, this.deps.modelAccess?.doorFor(this.id))).catch(async (e: unknown) => {
        // a pooled env whose /reset got no answer because it died before the first observation: a fresh one, once
        if (!this.lease.pooled || this.abort.signal.aborted || !(await this.inspector.pooledEnvDied(e))) throw e;
        await this.resetEnv(await this.lease.replaceDeadPooledEnv(this.abort.signal, this.deps.modelAccess?.doorFor(this.id)));
      });
    } catch (e) {
      if (isAbortError(e) || this.abort.signal.aborted) {
        this.end('closed');
        throw abortError('episode closed while deploying');
      }
      const failure = await this.inspector.deployFailure(e, this.envResetCallMs());
      this.failure = failure;
      metrics.envFailures.inc({ reason: failure.reason });
      this.log.warn({ event: 'deploy_failed', reason: failure.reason, message: failure.message }, 'deploy failed');
      this.end('env_failed');
      throw new DeployFailedError(failure);
    }
    this.phase = 'running';
    this.t.running = this.now();
    metrics.deploy.observe((this.t.running - this.t.queued) / 1000);
    // the last stage of an episode's own deploy (a pooled env's deploy was not the episode's)
    if (!this.lease.pooled) metrics.deployStage.observe({ stage: 'env_reset' }, (this.t.running - this.t.deployed!) / 1000);
    this.episodeTimer = setTimeout(() => void this.onEpisodeTimeout(), settings.episodeTimeoutMs);
    this.episodeTimer.unref?.();
    // a harness episode's time budgets are its harness's (harness-task.ts)
    this.clock.start(this.t.running, this.turn, this.play.clocked);
    this.log.info({ event: 'reset', queued_s: this.timings().queued_s, deploy_s: this.timings().deploy_s }, 'episode running');
    const outcome = resetObservation(this, this.play.tools, this.timings());
    this.play.onReset(outcome);
    this.notify((o) => o.onReset?.(this, outcome));
    if (this.modelEnd) this.modelAccessEnded(this.modelEnd.reason, this.modelEnd.message);
    this.play.onRunning();
    return outcome;
  }

  /** Attaches to the env (its death signal, then its play: its client, its container, its /reset). */
  private async resetEnv(handle: EnvHandle): Promise<void> {
    const gone = handle.gone;
    this.callSignal = gone ? AbortSignal.any([this.abort.signal, gone]) : this.abort.signal;
    // A death during a step is that step's to report: its call is cut short (callSignal) and fails
    // with the call's name, so the transcript keeps the call. The check runs after the step in
    // flight, through the step queue; if no step claimed the death, it happened between calls and
    // ends the episode now.
    gone?.addEventListener('abort', () => this.afterStep(() => this.diedBetweenCalls(handle, (gone.reason as Error)?.message)), { once: true });
    this.t.deployed = this.now();
    const pooled = this.lease.pooled;
    this.log.info(...deployedLine(this.t.deployed - this.t.queued!, pooled && { envId: this.envId, waitedMs: pooled.waitedMs }));
    const env = playEnv(this.deps.bundle, this.task, handle, this.deps.sandbox.shell ?? null, this.lease.spec, this.abort.signal, () => this.inspector.gone());
    await this.play.attach(env);
  }

  /** the env died between calls (no step claimed its death): the episode fails */
  private async diedBetweenCalls(handle: EnvHandle, why: string): Promise<void> {
    if (this.phase === 'running' && !this.done && this.lease.handle === handle) await this.failFromEnv('tool', `the env died between calls: ${why}`, null);
  }

  /** runs `then` after the step in flight, in the step queue */
  private afterStep(then: () => Promise<void>): void {
    this.queue = this.queue.then(then);
  }

  /** the env's own /reset call may take as long as a tool call or its deploy, whichever is longer */
  private envResetCallMs(): number {
    return Math.max(this.deps.settings.toolTimeoutMs, this.lease.spec?.deployTimeoutMs ?? 0);
  }

  /** a step was taken and is not answered yet: when the episode ends meanwhile, its onStep comes after onEnded */
  get answering(): boolean {
    return this.stepsUnanswered > 0;
  }

  /** Steps run one at a time, in arrival order. */
  step(action: Action & { type: 'list_tools' }): Promise<StepOutcome<ToolsObservation>>;
  step(action: Action): Promise<StepOutcome>;
  step(action: Action): Promise<StepOutcome> {
    // a harness episode's steps wait on the server's run of it, never in line with it
    if (this.play.step) return this.play.step(action);
    this.stepsUnanswered++;
    const run = this.queue.then(async () => {
      const startedAt = this.now();
      let out = await this.doStep(action);
      // a verifier the call itself triggered (end_turn, the last step) has run by now: the calls before it are what it saw
      if (action.type === 'call_tool')
        this.play.onCall({ step: this.steps, turn: this.turn, tool: action.tool_name, arguments: action.arguments, observation: out.observation });
      // the reply that ends the episode says what it cost (read before the env's removal, bounded)
      if (out.done) out = await this.meter.onto(out);
      if (out.done) this.endReported = true;
      if (action.type === 'call_tool' && this.log.isLevelEnabled('debug'))
        this.log.debug(toolCallFields(action, out, this.now() - startedAt, this.steps), `tool ${action.tool_name}`);
      this.stepsUnanswered--;
      this.notify((o) => o.onStep?.(this, action, out, startedAt));
      return out;
    });
    this.queue = run.catch(() => {
      this.stepsUnanswered--;
    });
    return run;
  }

  private refuseUntilRunning(): void {
    if (this.phase === 'waiting' || this.phase === 'deploying')
      throw new EpisodeStateError('no_episode', 'the episode is not running yet; wait for the reset reply');
  }

  private doneError(): EpisodeStateError {
    return new EpisodeStateError('episode_done', `episode ${this.id} is done (${this.endReason}); reset to play another`);
  }

  private async doStep(action: Action): Promise<StepOutcome> {
    this.refuseUntilRunning();
    if (this.done && !this.endReported && (this.endReason === 'env_failed' || this.endedBetweenSteps)) {
      // it ended between steps (episode timeout, the task's time budget): this reply is the first to tell the client
      return this.endedOutcome(action.type === 'call_tool' ? action.tool_name : null);
    }
    if (this.done) throw this.doneError();
    this.deps.metrics.steps.inc();
    if (action.type === 'list_tools') return { observation: { tools: this.play.tools }, reward: null, done: false };
    const toolName = action.tool_name;
    const notice = this.clock.takeNotice(toolName, this.turn);
    if (notice) return notice;
    this.steps++;
    const outcome = await playCall(this.play, toolName, action.arguments, this.task.toolset);
    if (!outcome.done && this.steps >= maxStepsFor(this.task, this.deps.settings.maxSteps)) {
      return withEnding(outcome, await this.play.finish('max_steps'));
    }
    return outcome;
  }

  /** The next turn begins: its prompt is the reply (to end_turn, or to the call a turn's time budget preempted). */
  private nextTurn(toolName: string): StepOutcome<CallObservation> {
    this.turn++;
    this.clock.newTurn(this.turn);
    return nextTurnOutcome(toolName, this.turn, this.task.turns[this.turn - 1]!);
  }

  /** A time budget passed: after the step in flight (a shell command in flight is stopped), the turn (or the episode) ends as end_turn would end it. */
  private onBudget(how: TurnEnd): void {
    this.play.interrupt(`the ${how === 'episode_end' ? "task's" : "turn's"} time budget passed while it ran`);
    this.afterStep(async () => {
      if (this.done || this.phase !== 'running') return;
      const endsEpisode = how === 'episode_end' || this.turn === this.task.turns.length;
      this.log.info({ event: 'time_budget', turn: this.turn, ends: endsEpisode ? 'episode' : 'turn' }, 'a time budget passed');
      this.endedBetweenSteps = endsEpisode;
      const out = await this.play.budgetPassed(how);
      // scored under a min_reward, or failed: the episode ended between steps too
      if (out.done) this.endedBetweenSteps = true;
      else this.clock.noteTurnBegan(this.turn);
    });
  }

  private settleScores(raw: unknown, reason: EndReason, phase: FailurePhase): EndedOutcome {
    const scored = scoreOf(raw, this.deps.bundle.manifest.scores, this.deps.reward);
    if ('reason' in scored) return this.fail(scored.reason, phase, scored.message, null);
    this.scores = scored.scores;
    this.reward = scored.reward;
    this.endWith(reason);
    this.deps.metrics.rewards.observe({ split: this.task.split }, scored.reward);
    void this.teardown();
    return scoredOutcome(scored.reward, scored.scores, reason, this.timings());
  }

  /** An env that stopped answering: the sandbox's look at it decides why (failures.ts). */
  private async failFromEnv(phase: FailurePhase, message: string, toolName: string | null, said?: CallEvidence): Promise<EndedOutcome> {
    const v = await this.inspector.verdict(said);
    return this.fail(v.reason, phase, `${message} (${v.what})`, toolName, v.extra);
  }

  private fail(reason: FailureReason, phase: FailurePhase, message: string, toolName: string | null, extra: FailureExtra = {}): EndedOutcome {
    if (!this.done) {
      this.failure = makeFailure(reason, phase, message, this.ids, extra);
      this.deps.metrics.envFailures.inc({ reason });
      this.log.warn({ event: 'env_failed', reason, phase, message }, 'env failed');
      this.end('env_failed');
    }
    return this.endedOutcome(toolName);
  }

  /** The reply for a step that finds (or makes) the episode ended. */
  private endedOutcome(toolName: string | null): EndedOutcome {
    const state = { reward: this.reward, endReason: this.endReason, failure: this.failure, scores: this.scores, timings: this.timings() };
    const harness = this.play.progress();
    return endedOutcome(harness ? { ...state, harness } : state, toolName);
  }

  private async onEpisodeTimeout(): Promise<void> {
    if (this.done) return;
    const ms = this.deps.settings.episodeTimeoutMs;
    this.fail('episode_timeout', 'tool', `the episode ran past --episode-timeout (${fmtS(ms)})`, null);
    this.abort.abort();
  }

  private endWith(reason: EndReason): void {
    if (this.phase === 'done') return;
    this.phase = 'done';
    this.endReason = reason;
    this.t.ended = this.now();
    if (this.episodeTimer) clearTimeout(this.episodeTimer);
    this.clock.stop();
    if (reason !== 'closed' || this.t.running !== undefined) this.deps.metrics.episodesEnded.inc({ end_reason: reason });
    const failed = this.failure ? { failure_reason: this.failure.reason } : {};
    this.log.info({ event: 'ended', end_reason: reason, reward: this.reward, steps: this.steps, ...this.timings(), ...failed }, 'episode ended');
    this.notify((o) => o.onEnded?.(this));
  }

  /** Ends the episode (if it runs) and starts its teardown. */
  private end(reason: EndReason): void {
    this.endWith(reason);
    void this.teardown();
  }

  /** Ends the episode (if it runs) and tears it down. Idempotent. */
  async close(): Promise<void> {
    this.endWith('closed');
    this.abort.abort();
    await this.teardown();
  }

  /** its model access ended on its own (a budget spent, the upstream failed): the episode fails with that reason */
  modelAccessEnded(reason: FailureReason, message: string): void {
    if (this.phase === 'deploying') this.modelEnd = { reason, message };
    else if (this.phase === 'running') this.fail(reason, 'model', message, null);
  }

  /** Gives the env lease back (the env and network removed, the slot freed). Exactly once. */
  teardown(): Promise<void> {
    if (!this.teardownStarted) {
      this.teardownStarted = true;
      void this.runTeardown();
    }
    return this.tornDown;
  }

  private async runTeardown(): Promise<void> {
    // abort an in-flight deploy first, so it removes what it made before the lease looks
    this.abort.abort();
    try {
      // what the env cost, read while it still exists: its removal waits for the reading (bounded)
      const cost = this.meter.read();
      // model calls in flight are cut short (and recorded) before the env goes
      this.play.onTeardown();
      await this.deps.modelAccess?.revoke(this.id).catch((e: unknown) => this.log.error({ err: (e as Error).message }, 'revoking the model credential failed'));
      await this.play.close();
      await cost;
      await this.lease.release();
    } finally {
      // the step that ended the episode (its env died, its episode timed out) reports after
      // its end; it is aborted above and answers at once: observers hear of it before tornDown
      await this.queue;
      this.resolveTornDown();
    }
  }
}
