/**
 * One episode: waiting → deploying → running → done → torn down. It holds an admission slot from
 * the start of its deploy to the end of its teardown, and tears down exactly once whatever ends
 * it (the env, the client, a budget, a failure, the server stopping).
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { abortError, isAbortError } from '../abort.js';
import { END_TURN, type LoadedBundle, type Task, type ToolSpec } from '../bundle/index.js';
import { isPlainObject } from '../bundle/schema.js';
import { DIAGNOSE_RETRY, MAX_ARGUMENT_DEPTH } from '../defaults.js';
import { DeployFailedError, EpisodeStateError, makeFailure, type Failure, type FailurePhase, type FailureReason } from '../errors.js';
import type { Metrics } from '../metrics.js';
import { jsonDepthExceeds, type Action } from '../protocol/frames.js';
import type {
  CallObservation,
  EndReason,
  Ending,
  EpisodeState,
  Phase,
  ResetObservation,
  StepOutcome,
  Timings,
  ToolErrorType,
  ToolResult,
  ToolsObservation,
  Transport,
} from '../protocol/observations.js';
import { SandboxError, type EnvDiagnosis, type EnvHandle, type EnvSpec, type Sandbox } from '../sandbox/sandbox.js';
import { fmtS, seconds3 } from '../time.js';
import type { Admission, Slot } from './admission.js';
import type { DeployLimiter } from './deploy-limiter.js';
import type { PooledEnv, WarmPool } from './pool.js';
import { EnvCallError, EnvClient, FinishReplySchema, ToolCallReplySchema } from './env-client.js';
import { checkScores, type RewardFn, type Scores } from './reward.js';

export interface EpisodeSettings {
  resetTimeoutMs: number;
  toolTimeoutMs: number;
  episodeTimeoutMs: number;
  maxSteps: number;
}

export interface EpisodeDeps {
  bundle: LoadedBundle;
  sandbox: Sandbox;
  admission: Admission;
  /** --max-concurrent-deploys; absent: deploys are not limited */
  deploys?: DeployLimiter;
  /** --warm-pool above 0: resets take pooled envs, and pooled envs' slots */
  pool?: WarmPool;
  envSpec: (envName: string) => Promise<EnvSpec>;
  settings: EpisodeSettings;
  reward: RewardFn;
  log: Logger;
  metrics: Metrics;
  now?: () => number;
  /** sees each episode's life (the web console's history, --record); it can never fail an episode */
  observer?: EpisodeObserver;
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
}

export class Episode {
  readonly id: string;
  /**
   * The id its env's resources are labelled with: the episode id for an env deployed for it, the
   * pooled env's own id (`pool-…`) for one taken from the warm pool.
   */
  envId: string;
  /** set when the env came from the warm pool: how long it waited there (ms) */
  private pooled: { waitedMs: number } | null = null;
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

  private slot: Slot | null = null;
  private handle: EnvHandle | null = null;
  private client: EnvClient | null = null;
  private deployStarted = false;
  private readonly abort = new AbortController();
  /** aborts env calls: the episode closing, or the env's container dying (handle.gone) */
  private callSignal: AbortSignal = this.abort.signal;
  /** env calls in flight: a death during one fails that call (and is reported as its outcome) */
  private callsInFlight = 0;
  private episodeTimer: NodeJS.Timeout | null = null;
  private resolveTornDown!: () => void;
  private teardownStarted = false;
  /** a step reply has told the client the episode is done */
  private endReported = false;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly t: { queued?: number; deployed?: number; running?: number; ended?: number } = {};
  private readonly now: () => number;
  private readonly log: Logger;
  private readonly tools: ToolSpec[];

  constructor(
    private readonly deps: EpisodeDeps,
    readonly task: Task,
    readonly seed: number | null,
    readonly transport: Transport,
    /** the reset's own `episode_id` label, if it gave one */
    readonly clientLabel?: string,
  ) {
    this.id = randomUUID();
    this.envId = this.id;
    this.now = deps.now ?? Date.now;
    this.createdAt = this.now();
    this.log = deps.log.child({ episode_id: this.id, task_id: task.task_id, ...(clientLabel ? { client_episode_id: clientLabel } : {}) });
    this.tools = deps.bundle.toolsets[task.toolset] ?? [];
    this.tornDown = new Promise((r) => (this.resolveTornDown = r));
    this.notify((o) => o.onCreated?.(this));
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
    if (this.deps.pool) {
      t.pooled = this.pooled !== null;
      if (this.pooled) t.pool_wait_s = seconds3(this.pooled.waitedMs);
    }
    return t;
  }

