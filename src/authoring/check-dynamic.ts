/**
 * The part of `openenv-bundle check` that runs the bundle: the server's own episode machinery
 * (createRuntime: the Docker sandbox, image builds, admission, episodes), in this process, under
 * an instance name of its own. For a sample of tasks it plays the golden solution, the empty
 * solution, the golden (or empty) solution again with the same seed (unless the bundle declares
 * that it ignores seeds), and once per toolset a call of each tool that violates its schema; then
 * it tears everything down. An env whose bundle.json says `clean_reset` plays its tasks on a few
 * containers reset between plays (reused-envs.ts); a play that fails on a reused container is
 * played again on a fresh one before it counts, and a share of the plays on reused containers
 * are played again on fresh ones and must give the same results.
 */
import { randomBytes } from 'node:crypto';
import type { ValidateFunction } from 'ajv';
import { pino, type Logger } from 'pino';
import { END_TURN, type LoadedBundle, type Task } from '../bundle/index.js';
import type { GoldenStep, ScoreDeclaration } from '../bundle/schema.js';
import { OptionsSchema } from '../config.js';
import { CHECK_CONCURRENCY, CHECK_FRESH_REPLAYS, CHECK_INSTANCE_PREFIX, CHECK_SEED, SCORE_TOLERANCE } from '../defaults.js';
import { DeployFailedError } from '../errors.js';
import type { Episode } from '../episodes/episode.js';
import type { CallObservation, Ending, Failure } from '../protocol/observations.js';
import { createRuntime, type OpenEnvRuntime } from '../runtime.js';
import type { Sandbox } from '../sandbox/sandbox.js';
import { forEachAtMost } from '../work-pool.js';
import { describeErrors, violatingArguments } from './json-schema.js';
import { Findings } from './findings.js';
import { ReusedEnvs } from './reused-envs.js';
import { taskWhere } from './check-static.js';
import { HarnessPlays, harnessGoldenBlocker, harnessRunNote } from './check-harness.js';
import { harnessOf } from '../episodes/harness-task.js';
import type { HarnessProgress } from '../protocol/harness.js';

export interface DynamicOptions {
  /** tasks per (split, toolset); 'all' plays every task */
  tasks: number | 'all';
  /** only this split */
  split?: string;
  buildArgs?: Record<string, string>;
  /** envs running at once */
  concurrency?: number;
  /** a fresh env for every episode, even where bundle.json says clean_reset */
  freshEnvs?: boolean;
  /** env images built (or checked) at once before the plays (--image-build-concurrency) */
  imageBuildConcurrency?: number;
  /** tests: another sandbox than Docker */
  sandbox?: Sandbox;
  log?: Logger;
  onProgress?: (done: number, total: number, what: string) => void;
  /** aborting stops the plays, tears every env down and rejects (Ctrl-C must leave nothing behind) */
  signal?: AbortSignal;
  /** the instance name its containers and networks are labelled with (default: check- and a random suffix) */
  instance?: string;
  /** the pool each episode's network takes its subnet from (serve's --subnet-pool) */
  subnetPool?: string;
}

/** One step as a model would have seen it: enough to tell two plays of a task apart. */
interface PlayedStep {
  tool: string;
  text: string | null;
  is_error: boolean;
  error_type: string | null;
  /** the tool error's message (the env answered HTTP 500, bad arguments), when there was one */
  error: string | null;
}

export interface Play {
  steps: PlayedStep[];
  done: boolean;
  reward: number | null;
  scores: Record<string, number> | null;
  end_reason: string | null;
  failure: Failure | null;
  /** the reset's deploy time (container, readiness, /reset), seconds */
  deploy_s: number | null;
  /** episodes its env's container had served before it (0: a fresh container) */
  served_before: number;
  /** what its last verifier run printed (its transcript's `verifier` event), null when none ran */
  verifier_output: string | null;
  /** a harness task's play (check-harness.ts): what its harness did, once it ended */
  harness?: HarnessProgress | null;
}

export interface EnvTimes {
  env: string;
  /** plays on a fresh container, and their deploy + /reset times */
  deploys: number;
  mean_s: number;
  max_s: number;
  /** plays on a container that had served another (clean_reset), and their /reset times; mean null when none */
  reused: number;
  reused_mean_s: number | null;
}

