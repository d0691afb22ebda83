/**
 * What a verifier leaves in /logs/verifier: `reward.txt`, one number (the score `reward`), or
 * `reward.json`, an object of named numbers (each a score). When both exist, reward.txt is read,
 * as Harbor does. Anything else is a malformed reward, said with what the file holds.
 */
import type { Scores } from '../protocol/observations.js';
import { REWARD_JSON, REWARD_TXT } from './layout.js';

/** the score a reward.txt's number becomes (Harbor's one-dimensional convention) */
export const REWARD_TXT_SCORE = 'reward';

/** the largest reward file read: a reward is a number or a small object of them */
export const REWARD_FILE_MAX_BYTES = 64 * 1024;

export type { Scores };

export type RewardRead = { scores: Scores; file: 'reward.txt' | 'reward.json' } | { problem: string };

function show(text: string): string {
  const t = text.length > 80 ? `${text.slice(0, 77)}…` : text;
  return JSON.stringify(t);
}

/** reward.txt: one finite number, blank space around it allowed */
export function parseRewardText(text: string): RewardRead {
  const trimmed = text.trim();
  const value = trimmed === '' ? NaN : Number(trimmed);
  if (!Number.isFinite(value)) return { problem: `${REWARD_TXT} holds ${show(text)}, not one number` };
  return { scores: { [REWARD_TXT_SCORE]: value }, file: 'reward.txt' };
}

/** reward.json: a non-empty object of finite numbers */
export function parseRewardJson(text: string): RewardRead {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    // a syntax error, or nesting deep enough to exhaust the parser's stack: either way no reward
    return { problem: `${REWARD_JSON} is not JSON the server reads (${(e as Error).message}): ${show(text)}` };
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return { problem: `${REWARD_JSON} holds ${show(text)}, not an object of named numbers` };
  const scores: Scores = {};
  for (const [k, v] of Object.entries(raw)) {
    if (typeof v !== 'number' || !Number.isFinite(v)) return { problem: `${REWARD_JSON}'s "${k}" is ${JSON.stringify(v)}, not a finite number` };
    scores[k] = v;
  }
  if (Object.keys(scores).length === 0) return { problem: `${REWARD_JSON} holds no score` };
  return { scores, file: 'reward.json' };
}
