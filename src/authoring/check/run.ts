/**
 * The part of `openenv-bundle check` that runs the bundle: the server's own episode machinery
 * (createRuntime: the Docker sandbox, image builds, admission, episodes), in this process, under
 * an instance name of its own. For a sample of tasks (tally.ts) it runs the checks, one file each:
 * the golden solution (golden.ts), the empty solution (empty.ts), the golden (or empty) solution
 * again with the same seed unless the bundle declares that it ignores seeds (seed-replay.ts), once
 * per toolset a call of each tool that violates its schema (schema-violations.ts), and for an env
 * whose bundle.json says `clean_reset` plays on reused containers against fresh ones
 * (clean-reset.ts); then it tears everything down.
 */
import { randomBytes } from 'node:crypto';
import type { ValidateFunction } from 'ajv';
import { pino, type Logger } from 'pino';
import type { LoadedBundle, Task } from '../../bundle/index.js';
import { OptionsSchema } from '../../config.js';
import { CHECK_CONCURRENCY, CHECK_INSTANCE_PREFIX } from '../../defaults.js';
import { harnessOf } from '../../episodes/harness-task.js';
import { createRuntime, type OpenEnvRuntime } from '../../runtime.js';
import type { Sandbox } from '../../sandbox/sandbox.js';
import { forEachAtMost } from '../../util/work-pool.js';
import { Findings } from '../findings.js';
import { ReusedEnvs } from '../reused-envs.js';
import { taskWhere } from '../check-static.js';
import { HarnessPlays, harnessGoldenBlocker, harnessRunNote } from '../check-harness.js';
import { playCounted, ReusedPlays, type PlayedSolution } from './clean-reset.js';
import { emptySteps, judgeEmpty } from './empty.js';
import { judgeGolden } from './golden.js';
import type { CheckRun, Play, Stage } from './play.js';
import { checkSchemaViolations } from './schema-violations.js';
import { checkSeedReplay } from './seed-replay.js';
import { Plays, sampleTasks, type PlayTally } from './tally.js';

export type { PlayTally } from './tally.js';

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

/** each env's deploy times (fresh containers) and /reset times (reused ones), rounded to the millisecond */
export function envTimes(deploys: Map<string, number[]>, resets: Map<string, number[]>): EnvTimes[] {
  const mean3 = (xs: number[]) => Math.round((xs.reduce((a, b) => a + b, 0) / xs.length) * 1000) / 1000;
  return [...new Set([...deploys.keys(), ...resets.keys()])].map((env) => {
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
}

/** one task's checks, in the order their findings are said: golden, empty, seed replay (and the plays kept for clean reset) */
async function checkTask(run: CheckRun, task: Task, tallies: { golden: Plays; empty: Plays }, reused: ReusedPlays): Promise<void> {
  const { bundle, findings } = run;
  const where = taskWhere(bundle, task);
  const declared = bundle.manifest.scores;
  const empty = emptySteps(task);
  let first: PlayedSolution | null = null;
  // a harness task whose golden solution its harness cannot be scripted to play: said, the empty run played
  const cannotPlayGolden = harnessGoldenBlocker(bundle, task);
  if (cannotPlayGolden) findings.warning(where, cannotPlayGolden);

  if (task.golden && !cannotPlayGolden) {
    const g = await playCounted(run, task, task.golden, 'golden solution');
    tallies.golden.add(g);
    first = { steps: task.golden, play: g, kind: 'golden' };
    const judged = judgeGolden(task, g, declared);
    if (judged.passed) tallies.golden.passed++;
    for (const p of judged.problems) findings.problem(where, p);
  }

  const e = await playCounted(run, task, empty, 'empty solution');
  tallies.empty.add(e);
  // a harness run that did not end on its own with 0 (a model call refused, a crash, its budget): said, with its output
  for (const [kind, p] of [
    ['golden', first?.play],
    ['empty', e],
  ] as const) {
    const ran = p?.harness ? harnessRunNote(p.harness) : null;
    if (ran) findings.warning(where, `the ${kind} play's harness ${ran}`);
  }
  first ??= { steps: empty, play: e, kind: 'empty' };
  reused.add(task, first);
  const judged = judgeEmpty(e, declared);
  if (judged.passed) tallies.empty.passed++;
  for (const p of judged.problems) findings.problem(where, p);

  // a bundle that declares it ignores seeds is not asked to replay alike
  if (!bundle.manifest.ignores_seed) await checkSeedReplay(run, task, first);
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
  const tallies = { golden: new Plays(), empty: new Plays() };
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
    imagesFirst: true,
    ...(imageProgress ? { imageProgress } : {}),
    ...(cleanReset.size > 0 ? { wrapSandbox: (s: Sandbox) => (reuse = new ReusedEnvs(s, cleanReset, endedWell)) } : {}),
  });
  runtime = rt;
  const harnessPlays = await HarnessPlays.start(bundle, sample).catch(async (e: unknown) => {
    await rt.close();
    throw e;
  });
  const stage: Stage = { rt, reuse, harness: harnessPlays };
  const run: CheckRun = {
    bundle,
    findings,
    stage,
    note: (task: Task, p: Play) => {
      episodes++;
      if (p.deploy_s === null) return;
      const env = bundle.envOf(task).name;
      const into = p.served_before > 0 ? resets : deploys;
      let xs = into.get(env);
      if (!xs) into.set(env, (xs = []));
      xs.push(p.deploy_s);
    },
  };
  const reused = new ReusedPlays(run);
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

    const firstOfToolset = new Map<string, Task>();
    // a harness task's model sees one tool, wait, never its toolset's: no schema calls to play
    for (const t of sample) if (!firstOfToolset.has(t.toolset) && !harnessPlays?.isHarness(t)) firstOfToolset.set(t.toolset, t);
    let done = 0;
    const jobs: (() => Promise<void>)[] = [
      ...[...firstOfToolset.values()].map((t) => () => checkSchemaViolations(run, t, validators.get(t.toolset))),
      ...sample.map((t) => async () => {
        await checkTask(run, t, tallies, reused);
        opts.onProgress?.(++done, sample.length, 'playing tasks');
      }),
    ];
    try {
      await forEachAtMost(jobs, concurrency, (job) => job(), opts.signal);
      await forEachAtMost(reused.replays(), concurrency, (job) => job(), opts.signal);
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

  return {
    findings,
    instance: options.instance,
    images_s: imagesS,
    tasks_checked: sample.length,
    episodes,
    plays_s: playsS,
    concurrency,
    envs: envTimes(deploys, resets),
    granted: rt.granted,
    golden: tallies.golden.tally(),
    empty: tallies.empty.tally(),
  };
}
