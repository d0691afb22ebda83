/**
 * The empty check: a task played with no tool call (end_turn on every turn) must not fail the env
 * and must score no more than each score's floor.
 */
import { END_TURN, type Task } from '../../bundle/index.js';
import type { GoldenStep, ScoreDeclaration } from '../../bundle/schema.js';
import { SCORE_TOLERANCE } from '../../defaults.js';
import { describeFailure, type Play } from './play.js';
import { rangeOf } from './tally.js';

/** the empty solution's steps: end_turn on every turn */
export function emptySteps(task: Task): GoldenStep[] {
  return task.turns.map(() => ({ tool: END_TURN }));
}

/** What an empty play says: its problems (in the order said) and whether it passed. */
export function judgeEmpty(e: Play, declared: Record<string, ScoreDeclaration> | undefined): { problems: string[]; passed: boolean } {
  if (e.failure) {
    return {
      passed: false,
      problems: [`the empty solution (end_turn on every turn, no tool call) failed the env: ${describeFailure(e.failure)}; an env must score doing nothing`],
    };
  }
  const over = Object.entries(e.scores ?? {}).filter(([k, v]) => v > rangeOf(declared, k).floor + SCORE_TOLERANCE);
  return {
    passed: over.length === 0,
    problems: over.map(
      ([k, v]) =>
        `the empty solution (no tool call) scored ${k} = ${v}, above its floor ${rangeOf(declared, k).floor}; doing nothing must not pay: fix the env's scoring or declare scores.${k}.floor`,
    ),
  };
}
