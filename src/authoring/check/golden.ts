/**
 * The golden check: a task's golden solution, played, must end the episode without a failure and
 * without a tool error, with every score at its declared max.
 */
import type { Task } from '../../bundle/index.js';
import type { ScoreDeclaration } from '../../bundle/schema.js';
import { SCORE_TOLERANCE } from '../../defaults.js';
import { describeFailure, lastLines, VERIFIER_TAIL_LINES, type Play } from './play.js';
import { rangeOf } from './tally.js';

/** What a golden play says: its problems (in the order said) and whether it passed. */
export function judgeGolden(task: Task, g: Play, declared: Record<string, ScoreDeclaration> | undefined): { problems: string[]; passed: boolean } {
  const steps = task.golden?.length ?? 0;
  if (g.failure?.reason === 'toolchain_tampered') {
    return {
      passed: false,
      problems: [
        `the golden solution changes what the in-place verifier runs, so the task cannot be verified in place (${g.failure.message}): ` +
          'give its verifier "mode": "clean" with the "outputs" the agent leaves its work in, or list the paths the agent must change in "allow_changes" (the check then trusts them: docs/security.md)',
      ],
    };
  }
  if (g.failure) return { passed: false, problems: [`the golden solution failed the episode: ${describeFailure(g.failure)}`] };
  if (!g.done) {
    return {
      passed: false,
      problems: [
        `the golden solution's ${steps} step(s) did not end the episode; end it with "end_turn" on the last turn (${task.turns.length} turn(s)) or a tool answering done`,
      ],
    };
  }
  const problems: string[] = [];
  const erred = g.steps.map((st, i) => ({ ...st, n: i + 1 })).filter((st) => st.is_error || st.error_type !== null);
  const short = Object.entries(g.scores ?? {}).filter(([k, v]) => v < rangeOf(declared, k).max - SCORE_TOLERANCE);
  if (erred.length > 0) {
    const e = erred[0]!;
    problems.push(
      `the golden solution's step ${e.n} (${e.tool}) got an error (${e.error_type ?? 'is_error'}: ${e.error ?? 'no message'})${erred.length > 1 ? ` and ${erred.length - 1} more step(s) did too` : ''}; a golden solution plays without errors: fix the env or the golden solution`,
    );
  }
  for (const [k, v] of short) {
    problems.push(
      `the golden solution scored ${k} = ${v}, expected its declared max ${rangeOf(declared, k).max}; fix the golden solution or the env's scoring` +
        (g.verifier_output ? `; the verifier's output ends:\n      ${lastLines(g.verifier_output, VERIFIER_TAIL_LINES)}` : ''),
    );
  }
  return { problems, passed: erred.length === 0 && short.length === 0 };
}
