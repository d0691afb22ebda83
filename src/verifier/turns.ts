/**
 * Multi-turn verified tasks (a Harbor task's [[steps]]): each turn's verifier scores that turn;
 * `min_reward` stops the episode after a turn that scores under it; the task's scores combine the
 * verified turns' by the task's `turn_reward` (docs/bundle-format.md, "verified tasks";
 * docs/harbor.md, "multi-step tasks"). Harbor's two rules (its `multi_step_reward_strategy`, as
 * harbor.trial.multi_step computes it, https://harborframework.com/docs/tasks/multi-step):
 * - `mean` (the default): each score's mean over the turns that were verified (the turns after an
 *   early stop were not played and do not count); a verified turn that did not report a score
 *   counts 0 for it.
 * - `final`: the scores of the last verified turn, as it reported them (the turn that stopped the
 *   episode, when one did).
 * Two rules of our own, for training that must not pay an early stop (off unless a task names them):
 * - `mean_all_turns`: each score's mean over every turn of the task, a turn not played counting 0.
 * - `final_or_zero`: the task's last turn's scores, each 0 when the episode stopped before it.
 */
import type { Scores } from './reward-files.js';

export const TURN_REWARD_RULES = ['mean', 'final', 'mean_all_turns', 'final_or_zero'] as const;
export type TurnRewardRule = (typeof TURN_REWARD_RULES)[number];
export const DEFAULT_TURN_REWARD: TurnRewardRule = 'mean';

/** every score name any verified turn reported, in first-seen order */
function scoreNames(turns: readonly (Scores | null)[]): string[] {
  const names = new Set<string>();
  for (const t of turns) if (t) for (const k of Object.keys(t)) names.add(k);
  return [...names];
}

/**
 * The task's scores from its turns' (`perTurn[i]`: turn i's scores, null or absent when it was not
 * verified), for a task of `turnCount` turns.
 */
export function combineTurnScores(rule: TurnRewardRule, perTurn: readonly (Scores | null)[], turnCount: number): Scores {
  if (turnCount < 1 || perTurn.length > turnCount) throw new Error(`${perTurn.length} turn score(s) for a task of ${turnCount} turn(s)`);
  const verified = perTurn.filter((t): t is Scores => t !== null && t !== undefined);
  if (verified.length === 0) throw new Error('no turn of the task was verified, so there are no scores to combine');
  const names = scoreNames(verified);
  const out: Scores = {};
  switch (rule) {
    case 'final':
      return { ...verified[verified.length - 1]! };
    case 'final_or_zero': {
      const last = perTurn.length === turnCount ? perTurn[turnCount - 1] : null;
      for (const k of names) out[k] = last?.[k] ?? 0;
      return out;
    }
    case 'mean':
    case 'mean_all_turns': {
      const over = rule === 'mean' ? verified.length : turnCount;
      for (const k of names) out[k] = verified.reduce((sum, t) => sum + (t[k] ?? 0), 0) / over;
      return out;
    }
  }
}

/**
 * A turn's threshold: a number is the least reward the turn's scores must make (the bundle's
 * reward rule applied to them); an object names scores and the least each must reach (a score
 * the turn did not report falls short).
 */
export type MinReward = number | Record<string, number>;

export function meetsMinReward(scores: Scores, min: MinReward, reward: (s: Scores) => number): { ok: true } | { ok: false; why: string } {
  if (typeof min === 'number') {
    let r: number;
    try {
      r = reward(scores);
    } catch (e) {
      return { ok: false, why: `no reward from the turn's scores (${(e as Error).message}), so not the min_reward ${min}` };
    }
    return r >= min ? { ok: true } : { ok: false, why: `the turn's reward ${r} is under its min_reward ${min}` };
  }
  for (const [name, least] of Object.entries(min)) {
    const v = scores[name];
    if (v === undefined) return { ok: false, why: `the turn reported no score "${name}", which min_reward requires to be at least ${least}` };
    if (v < least) return { ok: false, why: `the turn's score "${name}" is ${v}, under its min_reward ${least}` };
  }
  return { ok: true };
}
