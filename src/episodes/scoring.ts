/**
 * An episode's scoring: the raw scores its env's /finish, a tool's done reply or its verifier
 * reported, checked against the bundle's declared ranges (reward.ts) and turned into a reward by
 * the server's reward function; or the failure (`invalid_scores`) that says why they could not be.
 * Pure: the episode (episode.ts) ends itself with what this decides.
 */
import { invalidScoresMessage } from '../failures.js';
import { checkScores, type DeclaredRanges, type RewardFn, type Scores } from './reward.js';

export type ScoringResult = { scores: Scores; reward: number } | { reason: 'invalid_scores'; message: string };

/** `raw` scored: its checked scores and their finite reward, or why there is none. */
export function scoreOf(raw: unknown, declared: DeclaredRanges | undefined, reward: RewardFn): ScoringResult {
  const checked = checkScores(raw, declared);
  if ('problem' in checked) {
    return { reason: 'invalid_scores', message: invalidScoresMessage(checked.outOfRange ? 'out_of_range' : 'not_scores', checked.problem) };
  }
  try {
    const value = reward(checked.scores);
    if (!Number.isFinite(value)) throw new Error(`the reward function returned ${value}`);
    return { scores: checked.scores, reward: value };
  } catch (e) {
    return { reason: 'invalid_scores', message: invalidScoresMessage('no_reward', `${JSON.stringify(checked.scores)}: ${(e as Error).message}`) };
  }
}
