/**
 * The clean reset check, for an env whose bundle.json says `clean_reset` (its tasks play on a few
 * containers reset between plays, reused-envs.ts): a play that fails on a reused container is
 * played again on a fresh one, and a share of the plays that ran on reused containers are played
 * again on fresh ones; a fresh container that plays otherwise means the env's /reset does not
 * start a clean episode.
 */
import type { Task } from '../../bundle/index.js';
import type { GoldenStep } from '../../bundle/schema.js';
import { CHECK_SEED } from '../../defaults.js';
import { taskWhere } from '../check-static.js';
import { describeFailure, firstDifference, play, type CheckRun, type Play } from './play.js';
import { spread } from './tally.js';

/**
 * `check` on an env whose bundle.json says `clean_reset`: of the plays that ran on a reused env,
 * this many (at least `least`, else `share` of them) are played again on a fresh env, and must give
 * the same results.
 */
const CHECK_FRESH_REPLAYS = { least: 3, share: 0.01 } as const;

/** a play to compare with one on a fresh container: its steps, what it gave, and which solution it was */
export interface PlayedSolution {
  steps: readonly GoldenStep[];
  play: Play;
  kind: 'golden' | 'empty';
}

/**
 * A play, counted; one that failed on a reused container is played again on a fresh one, which
 * is what counts: a fresh pass means the env's /reset did not start a clean episode.
 */
export async function playCounted(run: CheckRun, task: Task, steps: readonly GoldenStep[], what: string): Promise<Play> {
  const { play: p } = await play(run.stage, task, CHECK_SEED, steps);
  run.note(task, p);
  if (!p.failure || p.served_before === 0) return p;
  const { play: again } = await play(run.stage, task, CHECK_SEED, steps, { fresh: true });
  run.note(task, again);
  if (!again.failure) {
    const env = run.bundle.envOf(task).name;
    run.findings.problem(
      taskWhere(run.bundle, task),
      `the ${what} failed on a container of env ${env} that had served ${p.served_before} episode(s) before (${describeFailure(p.failure)}), not on a fresh one: its /reset does not start a clean episode; fix the env or drop "clean_reset" from envs.${env}`,
    );
  }
  return again;
}

/** how many of an env's `n` plays on reused containers are played again on fresh ones */
export function freshReplays(n: number): number {
  return Math.max(CHECK_FRESH_REPLAYS.least, Math.ceil(n * CHECK_FRESH_REPLAYS.share));
}

/** The plays that ran well on reused containers, per env; `replays()` plays a spread share of them again on fresh ones. */
export class ReusedPlays {
  private readonly byEnv = new Map<string, (PlayedSolution & { task: Task })[]>();

  constructor(private readonly run: CheckRun) {}

  /** keeps a play that ran on a reused container without a failure */
  add(task: Task, played: PlayedSolution): void {
    if (played.play.served_before === 0 || played.play.failure) return;
    const env = this.run.bundle.envOf(task).name;
    let list = this.byEnv.get(env);
    if (!list) this.byEnv.set(env, (list = []));
    list.push({ task, ...played });
  }

  /** the plays again on fresh containers, as jobs: the same results, or clean_reset is not true */
  replays(): (() => Promise<void>)[] {
    return [...this.byEnv].flatMap(([env, list]) => spread(list, freshReplays(list.length)).map((r) => () => this.onFresh(env, r)));
  }

  private async onFresh(env: string, r: PlayedSolution & { task: Task }): Promise<void> {
    const { play: again } = await play(this.run.stage, r.task, CHECK_SEED, r.steps, { fresh: true });
    this.run.note(r.task, again);
    const d = firstDifference(r.play, again, r.steps.length);
    if (d) {
      this.run.findings.problem(
        taskWhere(this.run.bundle, r.task),
        `the ${r.kind} solution gave different results on a container of env ${env} that had served ${r.play.served_before} episode(s) before and on a fresh one (first at ${d.at}: ${d.was} then ${d.now}); a /reset must start a clean episode whatever the container served before: fix the env or drop "clean_reset" from envs.${env}`,
      );
    }
  }
}
