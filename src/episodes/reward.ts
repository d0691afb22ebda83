/**
 * Scores → reward. The env reports named scores; the reward is the one score when there is one,
 * else their mean, unless `--reward mean|sum|min|max|<score name>` or a function says otherwise.
 */
import type { Scores } from '../protocol/observations.js';

export type { Scores };
export type RewardFn = (scores: Scores) => number;
export type RewardOption = string | RewardFn | undefined;

/** The reward rules that combine every score; any other `reward` names one score. */
export const REWARD_RULES: readonly string[] = ['mean', 'sum', 'min', 'max'];

export function makeReward(option: RewardOption): RewardFn {
  if (typeof option === 'function') return option;
  const values = (s: Scores) => Object.values(s);
  const mean: RewardFn = (s) => {
    const v = values(s);
    return v.length === 0 ? 0 : v.reduce((a, b) => a + b, 0) / v.length;
  };
  switch (option) {
    case undefined:
    case 'mean':
      return mean;
    case 'sum':
      return (s) => values(s).reduce((a, b) => a + b, 0);
    case 'min':
      return (s) => (values(s).length ? Math.min(...values(s)) : 0);
    case 'max':
      return (s) => (values(s).length ? Math.max(...values(s)) : 0);
    default: {
      const name = option;
      return (s) => {
        const v = s[name];
        if (v === undefined) throw new Error(`the env reported no score "${name}" (reward = "${name}"); it reported ${Object.keys(s).join(', ') || 'none'}`);
        return v;
      };
    }
  }
}

/** A declared score's range (bundle.json `scores`): min and max, inclusive. */
export type DeclaredRanges = Readonly<Record<string, { min: number; max: number }>>;

/**
 * Scores must be an object of finite numbers, each declared one within its declared range;
 * returns the scores, or a message saying what is wrong.
 */
export function checkScores(raw: unknown, declared: DeclaredRanges = {}): { scores: Scores } | { problem: string; outOfRange?: true } {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return { problem: 'scores is not an object of named numbers' };
  const scores: Scores = {};
  for (const [k, v] of Object.entries(raw)) {
    if (typeof v !== 'number' || !Number.isFinite(v)) return { problem: `score "${k}" is ${JSON.stringify(v) ?? String(v)}, not a finite number` };
    const range = Object.hasOwn(declared, k) ? declared[k] : undefined;
    if (range && (v < range.min || v > range.max)) {
      return { problem: `score "${k}" is ${v}, outside its declared range [${range.min}, ${range.max}] (bundle.json scores.${k})`, outOfRange: true };
    }
    scores[k] = v;
  }
  if (Object.keys(scores).length === 0) return { problem: 'the env reported no score' };
  return { scores };
}