export interface DynamicResult {
  findings: Findings;
  /** the instance name its containers and networks were labelled with (all removed by now) */
  instance: string;
  /** seconds until every env image was built (or found) */
  images_s: number;
  tasks_checked: number;
  episodes: number;
  /** seconds from the images being ready to the last play's end */
  plays_s: number;
  /** envs it ran at once */
  concurrency: number;
  envs: EnvTimes[];
  /** env name → what it ran with: the lock-down every env gets and what the bundle asked for (docs/security.md) */
  granted: OpenEnvRuntime['granted'];
  /** golden plays that reached every score's max (and played without an error) / all golden plays, and their means */
  golden: PlayTally;
  empty: PlayTally;
}

/** How the plays of one kind (golden, empty) went: passed of played, and the means of the scored ones. */
export interface PlayTally {
  passed: number;
  played: number;
  /** the mean reward of the plays that were scored; null when none was */
  reward: number | null;
  /** each score's mean over the plays that reported it */
  scores: Record<string, number>;
}

/** Counts plays and their rewards and scores; `tally()` gives the means. */
class Plays {
  passed = 0;
  played = 0;
  private readonly rewards: number[] = [];
  private readonly scores = new Map<string, number[]>();

  add(p: Play): void {
    this.played++;
    if (p.reward !== null) this.rewards.push(p.reward);
    for (const [k, v] of Object.entries(p.scores ?? {})) this.scores.set(k, [...(this.scores.get(k) ?? []), v]);
  }

  tally(): PlayTally {
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    return {
      passed: this.passed,
      played: this.played,
      reward: this.rewards.length ? mean(this.rewards) : null,
      scores: Object.fromEntries([...this.scores].map(([k, xs]) => [k, mean(xs)])),
    };
  }
}

/** Evenly spread over each (split, toolset) group, first and last included; all of them for 'all'. */
export function sampleTasks(bundle: LoadedBundle, tasks: number | 'all', split?: string): Task[] {
  const out: Task[] = [];
  for (const [name, list] of Object.entries(bundle.splits)) {
    if (split !== undefined && name !== split) continue;
    const groups = new Map<string, Task[]>();
    for (const t of list) groups.set(t.toolset, [...(groups.get(t.toolset) ?? []), t]);
    for (const group of groups.values()) {
      if (tasks === 'all' || tasks >= group.length) {
        out.push(...group);
        continue;
      }
      const picked = new Set<number>();
      for (let i = 0; i < tasks; i++) picked.add(tasks === 1 ? 0 : Math.round((i * (group.length - 1)) / (tasks - 1)));
      for (const i of [...picked].sort((a, b) => a - b)) out.push(group[i] as Task);
    }
  }
  return out;
}

const DEFAULT_RANGE = { min: 0, max: 1 };

function rangeOf(declared: Record<string, ScoreDeclaration> | undefined, score: string): { min: number; max: number; floor: number } {
  const d = declared && Object.hasOwn(declared, score) ? declared[score] : undefined;
  const r = d ?? DEFAULT_RANGE;
  return { min: r.min, max: r.max, floor: d?.floor ?? r.min };
}

/** a verifier's failure carries its output's tail, more telling than an env's log lines: more of it is shown */
const VERIFIER_REASONS = new Set<string>(['verifier_failed', 'verifier_timeout', 'invalid_scores']);
const VERIFIER_TAIL_LINES = 15;

/** the last `lines` lines of an output, indented under a finding */
function lastLines(text: string, lines: number, indent = '      '): string {
  return text.trim().split('\n').slice(-lines).join(`\n${indent}`);
}

function describeFailure(f: Failure): string {
  const verifier = VERIFIER_REASONS.has(f.reason);
  const tail = f.log_tail
    ? verifier
      ? `; the verifier's output ends:\n      ${lastLines(f.log_tail, VERIFIER_TAIL_LINES)}`
      : `; the env's last log lines:\n      ${lastLines(f.log_tail, 5)}`
    : '';
  return `${f.reason} in phase ${f.phase}: ${f.message}${tail}`;
}

