/**
 * One episode's step state machine: waiting → deploying → running → done → torn down. Its env
 * lease (capacity/env-lease.ts) owns the slot and the env; the episode resets the env, runs the
 * steps one at a time, and ends exactly once whatever ends it (the env, the client, a budget, a
 * failure, the server stopping). Why an env failed: diagnosis.ts asks, failures.ts decides; what
 * a step answers is built by outcomes.ts.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { abortError, isAbortError } from '../abort.js';
import { END_TURN, type HarnessManifest, type LoadedBundle, type Task, type ToolSpec } from '../bundle/index.js';
import { HARNESS, MAX_ARGUMENT_DEPTH, maxStepsFor } from '../defaults.js';
import { DeployFailedError, EpisodeStateError } from '../errors.js';
import { invalidScoresMessage, makeFailure, toolErrorType, type CallEvidence, type FailureExtra } from '../failures.js';
import { ShellStartError } from '../tools/shell/index.js';
import { AgentUser } from '../container/index.js';
import type { Metrics } from '../metrics.js';
import { jsonDepthExceeds } from '../json.js';
import { FinishReplySchema, ToolCallReplySchema, type EnvResetRequest, type EnvToolCallRequest } from '../protocol/env-contract.js';
import type { Action } from '../protocol/frames.js';
import { DEFAULT_LANE, type Lane } from '../protocol/lanes.js';
import type {
  CallObservation,
  EndReason,
  Ending,
  EpisodeState,
  Failure,
  FailurePhase,
  FailureReason,
  Phase,
  ResetObservation,
  StepOutcome,
  Timings,
  ToolsObservation,
  Transport,
} from '../protocol/observations.js';
import type { EnvHandle, Sandbox } from '../sandbox/sandbox.js';
import { fmtS, seconds3 } from '../time.js';
import { EnvLease, type EnvLeaseDeps } from './capacity/env-lease.js';
import { EnvInspector } from './diagnosis.js';
import { EnvCallError, EnvClient, type EnvCaller } from './env-client.js';
import type { ModelAccess } from './model-access.js';
import { resetObservation, textResult, toolError } from './outcomes.js';
import { checkScores, type RewardFn, type Scores } from './reward.js';
import { BuiltinTools } from './builtin-tools.js';
import { TaskVerification, type TurnEnd, type TurnEndOutcome, type VerifierRecord } from './verified-task.js';
import { TrajectoryLog } from '../verifier/trajectory.js';
import { EpisodeCostMeter } from './episode-cost.js';
import type { EpisodeCost } from '../protocol/observations.js';
import { HarnessTask, harnessOf, progressText, type HarnessRun } from './harness-task.js';
import { WAIT_TOOL, WAIT_TOOL_NAME, WaitArgsSchema } from '../protocol/harness.js';
import { keptConnection } from '../http-request.js';

export interface EpisodeSettings {
  /** --reset-timeout: the longest a reset waits in the queue for a slot (a reset may ask for less) */
  resetTimeoutMs: number;
  /** --split-priority: the lane a split's resets wait in (a reset may name its own; others: normal) */
  splitLanes: ReadonlyMap<string, Lane>;
  toolTimeoutMs: number;
  episodeTimeoutMs: number;
  /** --max-steps; undefined: derived per task from its time budget (maxStepsFor, src/defaults.ts) */
  maxSteps: number | undefined;
}

/** what an episode needs: its lease's dependencies (slot, pool, deploys) and its own */
export interface EpisodeDeps extends EnvLeaseDeps {
  /** besides the lease's deploy and teardown: a look at an env that failed a call, and the reconciler's list */
  sandbox: Pick<Sandbox, 'deploy' | 'teardown' | 'diagnose' | 'listEpisodeIds' | 'shell' | 'usage'>;
  bundle: LoadedBundle;
  settings: EpisodeSettings;
  reward: RewardFn;
  log: Logger;
  metrics: Metrics;
  /** sees each episode's life (the web console's history, --record); it can never fail an episode */
  observer?: EpisodeObserver;
  /** how the episode calls its env (default: an EnvClient over HTTP to the env's baseUrl) */
  connect?: (handle: EnvHandle) => EnvCaller;
  /** the model gateway's side of episodes (a credential per env, issued at deploy, revoked before teardown) */
  modelAccess?: ModelAccess;
}

