import { describe, expect, it } from 'vitest';
import { makeReward } from '../../src/episodes/reward.js';
import { scoreOf } from '../../src/episodes/scoring.js';

describe('scoreOf', () => {
  const mean = makeReward(undefined);
  const declared = { a: { min: 0, max: 1 } };

  it('turns checked scores into their reward', () => {
    expect(scoreOf({ a: 0.5, b: 1.5 }, declared, mean)).toEqual({ scores: { a: 0.5, b: 1.5 }, reward: 1 });
    expect(scoreOf({ a: 0.25 }, undefined, makeReward('max'))).toEqual({ scores: { a: 0.25 }, reward: 0.25 });
  });

  it('fails scores that are not an object of numbers, or none', () => {
    expect(scoreOf([1], declared, mean)).toEqual({
      reason: 'invalid_scores',
      message: 'the env reported invalid scores: scores is not an object of named numbers',
    });
    expect(scoreOf({}, declared, mean)).toEqual({ reason: 'invalid_scores', message: 'the env reported invalid scores: the env reported no score' });
  });

  it('fails a declared score out of its range with the range named', () => {
    expect(scoreOf({ a: 2 }, declared, mean)).toEqual({
      reason: 'invalid_scores',
      message: 'the env reported scores out of their declared range: score "a" is 2, outside its declared range [0, 1] (bundle.json scores.a)',
    });
  });

  it('fails when the reward function throws or returns a non-finite number', () => {
    expect(scoreOf({ a: 1 }, declared, makeReward('b'))).toEqual({
      reason: 'invalid_scores',
      message: 'no reward from the scores {"a":1}: the env reported no score "b" (reward = "b"); it reported a',
    });
    expect(scoreOf({ a: 1 }, declared, () => NaN)).toEqual({
      reason: 'invalid_scores',
      message: 'no reward from the scores {"a":1}: the reward function returned NaN',
    });
  });
});