/** the output of the episode's last verifier run, from its transcript (null: none ran, or the transcript is gone) */
function verifierOutput(rt: OpenEnvRuntime, episodeId: string): string | null {
  const events = rt.history.transcript(episodeId)?.events ?? [];
  const last = events.filter((e) => e.kind === 'verifier').pop();
  return last && typeof last.output === 'string' ? last.output : null;
}

/** where plays run: the runtime, check's env reuse when an env may be reused, and the scripted model of harness tasks */
interface Stage {
  rt: OpenEnvRuntime;
  reuse: ReusedEnvs | null;
  harness: HarnessPlays | null;
}

async function play(
  { rt, reuse, harness }: Stage,
  task: Task,
  seed: number,
  steps: readonly GoldenStep[],
  opts: { hold?: boolean; fresh?: boolean } = {},
): Promise<{ play: Play; episode: Episode | null }> {
  const result: Play = {
    steps: [],
    done: false,
    reward: null,
    scores: null,
    end_reason: null,
    failure: null,
    deploy_s: null,
    served_before: 0,
    verifier_output: null,
  };
  // a harness task's model is a scripted one, given as the reset's upstream (check-harness.ts)
  const model = harness?.upstreamFor(task, steps) ?? null;
  const data = { task_id: task.task_id, seed, ...(model ? { model } : {}) };
  const ep = rt.manager.create(data, 'ws');
  if (opts.fresh) reuse?.fresh(ep.id);
  try {
    const reset = await rt.manager.start(ep);
    result.deploy_s = reset.observation.timings.deploy_s;
    if (model && harness) Object.assign(result, await harness.waitOut(ep));
    for (const step of model ? [] : steps) {
      const out = await ep.step({ type: 'call_tool', tool_name: step.tool, arguments: step.arguments ?? {} });
      const obs = out.observation as CallObservation & Partial<Ending>;
      const text = obs.result?.content[0]?.text ?? null;
      const isError = obs.result?.is_error === true;
      result.steps.push({
        tool: step.tool,
        text,
        is_error: isError,
        error_type: obs.error?.error_type ?? null,
        error: obs.error?.message ?? (isError ? text : null),
      });
      if (out.done) {
        result.done = true;
        result.reward = out.reward;
        result.scores = obs.scores ?? null;
        result.end_reason = obs.end_reason ?? null;
        result.failure = obs.failure ?? null;
        break;
      }
    }
  } catch (e) {
    if (!(e instanceof DeployFailedError)) throw e;
    result.failure = e.failure;
    result.done = true;
  }
  result.served_before = reuse?.servedBeforeOf(ep.id) ?? 0;
  result.verifier_output = verifierOutput(rt, ep.id);
  if (opts.hold && !result.done) return { play: result, episode: ep };
  await ep.close();
  return { play: result, episode: null };
}

/**
 * Why two plays of a task with the same seed could differ. A shell env has no /reset: no seed
 * reaches it, so seed advice would be wrong there; a service not ready yet or the verifier's own
 * nondeterminism can, and both plays' verifier output (when a verifier ran) says more.
 */
function replayAdvice(bundle: LoadedBundle, task: Task, a: Play, b: Play): string {
  const tails = [a, b]
    .map((p, i) => (p.verifier_output !== null ? `\n      play ${i + 1}'s verifier output ends:\n        ${lastLines(p.verifier_output, 5, '        ')}` : ''))
    .join('');
  if (bundle.envOf(task).spec.kind === 'shell')
    return (
      `no seed reaches this task (its env is a shell env: the image is the state), so something else differed: a service the image starts ` +
      `may not have been ready when the play began (declare a healthcheck: [environment.healthcheck] in task.toml or a HEALTHCHECK in the image; docs/harbor.md, Readiness), ` +
      `or the verifier is not deterministic${tails}`
    );
  const reused = a.served_before + b.served_before > 0;
  return `derive the env's randomness from /reset's seed${task.verifier ? ', make the verifier deterministic,' : ''} or declare "ignores_seed": true in bundle.json${reused ? ` (a play ran on a container that had served other episodes: if the env keeps something across /reset, that is the cause; check --fresh-envs tells)` : ''}${tails}`;
}