/** Callbacks at the points of an episode's life; a throwing callback is logged and ignored. */
export interface EpisodeObserver {
  onCreated?(ep: Episode): void;
  /** the reset succeeded: `outcome` is what the client receives */
  onReset?(ep: Episode, outcome: StepOutcome): void;
  /** a step answered (`startedAt` in the episode's clock); a step that throws is not reported */
  onStep?(ep: Episode, action: Action, outcome: StepOutcome, startedAt: number): void;
  /** the episode ended (it may still be tearing down); reason, reward, scores, failure are set */
  onEnded?(ep: Episode): void;
  /** a verifier ran (its output is the transcript's, never the model's) */
  onVerifier?(ep: Episode, record: VerifierRecord): void;
  /** a harness episode's harness run ended (its exit and output) */
  onHarness?(ep: Episode, run: HarnessRun): void;
}

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
  private client: EnvCaller | null = null;
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
  private readonly tools: ToolSpec[];
  /** the toolset's built-in tools (the shell), served in the env's container */
  private builtin: BuiltinTools | null = null;
  /** a verified task's turn preparation and verifiers */
  private verification: TaskVerification | null = null;
  /** what the model saw and did, for a verifier's /logs/agent/trajectory.json (a verified task's) */
  private trajectory: TrajectoryLog | null = null;
  /** the task's or the turn's time budget */
  private budgetTimer: NodeJS.Timeout | null = null;
  private turnStartedAt = 0;
  /** a turn's time budget ended it between steps: the next step's reply gives the new turn's prompt instead */
  private turnNotice: string | null = null;
  /** the task's time budget ended the episode between steps: the next step's reply says so */
  private endedBetweenSteps = false;
  /** what its env cost, read as its teardown starts (episode-cost.ts) */
  private readonly meter: EpisodeCostMeter;
  /** a harness episode's harness, run by the server in the env's container (harness-task.ts) */
  private readonly harnessSpec: HarnessManifest | null;
  private harness: HarnessTask | null = null;

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
    this.harnessSpec = harnessOf(deps.bundle, task);
    this.tools = this.harnessSpec ? [WAIT_TOOL] : (deps.bundle.toolsets[task.toolset] ?? []);
    this.lease = new EnvLease(deps, this.id, deps.bundle.envOf(task).name, this.log);
    this.inspector = new EnvInspector(deps.sandbox, () => this.lease.handle, this.ids, this.log);
    this.meter = new EpisodeCostMeter({
      usage: deps.sandbox.usage,
      env: () => ({ handle: this.lease.handle, since: this.lease.envSince }),
      now: this.now,
      log: this.log,
      metrics: deps.metrics,
      split: task.split,
    });
    this.tornDown = new Promise((r) => (this.resolveTornDown = r));
    this.notify((o) => o.onCreated?.(this));
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
    const s = (a?: number, b?: number) => (a === undefined ? 0 : seconds3((b ?? this.now()) - a));
    const t: Timings = {
      queued_s: s(this.createdAt, this.t.queued),
      deploy_s: s(this.t.queued, this.t.running ?? this.t.ended),
      running_s: s(this.t.running, this.t.ended),
    };
    // only a server with a warm pool says where the env came from
    if (this.lease.withPool) {
      const pooled = this.lease.pooled;
      t.pooled = pooled !== null;
      if (pooled) t.pool_wait_s = seconds3(pooled.waitedMs);
    }
    return t;
  }

  /**
   * Waits for a slot, gets the env and resets it. Throws CapacityError, ShuttingDownError,
   * DeployFailedError or an AbortError (the episode was closed meanwhile); the episode is then
   * torn down and its slot, if it had one, freed.
   */
  async start(): Promise<StepOutcome<ResetObservation>> {
    const { admission, settings, metrics } = this.deps;
    this.log.info({ event: 'queued', lane: this.lane, waiting: admission.waitingCount, active: admission.activeCount }, 'episode queued');
    try {
      await this.lease.takeSlot({ queueTimeoutMs: this.queueTimeoutMs, signal: this.abort.signal, lane: this.lane });
    } catch (e) {
      this.t.queued = this.now();
      metrics.queueWait.observe({ lane: this.lane }, (this.t.queued - this.createdAt) / 1000);
      this.endWith('closed');
      void this.teardown();
      throw e;
    }
    this.t.queued = this.now();
    metrics.queueWait.observe({ lane: this.lane }, (this.t.queued - this.createdAt) / 1000);
    this.phase = 'deploying';
    try {
      await this.resetEnv(await this.lease.env(this.abort.signal, this.deps.modelAccess?.doorFor(this.id))).catch(async (e: unknown) => {
        // a pooled env that died before the first observation: a fresh one, once
        if (!(await this.pooledEnvDied(e))) throw e;
        await this.resetEnv(await this.lease.replaceDeadPooledEnv(this.abort.signal));
      });
    } catch (e) {
      if (isAbortError(e) || this.abort.signal.aborted) {
        this.endWith('closed');
        void this.teardown();
        throw abortError('episode closed while deploying');
      }
      const failure =
        e instanceof TurnSetupError
          ? makeFailure('setup_failed', 'reset', e.message, this.ids, { log_tail: e.output })
          : await this.inspector.deployFailure(e, this.envResetCallMs());
      this.failure = failure;
      metrics.envFailures.inc({ reason: failure.reason });
      this.log.warn({ event: 'deploy_failed', reason: failure.reason, message: failure.message }, 'deploy failed');
      this.endWith('env_failed');
      void this.teardown();
      throw new DeployFailedError(failure);
    }
    this.phase = 'running';
    this.t.running = this.now();
    metrics.deploy.observe((this.t.running - this.t.queued) / 1000);
    // the last stage of an episode's own deploy (a pooled env's deploy was not the episode's)
    if (!this.lease.pooled) metrics.deployStage.observe({ stage: 'env_reset' }, (this.t.running - this.t.deployed!) / 1000);
    this.episodeTimer = setTimeout(() => void this.onEpisodeTimeout(), settings.episodeTimeoutMs);
    this.episodeTimer.unref?.();
    this.turnStartedAt = this.t.running;
    // a harness episode's time budgets are its harness's (harness-task.ts)
    if (!this.harness) this.armBudget();
    this.log.info({ event: 'reset', queued_s: this.timings().queued_s, deploy_s: this.timings().deploy_s }, 'episode running');
    const outcome = resetObservation(this, this.tools, this.timings());
    if (this.harness) outcome.observation.harness = true;
    this.trajectory?.reset(outcome.observation);
    this.notify((o) => o.onReset?.(this, outcome));
    if (this.modelEnd) this.modelAccessEnded(this.modelEnd.reason, this.modelEnd.message);
    if (this.harness) void this.driveHarness(this.harness);
    return outcome;
  }

  /** Attaches to the env (its client, its death signal, its container for built-in tools) and calls its /reset (an http env's). */
  private async resetEnv(handle: EnvHandle): Promise<void> {
    const shellEnv = this.deps.bundle.envOf(this.task).spec.kind === 'shell';
    this.client = shellEnv ? null : this.deps.connect ? this.deps.connect(handle) : new EnvClient(handle.baseUrl, handle.secret, keptConnection(handle));
    const gone = handle.gone;
    this.callSignal = gone ? AbortSignal.any([this.abort.signal, gone]) : this.abort.signal;
    if (gone) {
      // A death during a step is that step's to report: its call is cut short (callSignal) and
      // fails with the call's name, so the transcript keeps the call. The check runs after the
      // step in flight, through the step queue; if no step claimed the death, it happened
      // between calls and ends the episode now.
      gone.addEventListener(
        'abort',
        () => {
          this.queue = this.queue.then(async () => {
            if (this.phase === 'running' && !this.done && this.lease.handle === handle)
              await this.failFromEnv('tool', `the env died between calls: ${(gone.reason as Error)?.message}`, null);
          });
        },
        { once: true },
      );
    }
    this.t.deployed = this.now();
    const pooled = this.lease.pooled;
    if (pooled) {
      this.log.info(
        {
          event: 'deployed',
          deploy_s: seconds3(this.t.deployed - this.t.queued!),
          pooled: true,
          env_id: this.envId,
          pool_wait_s: seconds3(pooled.waitedMs),
        },
        'env taken from the warm pool',
      );
    } else {
      this.log.info({ event: 'deployed', deploy_s: seconds3(this.t.deployed - this.t.queued!) }, 'env deployed');
    }
    await this.attachContainer(handle);
    if (!this.client) return;
    const res = await this.client.request(
      'POST',
      '/reset',
      { task_id: this.task.task_id, data: this.task.data, seed: this.seed } satisfies EnvResetRequest,
      this.envResetCallMs(),
      this.callSignal,
    );
    if (res.status !== 200) {
      throw new EnvCallError('bad_response', `the env answered /reset with HTTP ${res.status}: ${JSON.stringify(res.body)?.slice(0, 300)}`, res.status);
    }
  }

  /** The built-in tools and a verified task's first turn, in the env's container. */
  private async attachContainer(handle: EnvHandle): Promise<void> {
    const shell = this.deps.sandbox.shell;
    const exec = shell?.exec(handle) ?? null;
    const envSpec = this.deps.bundle.envOf(this.task).spec;
    // who the agent is, resolved before anything of the agent's runs (container/users.ts)
    const agentUser = exec ? new AgentUser(exec, envSpec.agent_user) : null;
    this.builtin = BuiltinTools.of(this.deps.bundle, this.task, exec, agentUser, () => this.inspector.gone());
    if (this.harnessSpec) {
      if (!exec || !agentUser) throw new Error(`task ${this.task.task_id} names a harness, but the sandbox gives no access to its env's container`);
      const access = this.deps.modelAccess;
      this.harness = new HarnessTask(this.harnessSpec, this.task, exec, {
        ...(envSpec.workdir ? { workdir: envSpec.workdir } : {}),
        user: await agentUser.get(),
        use: () => access?.gateway.use(this.id) ?? null,
        now: this.now,
      });
    }
    if (!TaskVerification.needed(this.task)) return;
    if (!exec || !shell || !agentUser) throw new Error(`task ${this.task.task_id} is verified in its env's container, but the sandbox gives no access to it`);
    const deployed = this.lease.spec;
    const env = {
      exec,
      agentUser,
      companion: () => {
        if (!deployed) throw new Error("the env's spec is not known: no clean verifier can be made");
        return shell.companion(handle, deployed, this.abort.signal);
      },
      trajectory: () => this.trajectory?.build({ id: this.id }),
    };
    this.trajectory = new TrajectoryLog();
    this.verification = new TaskVerification(this.deps.bundle, this.task, env, this.builtin, this.deps.reward, (r) => this.onVerifierRun(r));
    const ready = await this.verification.start();
    if (!ready.ok) throw new TurnSetupError(ready.message, ready.output);
  }

  private onVerifierRun(r: VerifierRecord): void {
    this.log.info(
      {
        event: 'verified',
        turn: r.turn,
        scope: r.scope,
        status: r.status,
        scores: r.scores,
        exit_code: r.exit_code,
        duration_s: r.duration_s,
        killed: r.agent_processes_killed,
      },
      `verifier ${r.status}`,
    );
    this.notify((o) => o.onVerifier?.(this, r));
  }

  /** the /reset of an env taken from the pool got no answer because the env is gone */
  private async pooledEnvDied(e: unknown): Promise<boolean> {
    if (!this.lease.pooled || this.abort.signal.aborted) return false;
    return this.inspector.pooledEnvDied(e);
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
    if (this.harnessSpec) return this.harnessStep(action);
    this.stepsUnanswered++;
    const run = this.queue.then(async () => {
      const startedAt = this.now();
      let out = await this.doStep(action);
      // a verifier the call itself triggered (end_turn, the last step) has run by now: the calls before it are what it saw
      if (action.type === 'call_tool')
        this.trajectory?.call({ step: this.steps, turn: this.turn, tool: action.tool_name, arguments: action.arguments, observation: out.observation });
      // the reply that ends the episode says what it cost (read before the env's removal, bounded)
      if (out.done) out = await this.meter.onto(out);
      if (out.done) this.endReported = true;
      if (action.type === 'call_tool' && this.log.isLevelEnabled('debug')) this.logToolCall(action, out, startedAt);
      this.stepsUnanswered--;
      this.notify((o) => o.onStep?.(this, action, out, startedAt));
      return out;
    });
    this.queue = run.catch(() => {
      this.stepsUnanswered--;
    });
    return run;
  }

  /**
   * A harness episode's step: `wait` (until the episode ends, or its timeout_s, for the progress)
   * or list_tools. The first reply after its end carries the ending; later steps are refused.
   */
  private async harnessStep(action: Action): Promise<StepOutcome> {
    if (this.phase === 'waiting' || this.phase === 'deploying') {
      throw new EpisodeStateError('no_episode', 'the episode is not running yet; wait for the reset reply');
    }
    if (this.done && this.endReported) throw new EpisodeStateError('episode_done', `episode ${this.id} is done (${this.endReason}); reset to play another`);
    if (action.type === 'list_tools') return { observation: { tools: this.tools }, reward: null, done: false };
    const name = action.tool_name;
    if (name !== WAIT_TOOL_NAME) {
      return toolError(name, 'tool_not_found', `a harness episode is run by the server: its one tool is ${WAIT_TOOL_NAME} (no "${name}")`);
    }
    const args = WaitArgsSchema.safeParse(action.arguments ?? {});
    if (!args.success) return toolError(name, 'invalid_args', args.error.issues.map((i) => `${i.path.join('.') || 'arguments'}: ${i.message}`).join('; '));
    if (!this.done) await abortableSleep((args.data.timeout_s ?? HARNESS.waitDefaultS) * 1000, this.abort.signal);
    const progress = this.harness?.progress() ?? null;
    if (!this.done) {
      return {
        observation: { tool_name: name, result: textResult(progress ? progressText(progress, false) : 'The harness has not started.', progress), error: null },
        reward: null,
        done: false,
      };
    }
    this.endReported = true;
    const ending = this.endedOutcome(null).observation as Ending;
    const text = progress ? progressText(progress, true) : 'The episode ended.';
    const error = this.failure ? { error_type: toolErrorType(this.failure), message: this.failure.message } : null;
    // like every reply that ends an episode, it says what the env cost (episode-cost.ts)
    return this.meter.onto({ observation: { ...ending, tool_name: name, result: textResult(text, progress), error }, reward: this.reward, done: true });
  }

  /** Runs the harness turn by turn, each run's end scored as end_turn (or, past its time budget, the episode's end) would score it. */
  private async driveHarness(h: HarnessTask): Promise<void> {
    try {
      while (!this.done) {
        const run = await h.runTurn(this.turn - 1);
        if (this.done) return;
        this.log.info(
          { event: 'harness_ended', turn: run.turn, ended: run.ended, exit_code: run.exitCode, duration_s: seconds3(run.durationMs) },
          'the harness ended',
        );
        this.notify((o) => o.onHarness?.(this, run));
        if (!this.verification) {
          await this.envFinish('turns_ended');
          return;
        }
        const out = await this.verifiedTurnEnd(run.ended === 'time_budget' ? 'episode_end' : 'end_turn', null);
        if (out.done) return;
      }
    } catch (e) {
      if (!this.done) await this.failFromEnv('tool', `the harness could not run in the env's container: ${(e as Error).message}`, null);
    }
  }

  /** One debug line per tool call: which, how many argument bytes, how long, whether it failed. */
  private logToolCall(action: Action & { type: 'call_tool' }, out: StepOutcome, startedAt: number): void {
    const obs = out.observation as Partial<CallObservation>;
    const args = action.arguments === undefined ? {} : action.arguments;
    let argBytes: number | null;
    try {
      argBytes = Buffer.byteLength(JSON.stringify(args) ?? '');
    } catch {
      argBytes = null; // nested too deep to serialise: refused as invalid_args anyway
    }
    const isError = obs.error != null || obs.result?.is_error === true;
    this.log.debug(
      {
        event: 'tool_call',
        tool: action.tool_name,
        arg_bytes: argBytes,
        ms: this.now() - startedAt,
        is_error: isError,
        ...(obs.error ? { error_type: obs.error.error_type } : {}),
        step: this.steps,
        done: out.done,
      },
      `tool ${action.tool_name}`,
    );
  }

  private async doStep(action: Action): Promise<StepOutcome> {
    if (this.phase === 'waiting' || this.phase === 'deploying') {
      throw new EpisodeStateError('no_episode', 'the episode is not running yet; wait for the reset reply');
    }
    if (this.done && !this.endReported && (this.endReason === 'env_failed' || this.endedBetweenSteps)) {
      // it ended between steps (episode timeout, the task's time budget): this reply is the first to tell the client
      return this.endedOutcome(action.type === 'call_tool' ? action.tool_name : null);
    }
    if (this.done) {
      throw new EpisodeStateError('episode_done', `episode ${this.id} is done (${this.endReason}); reset to play another`);
    }
    this.deps.metrics.steps.inc();
    if (action.type === 'list_tools') {
      return { observation: { tools: this.tools }, reward: null, done: false };
    }
    const toolName = action.tool_name;
    const args = action.arguments === undefined ? {} : action.arguments;
    if (this.turnNotice !== null) return this.turnNoticeOutcome(toolName);
    this.steps++;
    let outcome: StepOutcome<CallObservation | Ending>;
    if (typeof args !== 'object' || args === null || Array.isArray(args)) {
      const got = args === null ? 'null' : Array.isArray(args) ? 'an array' : `a ${typeof args}`;
      outcome = toolError(
        toolName,
        'invalid_args',
        `arguments must be a JSON object of the tool's parameters, got ${got}${typeof args === 'string' ? ' (pass the object itself, not a JSON string of it)' : ''}`,
      );
    } else if (jsonDepthExceeds(args, MAX_ARGUMENT_DEPTH)) {
      outcome = toolError(toolName, 'invalid_args', `arguments are nested deeper than ${MAX_ARGUMENT_DEPTH} levels; no tool takes that`);
    } else if (toolName === END_TURN) {
      outcome = await this.endTurn(args as Record<string, unknown>);
    } else if (!this.tools.some((t) => t.name === toolName)) {
      outcome = toolError(
        toolName,
        'tool_not_found',
        `no tool "${toolName}" in toolset "${this.task.toolset}"; tools: ${this.tools.map((t) => t.name).join(', ')}`,
      );
    } else if (this.builtin?.has(toolName)) {
      outcome = await this.callBuiltin(toolName, args as Record<string, unknown>);
    } else {
      outcome = await this.callTool(toolName, args as Record<string, unknown>);
    }
    if (!outcome.done && this.steps >= maxStepsFor(this.task, this.deps.settings.maxSteps)) {
      const ended = await this.finish('max_steps');
      return { observation: { ...outcome.observation, ...ended.observation }, reward: ended.reward, done: true };
    }
    return outcome;
  }

  private async endTurn(args: Record<string, unknown>): Promise<StepOutcome<CallObservation | Ending>> {
    const answer = typeof args.answer === 'string' ? args.answer : null;
    if (this.verification) {
      const ended = await this.verifiedTurnEnd('end_turn', END_TURN);
      // the next turn's prompt, or a failure's reply (its error kept)
      if (!ended.done || (ended.observation as Ending).failure) return ended;
      const early = this.turn < this.task.turns.length;
      const text = early ? 'The turn scored under its min_reward: the episode ends here and is scored.' : 'The last turn ended; the episode is scored.';
      return {
        observation: { ...ended.observation, tool_name: END_TURN, result: textResult(text, { answer }), error: null },
        reward: ended.reward,
        done: true,
      };
    }
    if (this.turn < this.task.turns.length) return this.nextTurn(END_TURN);
    const ended = await this.finish('turns_ended');
    return {
      observation: { tool_name: END_TURN, result: textResult('The last turn ended; the episode is scored.', { answer }), error: null, ...ended.observation },
      reward: ended.reward,
      done: true,
    };
  }

  /** The next turn begins: its prompt is the reply (to end_turn, or to the call a turn's time budget preempted). */
  private nextTurn(toolName: string): StepOutcome<CallObservation> {
    this.turn++;
    this.turnStartedAt = this.now();
    this.armBudget();
    const prompt = this.task.turns[this.turn - 1]!;
    return {
      observation: { tool_name: toolName, result: textResult(prompt, { turn: this.turn, prompt }), error: null, turn: this.turn },
      reward: null,
      done: false,
    };
  }

  /**
   * A verified task's turn ends (end_turn, its time budget, or the episode's end): its verifier or
   * the task's runs, then the next turn is prepared, or the episode is scored (or failed).
   */
  private async verifiedTurnEnd(
    how: TurnEnd,
    toolName: string | null,
    reason: 'turns_ended' | 'max_steps' = 'turns_ended',
  ): Promise<StepOutcome<CallObservation | Ending>> {
    let r: TurnEndOutcome;
    try {
      r = await this.verification!.turnEnded(this.turn - 1, how);
    } catch (e) {
      if (this.done) return this.endedOutcome(toolName);
      return this.failFromEnv('finish', `the end of turn ${this.turn} failed in the env's container: ${(e as Error).message}`, toolName);
    }
    if (this.done) return this.endedOutcome(toolName); // the episode timed out or closed meanwhile
    switch (r.kind) {
      case 'next':
        return this.nextTurn(toolName ?? END_TURN);
      case 'scored':
        if (r.stoppedEarly) this.log.info({ event: 'stopped_early', why: r.stoppedEarly }, 'a turn scored under its min_reward: the episode ends');
        return this.settleScores(r.scores, reason, 'finish');
      case 'unverified':
        return this.envFinish(reason);
      case 'failed':
        return this.fail(r.reason, 'finish', r.message, toolName, { log_tail: r.tail });
      case 'setup_failed':
        return this.fail('setup_failed', 'reset', r.message, toolName, { log_tail: r.output });
    }
  }

  /** The reply to a call made after a turn's time budget ended its turn: the call is not run; the new turn's prompt is the answer. */
  private turnNoticeOutcome(toolName: string): StepOutcome<CallObservation> {
    const prompt = this.turnNotice!;
    this.turnNotice = null;
    const text = `[turn ${this.turn - 1}'s time budget passed: the turn ended and this call was not run]\n${prompt}`;
    return {
      observation: { tool_name: toolName, result: textResult(text, { turn: this.turn, prompt, budget_passed: true }), error: null, turn: this.turn },
      reward: null,
      done: false,
    };
  }

  /** The task's or the current turn's time budget, whichever passes first, from now on. */
  private armBudget(): void {
    if (this.budgetTimer) clearTimeout(this.budgetTimer);
    this.budgetTimer = null;
    const task = this.task.time_budget_s;
    const turn = this.task.per_turn?.[this.turn - 1]?.time_budget_s;
    const running = this.t.running ?? this.now();
    const taskLeft = task === undefined ? Infinity : running + task * 1000 - this.now();
    const turnLeft = turn === undefined ? Infinity : this.turnStartedAt + turn * 1000 - this.now();
    const left = Math.min(taskLeft, turnLeft);
    if (left === Infinity) return;
    const how: TurnEnd = taskLeft <= turnLeft || this.turn === this.task.turns.length ? 'episode_end' : 'end_turn';
    this.budgetTimer = setTimeout(() => this.onBudget(how), Math.max(0, left));
    this.budgetTimer.unref?.();
  }

  /** A time budget passed: after the step in flight (a shell command in flight is stopped), the turn (or the episode) ends as end_turn would end it. */
  private onBudget(how: TurnEnd): void {
    this.builtin?.interrupt(`the ${how === 'episode_end' ? "task's" : "turn's"} time budget passed while it ran`);
    this.queue = this.queue.then(async () => {
      if (this.done || this.phase !== 'running') return;
      const endsEpisode = how === 'episode_end' || this.turn === this.task.turns.length;
      this.log.info({ event: 'time_budget', turn: this.turn, ends: endsEpisode ? 'episode' : 'turn' }, 'a time budget passed');
      this.endedBetweenSteps = endsEpisode;
      const out = this.verification ? await this.verifiedTurnEnd(how, null) : endsEpisode ? await this.finish('turns_ended') : this.nextTurn(END_TURN);
      // scored under a min_reward, or failed: the episode ended between steps too
      if (out.done) this.endedBetweenSteps = true;
      else this.turnNotice = this.task.turns[this.turn - 1]!;
    });
  }

  /** A call of a built-in tool (the shell), in the env's container. */
  private async callBuiltin(name: string, args: Record<string, unknown>): Promise<StepOutcome<CallObservation | Ending>> {
    const started = this.now();
    try {
      const out = await this.builtin!.call(name, args);
      this.deps.metrics.toolCall.observe({ outcome: out.observation.error ? 'error' : 'ok' }, (this.now() - started) / 1000);
      return out;
    } catch (e) {
      this.deps.metrics.toolCall.observe({ outcome: 'failed' }, (this.now() - started) / 1000);
      if (this.done) return this.endedOutcome(name);
      const said = e instanceof ShellStartError ? { outOfProcesses: e.outOfProcesses, shellBroken: e.brokenAfterRunning ? e.message : null } : {};
      return this.failFromEnv('tool', `tool \`${name}\` failed in the env's container: ${(e as Error).message}`, name, said);
    }
  }

  private async callTool(name: string, args: Record<string, unknown>): Promise<StepOutcome<CallObservation | Ending>> {
    const started = this.now();
    const client = this.client!;
    const timeoutMs = this.deps.settings.toolTimeoutMs;
    let res;
    try {
      res = await this.envCall(client, '/tools/call', { name, arguments: args } satisfies EnvToolCallRequest, timeoutMs);
    } catch (e) {
      this.deps.metrics.toolCall.observe({ outcome: 'failed' }, (this.now() - started) / 1000);
      if (this.done) return this.endedOutcome(name); // the episode timed out or closed meanwhile
      const verdict = await this.inspector.judgeCall(e);
      if (verdict === 'ask_env') return this.failFromEnv('tool', `tool \`${name}\` failed: ${(e as Error).message}`, name);
      // an answer too large to read is the tool's failure, not the env's end: the episode goes on
      if ('tool_error' in verdict) return toolError(name, verdict.tool_error, `tool \`${name}\` failed: ${(e as Error).message}`);
      return this.fail(verdict.reason, 'tool', `tool \`${name}\` did not answer within tool_timeout (${fmtS(timeoutMs)})`, name);
    }
    this.deps.metrics.toolCall.observe({ outcome: res.status === 200 ? 'ok' : 'error' }, (this.now() - started) / 1000);
    if (res.status === 404 || res.status === 400) {
      const body = (res.body ?? {}) as { error?: string; message?: string };
      const kind = res.status === 404 ? 'tool_not_found' : 'invalid_args';
      return toolError(name, kind, body.message ?? body.error ?? `the env refused the call (HTTP ${res.status})`);
    }
    if (res.status !== 200) {
      return toolError(name, 'execution_error', `the env answered HTTP ${res.status}: ${JSON.stringify(res.body)?.slice(0, 500)}`);
    }
    const parsed = ToolCallReplySchema.safeParse(res.body);
    if (!parsed.success) {
      return toolError(name, 'transport_error', 'the env answered the tool call with a malformed body');
    }
    const reply = parsed.data;
    const text = reply.text ?? (typeof reply.result === 'string' ? reply.result : JSON.stringify(reply.result ?? null));
    // A tool's own error (the env answered is_error) is the model's to read: it stays in
    // `result` with is_error true, as OpenEnv's CallToolObservation puts it; `error` is kept for
    // what went wrong around the tool (bad arguments, unknown tool, timeout, transport).
    const observation: CallObservation = { tool_name: name, result: textResult(text, reply.result ?? null, reply.is_error === true), error: null };
    if (reply.done) {
      const ended = this.settleScores(reply.scores, 'finished', 'tool');
      return { observation: { ...observation, ...ended.observation }, reward: ended.reward, done: true };
    }
    return { observation, reward: null, done: false };
  }

  /** one call to the env, cut short when the episode is aborted or the env dies */
  private envCall(client: EnvCaller, path: string, body: unknown, timeoutMs: number) {
    return client.request('POST', path, body, timeoutMs, this.callSignal);
  }

  /** Scores the episode (a verified task's verifier, else the env's /finish) and ends it. */
  private finish(reason: 'turns_ended' | 'max_steps'): Promise<StepOutcome<CallObservation | Ending>> {
    if (this.verification) return this.verifiedTurnEnd('episode_end', END_TURN, reason);
    return this.envFinish(reason);
  }

  /** Asks the env for its scores and ends the episode. */
  private async envFinish(reason: 'turns_ended' | 'max_steps'): Promise<StepOutcome<CallObservation | Ending>> {
    const timeoutMs = this.deps.settings.toolTimeoutMs;
    let res;
    try {
      res = await this.envCall(this.client!, '/finish', {}, timeoutMs);
    } catch (e) {
      if (this.done) return this.endedOutcome(END_TURN);
      const verdict = await this.inspector.judgeCall(e);
      if (verdict === 'ask_env' || 'tool_error' in verdict) {
        return this.failFromEnv('finish', `the env failed to score the episode: ${(e as Error).message}`, END_TURN);
      }
      return this.fail(verdict.reason, 'finish', `the env did not answer /finish within tool_timeout (${fmtS(timeoutMs)})`, END_TURN);
    }
    const parsed = FinishReplySchema.safeParse(res.body);
    if (res.status !== 200 || !parsed.success) {
      return this.fail('invalid_scores', 'finish', invalidScoresMessage('no_scores_reply', `HTTP ${res.status}`), END_TURN);
    }
    return this.settleScores(parsed.data.scores, reason, 'finish');
  }

  private settleScores(raw: unknown, reason: EndReason, phase: FailurePhase): StepOutcome<CallObservation | Ending> {
    const checked = checkScores(raw, this.deps.bundle.manifest.scores);
    if ('problem' in checked) {
      return this.fail('invalid_scores', phase, invalidScoresMessage(checked.outOfRange ? 'out_of_range' : 'not_scores', checked.problem), null);
    }
    let reward: number;
    try {
      reward = this.deps.reward(checked.scores);
      if (!Number.isFinite(reward)) throw new Error(`the reward function returned ${reward}`);
    } catch (e) {
      return this.fail('invalid_scores', phase, invalidScoresMessage('no_reward', `${JSON.stringify(checked.scores)}: ${(e as Error).message}`), null);
    }
    this.scores = checked.scores;
    this.reward = reward;
    this.endWith(reason);
    this.deps.metrics.rewards.observe({ split: this.task.split }, reward);
    void this.teardown();
    return { observation: { done: true, reward, scores: checked.scores, end_reason: reason, timings: this.timings() }, reward, done: true };
  }

  /** An env that stopped answering: the sandbox's look at it decides why (failures.ts). */
  private async failFromEnv(
    phase: FailurePhase,
    message: string,
    toolName: string | null,
    said?: CallEvidence,
  ): Promise<StepOutcome<CallObservation | Ending>> {
    const v = await this.inspector.verdict(said);
    return this.fail(v.reason, phase, `${message} (${v.what})`, toolName, v.extra);
  }

  private fail(
    reason: FailureReason,
    phase: FailurePhase,
    message: string,
    toolName: string | null,
    extra: FailureExtra = {},
  ): StepOutcome<CallObservation | Ending> {
    if (!this.done) {
      this.failure = makeFailure(reason, phase, message, this.ids, extra);
      this.deps.metrics.envFailures.inc({ reason });
      this.log.warn({ event: 'env_failed', reason, phase, message }, 'env failed');
      this.endWith('env_failed');
      void this.teardown();
    }
    return this.endedOutcome(toolName);
  }

  /** The reply for a step that finds (or makes) the episode ended. */
  private endedOutcome(toolName: string | null): StepOutcome<CallObservation | Ending> {
    const ending: Ending = { done: true, reward: this.reward, end_reason: this.endReason ?? 'closed', timings: this.timings() };
    if (this.failure) ending.failure = this.failure;
    if (this.scores) ending.scores = this.scores;
    if (this.harness) ending.harness = this.harness.progress();
    const observation = toolName
      ? {
          tool_name: toolName,
          result: null,
          error: { error_type: toolErrorType(this.failure), message: this.failure?.message ?? 'the episode ended' },
          ...ending,
        }
      : ending;
    return { observation, reward: this.reward, done: true };
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
    if (this.budgetTimer) clearTimeout(this.budgetTimer);
    if (reason !== 'closed' || this.t.running !== undefined) this.deps.metrics.episodesEnded.inc({ end_reason: reason });
    this.log.info(
      {
        event: 'ended',
        end_reason: reason,
        reward: this.reward,
        steps: this.steps,
        ...this.timings(),
        ...(this.failure ? { failure_reason: this.failure.reason } : {}),
      },
      'episode ended',
    );
    this.notify((o) => o.onEnded?.(this));
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
      this.harness?.noteUse();
      await this.deps.modelAccess?.revoke(this.id).catch((e: unknown) => this.log.error({ err: (e as Error).message }, 'revoking the model credential failed'));
      await this.builtin?.close();
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

/** A turn's setup (its upload's setup.sh, its ready check) failed before its prompt: the episode cannot start. */
class TurnSetupError extends Error {
  override readonly name = 'TurnSetupError';
  constructor(
    message: string,
    readonly output: string,
  ) {
    super(message);
  }
}