  /**
   * Waits for a slot, deploys the env and resets it. Throws CapacityError, ShuttingDownError,
   * DeployFailedError or an AbortError (the episode was closed meanwhile); the episode is then
   * torn down and its slot, if it had one, freed.
   */
  async start(resetTimeoutMs: number): Promise<StepOutcome<ResetObservation>> {
    const { admission, sandbox, settings, metrics, pool, deploys } = this.deps;
    this.log.info({ event: 'queued', waiting: admission.waitingCount, active: admission.activeCount }, 'episode queued');
    const envName = this.deps.bundle.envOf(this.task).name;
    let pooledEnv: PooledEnv | null = null;
    try {
      if (pool) {
        const lease = await pool.acquire(envName, {
          timeoutMs: resetTimeoutMs,
          signal: this.abort.signal,
          adopt: (envId) => {
            this.envId = envId;
            this.deployStarted = true;
          },
        });
        this.slot = lease.slot;
        pooledEnv = lease.pooled;
      } else {
        this.slot = await admission.acquire({ timeoutMs: resetTimeoutMs, signal: this.abort.signal });
      }
    } catch (e) {
      this.t.queued = this.now();
      metrics.queueWait.observe((this.t.queued - this.createdAt) / 1000);
      this.endWith('closed');
      void this.teardown();
      throw e;
    }
    this.t.queued = this.now();
    metrics.queueWait.observe((this.t.queued - this.createdAt) / 1000);
    this.phase = 'deploying';
    let spec: EnvSpec | null = null;
    try {
      if (pooledEnv) {
        spec = pooledEnv.spec;
        this.handle = pooledEnv.handle;
        this.pooled = { waitedMs: pooledEnv.waitedMs };
        this.throwIfAborted();
      } else {
        spec = await this.deps.envSpec(envName);
        this.throwIfAborted();
        this.deployStarted = true;
        const deploy = () => sandbox.deploy({ episodeId: this.id, env: spec!, signal: this.abort.signal });
        this.handle = await (deploys ? deploys.run(deploy, { priority: 'reset', signal: this.abort.signal }) : deploy());
      }
      this.client = new EnvClient(this.handle.baseUrl, this.handle.secret);
      const gone = this.handle.gone;
      if (gone) {
        this.callSignal = AbortSignal.any([this.abort.signal, gone]);
        // a death between calls ends the episode at once (one during a call fails that call)
        gone.addEventListener(
          'abort',
          () => {
            if (this.phase === 'running' && !this.done && this.callsInFlight === 0)
              void this.failFromEnv('tool', `the env died between calls: ${(gone.reason as Error)?.message}`, null);
          },
          { once: true },
        );
      }
      this.t.deployed = this.now();
      if (this.pooled) {
        this.log.info(
          {
            event: 'deployed',
            deploy_s: seconds3(this.t.deployed - this.t.queued),
            pooled: true,
            env_id: this.envId,
            pool_wait_s: seconds3(this.pooled.waitedMs),
          },
          'env taken from the warm pool',
        );
      } else {
        this.log.info({ event: 'deployed', deploy_s: seconds3(this.t.deployed - this.t.queued) }, 'env deployed');
      }
      const res = await this.client.request(
        'POST',
        '/reset',
        { task_id: this.task.task_id, data: this.task.data, seed: this.seed },
        resetBudgetMs(settings, spec),
        this.callSignal,
      );
      if (res.status !== 200) {
        throw new EnvCallError('bad_response', `the env answered /reset with HTTP ${res.status}: ${JSON.stringify(res.body)?.slice(0, 300)}`, res.status);
      }
    } catch (e) {
      if (isAbortError(e) || this.abort.signal.aborted) {
        this.endWith('closed');
        void this.teardown();
        throw abortError('episode closed while deploying');
      }
      const failure = await this.deployFailure(e, spec);
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
    this.episodeTimer = setTimeout(() => void this.onEpisodeTimeout(), settings.episodeTimeoutMs);
    this.episodeTimer.unref?.();
    this.log.info({ event: 'reset', queued_s: this.timings().queued_s, deploy_s: this.timings().deploy_s }, 'episode running');
    const outcome: StepOutcome<ResetObservation> = {
      observation: {
        episode_id: this.id,
        task_id: this.task.task_id,
        split: this.task.split,
        index: this.task.index,
        seed: this.seed,
        toolset: this.task.toolset,
        messages: [
          { role: 'system', content: this.task.system_prompt },
          { role: 'user', content: this.task.turns[0] ?? '' },
        ],
        tools: this.tools,
        turn: 1,
        turns: this.task.turns.length,
        max_turns: this.task.max_turns,
        timings: this.timings(),
      },
      reward: null,
      done: false,
    };
    this.notify((o) => o.onReset?.(this, outcome));
    return outcome;
  }

  /** Steps run one at a time, in arrival order. */
  step(action: Action & { type: 'list_tools' }): Promise<StepOutcome<ToolsObservation>>;
  step(action: Action): Promise<StepOutcome>;
  step(action: Action): Promise<StepOutcome> {
    const run = this.queue.then(async () => {
      const startedAt = this.now();
      const out = await this.doStep(action);
      if (out.done) this.endReported = true;
      if (action.type === 'call_tool' && this.log.isLevelEnabled('debug')) this.logToolCall(action, out, startedAt);
      this.notify((o) => o.onStep?.(this, action, out, startedAt));
      return out;
    });
    this.queue = run.catch(() => undefined);
    return run;
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
    if (this.done && !this.endReported && this.endReason === 'env_failed') {
      // it ended between steps (episode timeout): this reply is the first to tell the client
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
    } else {
      outcome = await this.callTool(toolName, args as Record<string, unknown>);
    }
    if (!outcome.done && this.steps >= this.deps.settings.maxSteps) {
      const ended = await this.finish('max_steps');
      return { observation: { ...outcome.observation, ...ended.observation }, reward: ended.reward, done: true };
    }
    return outcome;
  }

  private async endTurn(args: Record<string, unknown>): Promise<StepOutcome<CallObservation | Ending>> {
    if (this.turn < this.task.turns.length) {
      this.turn++;
      const prompt = this.task.turns[this.turn - 1]!;
      return {
        observation: { tool_name: END_TURN, result: textResult(prompt, { turn: this.turn, prompt }), error: null, turn: this.turn },
        reward: null,
        done: false,
      };
    }
    const ended = await this.finish('turns_ended');
    const answer = typeof args.answer === 'string' ? args.answer : null;
    return {
      observation: { tool_name: END_TURN, result: textResult('The last turn ended; the episode is scored.', { answer }), error: null, ...ended.observation },
      reward: ended.reward,
      done: true,
    };
  }

  private async callTool(name: string, args: Record<string, unknown>): Promise<StepOutcome<CallObservation | Ending>> {
    const started = this.now();
    const client = this.client!;
    const timeoutMs = this.deps.settings.toolTimeoutMs;
    let res;
    try {
      res = await this.envCall(client, '/tools/call', { name, arguments: args }, timeoutMs);
    } catch (e) {
      this.deps.metrics.toolCall.observe({ outcome: 'failed' }, (this.now() - started) / 1000);
      if (this.done) return this.endedOutcome(name); // the episode timed out or closed meanwhile
      // an answer too large to read is the tool's failure, not the env's end: the episode goes on
      if (e instanceof EnvCallError && e.kind === 'too_large') return toolError(name, 'execution_error', `tool \`${name}\` failed: ${e.message}`);
      if (e instanceof EnvCallError && e.kind === 'timeout' && !(await this.envExited())) {
        return this.fail('tool_timeout', 'tool', `tool \`${name}\` did not answer within tool_timeout (${fmtS(timeoutMs)})`, name);
      }
      return this.failFromEnv('tool', `tool \`${name}\` failed: ${(e as Error).message}`, name);
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

  private async envCall(client: EnvClient, path: string, body: unknown, timeoutMs: number) {
    this.callsInFlight++;
    try {
      return await client.request('POST', path, body, timeoutMs, this.callSignal);
    } finally {
      this.callsInFlight--;
    }
  }

  /** Asks the env for its scores and ends the episode. */
  private async finish(reason: 'turns_ended' | 'max_steps'): Promise<StepOutcome<CallObservation | Ending>> {
    const timeoutMs = this.deps.settings.toolTimeoutMs;
    let res;
    try {
      res = await this.envCall(this.client!, '/finish', {}, timeoutMs);
    } catch (e) {
      if (this.done) return this.endedOutcome(END_TURN);
      if (e instanceof EnvCallError && e.kind === 'timeout' && !(await this.envExited())) {
        return this.fail('tool_timeout', 'finish', `the env did not answer /finish within tool_timeout (${fmtS(timeoutMs)})`, END_TURN);
      }
      return this.failFromEnv('finish', `the env failed to score the episode: ${(e as Error).message}`, END_TURN);
    }
    const parsed = FinishReplySchema.safeParse(res.body);
    if (res.status !== 200 || !parsed.success) {
      return this.fail('invalid_scores', 'finish', `the env answered /finish with HTTP ${res.status} and no scores object`, END_TURN);
    }
    return this.settleScores(parsed.data.scores, reason, 'finish');
  }

  private settleScores(raw: unknown, reason: EndReason, phase: FailurePhase): StepOutcome<CallObservation | Ending> {
    const checked = checkScores(raw, this.deps.bundle.manifest.scores);
    if ('problem' in checked) {
      return this.fail('invalid_scores', phase, `the env reported invalid scores: ${checked.problem}`, null);
    }
    let reward: number;
    try {
      reward = this.deps.reward(checked.scores);
      if (!Number.isFinite(reward)) throw new Error(`the reward function returned ${reward}`);
    } catch (e) {
      return this.fail('invalid_scores', phase, `no reward from the scores ${JSON.stringify(checked.scores)}: ${(e as Error).message}`, null);
    }
    this.scores = checked.scores;
    this.reward = reward;
    this.endWith(reason);
    this.deps.metrics.rewards.observe({ split: this.task.split }, reward);
    void this.teardown();
    return { observation: { done: true, reward, scores: checked.scores, end_reason: reason, timings: this.timings() }, reward, done: true };
  }

  /** An env that stopped answering: say whether it crashed, was OOM-killed or is unreachable. */
  private async failFromEnv(phase: FailurePhase, message: string, toolName: string | null): Promise<StepOutcome<CallObservation | Ending>> {
    const { reason, extra } = await this.whyUnreachable();
    const what =
      reason === 'env_oom'
        ? 'the env was killed for running out of memory'
        : reason === 'env_crashed'
          ? `the env exited (code ${extra.exit_code})`
          : reason === 'node_lost'
            ? `the env's node was lost: ${extra.detail}`
            : 'the env is unreachable';
    return this.fail(reason, phase, `${message} (${what})`, toolName, extra);
  }

  private fail(
    reason: FailureReason,
    phase: FailurePhase,
    message: string,
    toolName: string | null,
    extra: { exit_code?: number | null; log_tail?: string } = {},
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

  /** Removes the env and network (when a deploy started), then frees the slot. Exactly once. */
  teardown(): Promise<void> {
    if (!this.teardownStarted) {
      this.teardownStarted = true;
      void this.runTeardown();
    }
    return this.tornDown;
  }

  private async runTeardown(): Promise<void> {
    const started = this.now();
    try {
      if (this.deployStarted) {
        // abort an in-flight deploy first, so it removes what it made before we look
        this.abort.abort();
        let envRemovedAt: number | null = null;
        await this.deps.sandbox.teardown(this.envId, {
          // no env of this episode runs any more: its slot goes to the next one while the network
          // is removed (a failed network removal is retried, counted, and left to the reconciler)
          onEnvRemoved: () => {
            envRemovedAt = this.now();
            this.deps.metrics.teardownStage.observe({ stage: 'env_removed' }, (envRemovedAt - started) / 1000);
            this.slot?.release();
            this.slot = null;
          },
        });
        const done = this.now();
        this.deps.metrics.teardown.observe({ outcome: 'ok' }, (done - started) / 1000);
        if (envRemovedAt !== null) this.deps.metrics.teardownStage.observe({ stage: 'network_removed' }, (done - envRemovedAt) / 1000);
        this.log.info(
          { event: 'torn_down', teardown_s: seconds3(done - started), ...(envRemovedAt !== null ? { env_removed_s: seconds3(envRemovedAt - started) } : {}) },
          'episode torn down',
        );
      }
    } catch (e) {
      // the reconciler retries what is left; the slot must not leak meanwhile
      this.deps.metrics.teardown.observe({ outcome: 'failed' }, (this.now() - started) / 1000);
      this.log.error({ event: 'teardown_failed', err: (e as Error).message }, 'teardown failed; the reconciler will retry');
    } finally {
      this.slot?.release();
      this.slot = null;
      this.resolveTornDown();
    }
  }

  /** a call got no answer: was it because the env's container is no longer running? (one engine call) */
  private async envExited(): Promise<boolean> {
    if (!this.handle) return false;
    return this.deps.sandbox.diagnose(this.handle).then(
      (d) => !d.running,
      () => false,
    );
  }

  /** crashed, OOM-killed, or (still running, or no word from the engine) unreachable */
  private async whyUnreachable(): Promise<{ reason: FailureReason; extra: { exit_code?: number | null; log_tail?: string; detail?: string } }> {
    const d = await this.diagnose();
    if (!d) return { reason: 'env_unreachable', extra: {} };
    if (d.failureReason) return { reason: d.failureReason, extra: { detail: d.detail } };
    const reason: FailureReason = d.oomKilled ? 'env_oom' : d.running ? 'env_unreachable' : 'env_crashed';
    return { reason, extra: { exit_code: d.exitCode, log_tail: d.logTail } };
  }

  /**
   * The env's container state after a failed call. A dropped connection usually comes a moment
   * before the engine marks the container exited: look again for up to a second before calling
   * the env merely unreachable. Null when the engine cannot say.
   */
  private async diagnose(): Promise<EnvDiagnosis | null> {
    if (!this.handle) return null;
    let last: EnvDiagnosis | null = null;
    for (let i = 0; i < DIAGNOSE_RETRY.attempts; i++) {
      try {
        last = await this.deps.sandbox.diagnose(this.handle);
      } catch {
        return last;
      }
      if (!last.running || last.oomKilled) return last;
      await new Promise((r) => setTimeout(r, DIAGNOSE_RETRY.delayMs));
    }
    return last;
  }

  private throwIfAborted(): void {
    if (this.abort.signal.aborted) throw abortError();
  }

  private async deployFailure(e: unknown, spec: EnvSpec | null): Promise<Failure> {
    if (e instanceof SandboxError) {
      return makeFailure(e.reason, 'deploy', e.message, this.ids, { exit_code: e.details.exitCode, log_tail: e.details.logTail });
    }
    if (e instanceof EnvCallError) {
      if (e.kind === 'timeout')
        return makeFailure('deploy_timeout', 'reset', `the env did not answer /reset within ${fmtS(resetBudgetMs(this.deps.settings, spec))}`, this.ids);
      const { reason, extra } = await this.whyUnreachable();
      return makeFailure(reason, 'reset', `the env failed its reset: ${e.message}`, this.ids, extra);
    }
    this.log.error({ err: e }, 'unexpected deploy error');
    return makeFailure('engine_error', 'deploy', `deploy failed: ${(e as Error)?.message ?? String(e)}`, this.ids);
  }
}

function textResult(text: string, data: unknown, isError = false): ToolResult {
  return {
    content: [{ type: 'text', text }],
    structured_content: isPlainObject(data) ? data : null,
    data,
    is_error: isError,
  };
}

function toolError(toolName: string, errorType: ToolErrorType, message: string): StepOutcome<CallObservation> {
  return { observation: { tool_name: toolName, result: null, error: { error_type: errorType, message } }, reward: null, done: false };
}

/** an env's /reset may take as long as a tool call or its deploy, whichever is longer */
function resetBudgetMs(settings: EpisodeSettings, spec: EnvSpec | null): number {
  return Math.max(settings.toolTimeoutMs, spec?.deployTimeoutMs ?? 0);
}

/** the OpenEnv ToolErrorType of a call the episode's failure cut short */
function toolErrorType(f: Failure | null): ToolErrorType {
  if (f?.reason === 'tool_timeout' || f?.reason === 'episode_timeout') return 'timeout';
  if (f?.reason === 'env_crashed' || f?.reason === 'env_oom' || f?.reason === 'env_unreachable') return 'transport_error';
  return 'execution_error';
}