/** What a play's model saw, as one comparable string per step. */
function fingerprint(p: Play): string[] {
  return [
    ...p.steps.map(({ tool, text, is_error, error_type }) => JSON.stringify({ tool, text, is_error, error_type })),
    JSON.stringify({ scores: p.scores, end_reason: p.end_reason, failure: p.failure?.reason ?? null }),
  ];
}

/** The first step (or the scores, past the steps) at which two plays' fingerprints differ, null when they do not. */
function firstDifference(a: string[], b: string[], steps: number): { at: string; was: string; now: string } | null {
  const at = a.findIndex((s, i) => s !== b[i]);
  if (at === -1 && a.length === b.length) return null;
  const i = at === -1 ? Math.min(a.length, b.length) : at;
  return { at: i < steps ? `step ${i + 1}` : 'the scores', was: a[i] ?? 'nothing', now: b[i] ?? 'nothing' };
}

/** Evenly spread picks of `n` items of `list`, first and last included. */
function spread<T>(list: readonly T[], n: number): T[] {
  if (n >= list.length) return [...list];
  const picked = new Set<number>();
  for (let i = 0; i < n; i++) picked.add(n === 1 ? 0 : Math.round((i * (list.length - 1)) / (n - 1)));
  return [...picked].sort((a, b) => a - b).map((i) => list[i] as T);
}

