/**
 * Multi-turn verified tasks (a Harbor task's [[steps]]): each turn's verifier scores that turn;
 * `min_reward` stops the episode after a turn that scores under it; the task's scores combine the
 * turns' by the task's `turn_reward` (docs/bundle-format.md, "verified tasks"):
 * - `mean` (the default): each score's mean over every turn of the task; a turn that was not
 *   played (the episode stopped early) or whose verifier did not report that score counts 0, so
 *   stopping early never scores more than going on would have. (Harbor's own mean leaves unplayed
 *   steps out instead.)
 * - `final`: the last turn's scores; each score 0 when the episode stopped before it.
 */
import type { Scores } from './reward-files.js';

export const TURN_REWARD_RULES = ['mean', 'final'] as const;
export type TurnRewardRule = (typeof TURN_REWARD_RULES)[number];
export const DEFAULT_TURN_REWARD: TurnRewardRule = 'mean';

/** every score name any played turn reported, in first-seen order */
function scoreNames(turns: readonly (Scores | null)[]): string[] {
  const names = new Set<string>();
  for (const t of turns) if (t) for (const k of Object.keys(t)) names.add(k);
  return [...names];
}

/**
 * The task's scores from its turns' (`perTurn[i]` null: turn i was not played), for a task of
 * `turnCount` turns.
 */
export function combineTurnScores(rule: TurnRewardRule, perTurn: readonly (Scores | null)[], turnCount: number): Scores {
  if (turnCount < 1 || perTurn.length > turnCount) throw new Error(`${perTurn.length} turn score(s) for a task of ${turnCount} turn(s)`);
  const names = scoreNames(perTurn);
  const out: Scores = {};
  if (rule === 'final') {
    const last = perTurn.length === turnCount ? perTurn[turnCount - 1] : null;
    for (const k of names) out[k] = last?.[k] ?? 0;
    return out;
  }
  for (const k of names) out[k] = perTurn.reduce((sum, t) => sum + (t?.[k] ?? 0), 0) / turnCount;
  return out;
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
