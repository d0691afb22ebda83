/**
 * The seed replay check: a task played again with the same seed (its golden solution, else its
 * empty one) must give the same results, unless the bundle declares that it ignores seeds.
 */
import type { LoadedBundle, Task } from '../../bundle/index.js';
import type { GoldenStep } from '../../bundle/schema.js';
import { CHECK_SEED } from '../../defaults.js';
import { taskWhere } from '../check-static.js';
import { firstDifference, lastLines, play, type CheckRun, type Play } from './play.js';

/**
 * Why two plays of a task with the same seed could differ. A shell env has no /reset: no seed
 * reaches it, so seed advice would be wrong there; a service not ready yet or the verifier's own
 * nondeterminism can, and both plays' verifier output (when a verifier ran) says more.
 */
export function replayAdvice(bundle: LoadedBundle, task: Task, a: Play, b: Play): string {
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

/** plays `first`'s steps again with the same seed; a difference is a problem of the task */
export async function checkSeedReplay(run: CheckRun, task: Task, first: { steps: readonly GoldenStep[]; play: Play; kind: 'golden' | 'empty' }): Promise<void> {
  const { play: again } = await play(run.stage, task, CHECK_SEED, first.steps);
  run.note(task, again);
  const d = firstDifference(first.play, again, first.steps.length);
  if (d) {
    run.findings.problem(
      taskWhere(run.bundle, task),
      `played twice with seed ${CHECK_SEED}, the ${first.kind} solution gave different results (first at ${d.at}: ${d.was} then ${d.now}); ${replayAdvice(run.bundle, task, first.play, again)}`,
    );
  }
}