export async function checkDynamic(bundle: LoadedBundle, validators: Map<string, Map<string, ValidateFunction>>, opts: DynamicOptions): Promise<DynamicResult> {
  const findings = new Findings();
  const concurrency = opts.concurrency ?? CHECK_CONCURRENCY;
  const log = opts.log ?? pino({ level: 'silent' });
  const sample = sampleTasks(bundle, opts.tasks, opts.split);
  const options = OptionsSchema.parse({
    // a harness task's play names its (scripted) model at reset: the gateway on, its upstream per reset
    ...(sample.some((t) => harnessOf(bundle, t) !== null) ? { modelFromReset: true } : {}),
    instance: opts.instance ?? `${CHECK_INSTANCE_PREFIX}${randomBytes(4).toString('hex')}`,
    ...(opts.subnetPool !== undefined ? { subnetPool: opts.subnetPool } : {}),
    maxConcurrentEnvs: concurrency,
    maxConcurrentDeploys: concurrency,
    ...(opts.imageBuildConcurrency !== undefined ? { imageBuildConcurrency: opts.imageBuildConcurrency } : {}),
    logLevel: 'silent',
  });
  const declared = bundle.manifest.scores;
  const ignoresSeed = bundle.manifest.ignores_seed;
  const cleanReset = new Set(
    opts.freshEnvs
      ? []
      : Object.entries(bundle.manifest.envs)
          .filter(([, e]) => e.clean_reset)
          .map(([name]) => name),
  );
  let reuse: ReusedEnvs | null = null;
  let runtime: OpenEnvRuntime | null = null;
  /** an episode's container serves the next one only when the episode ended on its own, without a failure */
  const endedWell = (episodeId: string) => {
    const ep = runtime?.manager.get(episodeId);
    return ep !== undefined && ep.failure === null && ep.endReason !== null && ep.endReason !== 'closed';
  };
  const deploys = new Map<string, number[]>();
  const resets = new Map<string, number[]>();
  /** env → the plays (golden, else empty) that ran on a reused container: some are played again on a fresh one */
  const onReused = new Map<string, { task: Task; steps: readonly GoldenStep[]; play: Play; kind: 'golden' | 'empty' }[]>();
  const golden = new Plays();
  const empty = new Plays();
  let episodes = 0;

  const imagesStarted = Date.now();
  // the images are counted on the same bar as the plays that follow (the server's own path: createRuntime's catalog)
  const imageProgress = opts.onProgress ? { update: opts.onProgress, end: () => undefined, quiet: true } : undefined;
  const rt = await createRuntime({
    options,
    bundle,
    log,
    buildArgs: opts.buildArgs ?? {},
    sandbox: opts.sandbox,
    ...(imageProgress ? { imageProgress } : {}),
    ...(cleanReset.size > 0 ? { wrapSandbox: (s: Sandbox) => (reuse = new ReusedEnvs(s, cleanReset, endedWell)) } : {}),
  });
  runtime = rt;
  const harnessPlays = await HarnessPlays.start(bundle, sample).catch(async (e: unknown) => {
    await rt.close();
    throw e;
  });
  const stage: Stage = { rt, reuse, harness: harnessPlays };
  let imagesS: number;
  let playsS = 0;
  // an abort drains at once, from the image builds on (they are cancelled on the engine): live
  // episodes close, their plays fail, the workers stop
  const onAbort = () => {
    void reuse?.release();
    void rt.drain();
  };
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  if (opts.signal?.aborted) onAbort();
  try {
    await rt.ready.catch((e: unknown) => {
      throw opts.signal?.aborted ? new Error('interrupted before any task was played: the env image builds were stopped, nothing was deployed') : e;
    });
    imagesS = (Date.now() - imagesStarted) / 1000;
    const playsStarted = Date.now();

    const note = (task: Task, p: Play) => {
      episodes++;
      if (p.deploy_s === null) return;
      const env = bundle.envOf(task).name;
      const into = p.served_before > 0 ? resets : deploys;
      let xs = into.get(env);
      if (!xs) into.set(env, (xs = []));
      xs.push(p.deploy_s);
    };

    /**
     * A play, counted; one that failed on a reused container is played again on a fresh one,
     * which is what counts: a fresh pass means the env's /reset did not start a clean episode.
     */
    const playCounted = async (task: Task, steps: readonly GoldenStep[], what: string): Promise<Play> => {
      const { play: p } = await play(stage, task, CHECK_SEED, steps);
      note(task, p);
      if (!p.failure || p.served_before === 0) return p;
      const { play: again } = await play(stage, task, CHECK_SEED, steps, { fresh: true });
      note(task, again);
      if (!again.failure) {
        const env = bundle.envOf(task).name;
        findings.problem(
          taskWhere(bundle, task),
          `the ${what} failed on a container of env ${env} that had served ${p.served_before} episode(s) before (${describeFailure(p.failure)}), not on a fresh one: its /reset does not start a clean episode; fix the env or drop "clean_reset" from envs.${env}`,
        );
      }
      return again;
    };

    const checkTask = async (task: Task) => {
      const where = taskWhere(bundle, task);
      const emptySteps = task.turns.map(() => ({ tool: END_TURN }));
      let replayOf: { steps: readonly GoldenStep[]; play: Play } | null = null;
      // a harness task whose golden solution its harness cannot be scripted to play: said, the empty run played
      const cannotPlayGolden = harnessGoldenBlocker(bundle, task);
      if (cannotPlayGolden) findings.warning(where, cannotPlayGolden);

      if (task.golden && !cannotPlayGolden) {
        const g = await playCounted(task, task.golden, 'golden solution');
        golden.add(g);
        const erred = g.steps.map((st, i) => ({ ...st, n: i + 1 })).filter((st) => st.is_error || st.error_type !== null);
        replayOf = { steps: task.golden, play: g };
        if (g.failure?.reason === 'toolchain_tampered') {
          findings.problem(
            where,
            `the golden solution changes what the in-place verifier runs, so the task cannot be verified in place (${g.failure.message}): ` +
              'give its verifier "mode": "clean" with the "outputs" the agent leaves its work in, or list the paths the agent must change in "allow_changes" (the check then trusts them: docs/security.md)',
          );
        } else if (g.failure) {
          findings.problem(where, `the golden solution failed the episode: ${describeFailure(g.failure)}`);
        } else if (!g.done) {
          findings.problem(
            where,
            `the golden solution's ${task.golden.length} step(s) did not end the episode; end it with "end_turn" on the last turn (${task.turns.length} turn(s)) or a tool answering done`,
          );
        } else {
          const short = Object.entries(g.scores ?? {}).filter(([k, v]) => v < rangeOf(declared, k).max - SCORE_TOLERANCE);
          if (erred.length > 0) {
            const e = erred[0]!;
            findings.problem(
              where,
              `the golden solution's step ${e.n} (${e.tool}) got an error (${e.error_type ?? 'is_error'}: ${e.error ?? 'no message'})${erred.length > 1 ? ` and ${erred.length - 1} more step(s) did too` : ''}; a golden solution plays without errors: fix the env or the golden solution`,
            );
          } else if (short.length === 0) golden.passed++;
          for (const [k, v] of short) {
            findings.problem(
              where,
              `the golden solution scored ${k} = ${v}, expected its declared max ${rangeOf(declared, k).max}; fix the golden solution or the env's scoring` +
                (g.verifier_output ? `; the verifier's output ends:\n      ${lastLines(g.verifier_output, VERIFIER_TAIL_LINES)}` : ''),
            );
          }
        }
      }

      const e = await playCounted(task, emptySteps, 'empty solution');
      empty.add(e);
      // a harness run that did not end on its own with 0 (a model call refused, a crash, its budget): said, with its output
      for (const [kind, p] of [
        ['golden', replayOf?.play],
        ['empty', e],
      ] as const) {
        const ran = p?.harness ? harnessRunNote(p.harness) : null;
        if (ran) findings.warning(where, `the ${kind} play's harness ${ran}`);
      }
      replayOf ??= { steps: emptySteps, play: e };
      if (replayOf.play.served_before > 0 && !replayOf.play.failure) {
        const env = bundle.envOf(task).name;
        let list = onReused.get(env);
        if (!list) onReused.set(env, (list = []));
        list.push({ task, steps: replayOf.steps, play: replayOf.play, kind: replayOf.steps === emptySteps ? 'empty' : 'golden' });
      }
      if (e.failure) {
        findings.problem(
          where,
          `the empty solution (end_turn on every turn, no tool call) failed the env: ${describeFailure(e.failure)}; an env must score doing nothing`,
        );
      } else {
        const over = Object.entries(e.scores ?? {}).filter(([k, v]) => v > rangeOf(declared, k).floor + SCORE_TOLERANCE);
        if (over.length === 0) empty.passed++;
        for (const [k, v] of over) {
          findings.problem(
            where,
            `the empty solution (no tool call) scored ${k} = ${v}, above its floor ${rangeOf(declared, k).floor}; doing nothing must not pay: fix the env's scoring or declare scores.${k}.floor`,
          );
        }
      }

      // a bundle that declares it ignores seeds is not asked to replay alike
      if (ignoresSeed) return;
      const { play: again } = await play(stage, task, CHECK_SEED, replayOf.steps);
      note(task, again);
      const d = firstDifference(fingerprint(replayOf.play), fingerprint(again), replayOf.steps.length);
      if (d) {
        findings.problem(
          where,
          `played twice with seed ${CHECK_SEED}, the ${replayOf.steps === emptySteps ? 'empty' : 'golden'} solution gave different results (first at ${d.at}: ${d.was} then ${d.now}); ${replayAdvice(bundle, task, replayOf.play, again)}`,
        );
      }
    };

    /** A play that ran on a reused container, played again on a fresh one: the same results, or clean_reset is not true. */
    const onFresh = async (env: string, r: { task: Task; steps: readonly GoldenStep[]; play: Play; kind: 'golden' | 'empty' }) => {
      const { play: again } = await play(stage, r.task, CHECK_SEED, r.steps, { fresh: true });
      note(r.task, again);
      const d = firstDifference(fingerprint(r.play), fingerprint(again), r.steps.length);
      if (d) {
        findings.problem(
          taskWhere(bundle, r.task),
          `the ${r.kind} solution gave different results on a container of env ${env} that had served ${r.play.served_before} episode(s) before and on a fresh one (first at ${d.at}: ${d.was} then ${d.now}); a /reset must start a clean episode whatever the container served before: fix the env or drop "clean_reset" from envs.${env}`,
        );
      }
    };

    const violations = async (task: Task) => {
      const tools = bundle.manifest.toolsets[task.toolset]?.tools ?? [];
      const calls: { step: GoldenStep; why: string }[] = [];
      for (const tool of tools) {
        const validate = validators.get(task.toolset)?.get(tool.name);
        if (!validate) continue;
        const args = violatingArguments(tool.input_schema, validate);
        if (args === null) {
          findings.warning(`tool ${tool.name} (toolset ${task.toolset})`, 'its input_schema accepts any object: check could not make a call that violates it');
          continue;
        }
        validate(args);
        calls.push({ step: { tool: tool.name, arguments: args }, why: describeErrors(validate) });
      }
      if (calls.length === 0) return;
      const { play: p, episode } = await play(
        stage,
        task,
        CHECK_SEED,
        calls.map((c) => c.step),
        { hold: true },
      );
      note(task, p);
      try {
        p.steps.forEach((s, i) => {
          const call = calls[i];
          if (!call || s.is_error || s.error_type !== null) return;
          findings.problem(
            `tool ${s.tool} (toolset ${task.toolset})`,
            `the env accepted ${JSON.stringify(call.step.arguments)}, which violates the input_schema (${call.why}); answer 400 {"error", "message"} or is_error so the model learns`,
          );
        });
        if (p.done) {
          const last = p.steps[p.steps.length - 1]?.tool ?? 'the first call';
          findings.problem(
            `tool ${last} (toolset ${task.toolset})`,
            `a call that violates the input_schema ended the episode (${p.failure ? describeFailure(p.failure) : (p.end_reason ?? 'done')}); it must be the model's error and the episode go on`,
          );
        }
      } finally {
        await episode?.close();
      }
    };

    const firstOfToolset = new Map<string, Task>();
    // a harness task's model sees one tool, wait, never its toolset's: no schema calls to play
    for (const t of sample) if (!firstOfToolset.has(t.toolset) && !harnessPlays?.isHarness(t)) firstOfToolset.set(t.toolset, t);
    let done = 0;
    const jobs: (() => Promise<void>)[] = [
      ...[...firstOfToolset.values()].map((t) => () => violations(t)),
      ...sample.map((t) => async () => {
        await checkTask(t);
        opts.onProgress?.(++done, sample.length, 'playing tasks');
      }),
    ];
    try {
      await forEachAtMost(jobs, concurrency, (job) => job(), opts.signal);
      const again = [...onReused].flatMap(([env, list]) =>
        spread(list, Math.max(CHECK_FRESH_REPLAYS.least, Math.ceil(list.length * CHECK_FRESH_REPLAYS.share))).map((r) => () => onFresh(env, r)),
      );
      await forEachAtMost(again, concurrency, (job) => job(), opts.signal);
      playsS = (Date.now() - playsStarted) / 1000;
    } catch (e) {
      if (!opts.signal?.aborted) throw e;
    }
    if (opts.signal?.aborted) throw new Error('interrupted: every env it deployed was removed');
  } finally {
    opts.signal?.removeEventListener('abort', onAbort);
    await (stage.reuse as ReusedEnvs | null)?.release();
    await rt.close();
    await harnessPlays?.close();
  }

  // plays end in any order at once: the findings go in the sample's order (the tools' first), whatever finished first
  const rank = new Map(sample.map((t, i) => [taskWhere(bundle, t), i]));
  findings.list.sort((a, b) => (rank.get(a.where) ?? -1) - (rank.get(b.where) ?? -1));

  const mean3 = (xs: number[]) => Math.round((xs.reduce((a, b) => a + b, 0) / xs.length) * 1000) / 1000;
  const envs = [...new Set([...deploys.keys(), ...resets.keys()])].map((env) => {
    const xs = deploys.get(env) ?? [];
    const rs = resets.get(env) ?? [];
    return {
      env,
      deploys: xs.length,
      mean_s: xs.length ? mean3(xs) : 0,
      max_s: xs.length ? Math.max(...xs) : 0,
      reused: rs.length,
      reused_mean_s: rs.length ? mean3(rs) : null,
    };
  });
  return {
    findings,
    instance: options.instance,
    images_s: imagesS,
    tasks_checked: sample.length,
    episodes,
    plays_s: playsS,
    concurrency,
    envs,
    granted: rt.granted,
    golden: golden.tally(),
    empty: empty.tally(),
  };
}
