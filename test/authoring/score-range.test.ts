/** Declared score ranges (bundle.json "scores"): a score out of its range fails the episode as a non-finite one does. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkScores } from '../../src/episodes/reward.js';
import { startProcessServer, type ProcessServer } from '../support/process-server.js';
import { WsClient } from '../../scripts/lib/ws-client.js';

describe('checkScores with declared ranges', () => {
  const declared = { quality: { min: 0, max: 1 } };
  it('keeps scores within their range, ends included, and undeclared scores whatever they are', () => {
    expect(checkScores({ quality: 0, other: 42 }, declared)).toEqual({ scores: { quality: 0, other: 42 } });
    expect(checkScores({ quality: 1 }, declared)).toEqual({ scores: { quality: 1 } });
  });
  it('refuses a score out of its range, naming it, its value and the range', () => {
    expect(checkScores({ quality: 1.5 }, declared)).toEqual({
      problem: 'score "quality" is 1.5, outside its declared range [0, 1] (bundle.json scores.quality)',
      outOfRange: true,
    });
    expect(checkScores({ quality: -0.01 }, declared)).toMatchObject({ problem: expect.stringContaining('outside its declared range') });
  });
});

describe('an episode whose env reports a score out of its declared range', () => {
  let s: ProcessServer;
  beforeAll(async () => {
    s = await startProcessServer();
  });
  afterAll(async () => {
    await s?.stop();
  });

  it('ends env_failed with invalid_scores and no reward; one in range is scored', async () => {
    const ws = await WsClient.open(s.url);
    try {
      await ws.reset({ task_id: 'fx-echo-2' });
      const out = await ws.call('finish_now', { score: 1.5 });
      expect(out.data).toMatchObject({ done: true, reward: null });
      expect(out.data.observation).toMatchObject({ end_reason: 'env_failed', failure: { reason: 'invalid_scores', retryable: false } });
      expect(out.data.observation.failure.message).toContain('score "quality" is 1.5, outside its declared range [0, 1]');
      expect(out.data.observation.failure.message).toMatch(/^the env reported scores out of their declared range: /);

      await ws.reset({ task_id: 'fx-echo-2' });
      const ok = await ws.call('finish_now', { score: 1 });
      expect(ok.data).toMatchObject({ done: true, reward: 1, observation: { end_reason: 'finished', scores: { quality: 1 } } });
    } finally {
      await ws.close();
    }
  });
});
