/**
 * The console's time series (src/console/series.ts) and per-task view, fed by hand with a
 * controlled clock: exact means and counts, windows that follow the data, groups, percentiles,
 * and the memory bounds.
 */
import { describe, expect, it } from 'vitest';
import { recentTasks } from '../../src/console/recent-tasks.js';
import { BUCKET_MS, EpisodeSeries, percentile, type EndedEpisode } from '../../src/console/series.js';
import type { EpisodeSummary } from '../../src/protocol/console.js';

/** the cost means of episodes none of which said what it cost */
const NO_COST = { n: 0, cpu_s: null, peak_memory_bytes: null, bytes_written: null, wall_s: null };

const T0 = Date.UTC(2026, 0, 1, 12, 0, 10);

function ended(over: Partial<EndedEpisode> = {}): EndedEpisode {
  return {
    split: 'eval',
    groups: {},
    endReason: 'finished',
    failureReason: null,
    reward: 0.5,
    scores: null,
    steps: 3,
    turns: 1,
    queuedWithoutStart: null,
    lane: 'normal',
    ...over,
  };
}

function clock() {
  const c = { now: T0, series: null as unknown as EpisodeSeries };
  c.series = new EpisodeSeries({ now: () => c.now });
  return c;
}

describe('EpisodeSeries', () => {
  it('means are exact, from the rewards: three of 0.2 are 0.2, one of 0.9 is 0.9 (not bin centres)', () => {
    const { series } = clock();
    for (const r of [0.2, 0.2, 0.2]) series.ended(ended({ split: 'train', reward: r }));
    series.ended(ended({ split: 'eval', reward: 0.9 }));
    const s = series.view();
    expect(s.rewards.by_split.train).toMatchObject({ n: 3, mean: 0.2 });
    expect(s.rewards.by_split.eval).toMatchObject({ n: 1, mean: 0.9 });
    expect(s.by_split.train!.reward).toEqual({ n: [3], mean: [0.2], p10: [0.2], p90: [0.2] });
    // the histogram still counts each in its bin: 0.2 in [0.2, 0.3), 0.9 in [0.9, 1]
    expect(s.rewards.by_split.train!.counts[3]).toBe(3);
    expect(s.rewards.by_split.eval!.counts[10]).toBe(1);
    expect(s.summary.reward.train).toEqual({ n: 3, mean: 0.2, p10: 0.2, p50: 0.2, p90: 0.2, max: 0.2 });
  });

  it('keeps rewards at their 6 decimals and takes p10/p50/p90 by linear interpolation', () => {
    const { series } = clock();
    const rewards = [0.766412, 0.1, 0.3, 0.5, 0.7, 0.9, 0.2, 0.4, 0.6, 0.8, 1];
    for (const r of rewards) series.ended(ended({ reward: r }));
    const d = series.view().summary.reward.eval!;
    expect(d.n).toBe(11);
    expect(d.mean).toBe(Math.round((rewards.reduce((a, b) => a + b) / 11) * 1e6) / 1e6);
    expect(d.max).toBe(1);
    expect(d).toMatchObject({ p10: 0.2, p50: 0.6, p90: 0.9 });
    expect(percentile([0, 1], 0.5)).toBe(0.5);
    expect(percentile([], 0.5)).toBeNull();
  });

  it('two failure reasons and two splits in the same minute are each counted', () => {
    const { series } = clock();
    series.ended(ended({ split: 'train', endReason: 'env_failed', failureReason: 'env_crashed', reward: null }));
    series.ended(ended({ split: 'eval', endReason: 'env_failed', failureReason: 'invalid_scores', reward: null }));
    series.ended(ended({ split: 'eval', reward: 0.25 }));
    const s = series.view();
    expect(s.failures).toEqual({ env_crashed: [1], invalid_scores: [1] });
    expect(s.end_reasons).toEqual({ env_failed: [2], finished: [1] });
    expect(s.by_split.train).toMatchObject({ ended: [1], failed: [1] });
    expect(s.by_split.eval).toMatchObject({ ended: [2], failed: [1], reward: { n: [1], mean: [0.25] } });
  });

  it('the window follows the data: three minutes of data give three buckets, not sixty', () => {
    const c = clock();
    c.series.ended(ended());
    c.now += 2 * BUCKET_MS;
    c.series.ended(ended({ reward: 1 }));
    const s = c.series.view('1h');
    expect(s.t).toEqual([0, 1, 2].map((i) => (Math.floor(T0 / BUCKET_MS) + i) * 60));
    expect(s.episodes_ended).toEqual([1, 0, 1]);
    expect(s.by_split.eval!.reward.mean).toEqual([0.5, null, 1]);
    expect(s.kept_since).toBe(s.t[0]);
    // a window shorter than the data starts at the window
    c.now += 40 * BUCKET_MS;
    expect(c.series.view('15m').t).toHaveLength(15);
    expect(c.series.view('15m').episodes_ended.every((n) => n === 0)).toBe(true);
    expect(c.series.view('1h').t).toHaveLength(43);
  });

  it('long windows fold minutes together (at most 120 buckets) and keep every count', () => {
    const c = clock();
    for (let m = 0; m < 300; m++) {
      c.series.ended(ended({ reward: m % 2 ? 1 : 0 }));
      c.now += BUCKET_MS;
    }
    const s = c.series.view('6h');
    expect(s.t.length).toBeLessThanOrEqual(120);
    expect(s.bucket_s % 60).toBe(0);
    expect(s.bucket_s).toBeGreaterThan(60);
    expect(s.episodes_ended.reduce((a, b) => a + b)).toBe(300);
    expect(s.rewards.by_split.eval).toMatchObject({ n: 300, mean: 0.5 });
  });

  it('steps, turns and failure counts per split and bucket; per group over the window', () => {
    const { series } = clock();
    series.ended(ended({ groups: { size: '1', zone: 'n' }, reward: 0.2, steps: 2, turns: 1 }));
    series.ended(ended({ groups: { size: '1', zone: 's' }, reward: 0.4, steps: 4, turns: 3 }));
    series.ended(ended({ groups: { size: '4', zone: 's' }, reward: null, failureReason: 'env_crashed', endReason: 'env_failed', steps: 0, turns: 1 }));
    const s = series.view();
    expect(s.by_split.eval).toMatchObject({ ended: [3], failed: [1], steps_mean: [2], turns_mean: [round(5 / 3)] });
    expect(s.groups.eval).toEqual({
      size: {
        '1': { ended: 2, failed: 0, n: 2, mean: 0.3, scores: {}, cost: NO_COST },
        '4': { ended: 1, failed: 1, n: 0, mean: null, scores: {}, cost: NO_COST },
      },
      zone: { n: { ended: 1, failed: 0, n: 1, mean: 0.2, scores: {}, cost: NO_COST }, s: { ended: 2, failed: 1, n: 1, mean: 0.4, scores: {}, cost: NO_COST } },
    });
  });

  it('deploy and queue wait: per bucket, and their distribution over the window; a reset that never started counts its wait', () => {
    const { series } = clock();
    series.started(0.5, 2, 'normal');
    series.started(1.5, 4, 'normal');
    series.ended(ended({ queuedWithoutStart: 3, reward: null, endReason: 'closed' }));
    const s = series.view();
    expect(s.deploy_s).toEqual({ count: [2], mean: [3], max: [4] });
    expect(s.queue_wait_s).toEqual({ count: [3], mean: [round(5 / 3)], max: [3] });
    expect(s.summary.queue_wait_s).toMatchObject({ n: 3, p50: 1.5, max: 3 });
  });

  it('queue wait per lane: each lane its own buckets and distribution beside the total, only lanes that waited in the window', () => {
    const c = clock();
    c.series.started(0.2, 1, 'high');
    c.series.started(4, 1, 'normal');
    c.series.started(6, 1, 'normal');
    c.now += BUCKET_MS;
    c.series.started(0.4, 1, 'high');
    // a reset that never got a slot counts in its own lane
    c.series.ended(ended({ queuedWithoutStart: 8, reward: null, endReason: 'closed', lane: 'normal' }));
    const s = c.series.view();
    expect(Object.keys(s.queue_wait_s_by_lane)).toEqual(['high', 'normal']);
    expect(s.queue_wait_s_by_lane.high).toEqual({ count: [1, 1], mean: [0.2, 0.4], max: [0.2, 0.4] });
    expect(s.queue_wait_s_by_lane.normal).toEqual({ count: [2, 1], mean: [5, 8], max: [6, 8] });
    expect(s.queue_wait_s).toEqual({ count: [3, 2], mean: [round(10.2 / 3), 4.2], max: [6, 8] });
    expect(s.summary.queue_wait_s_by_lane.high).toMatchObject({ n: 2, mean: 0.3, max: 0.4 });
    expect(s.summary.queue_wait_s_by_lane.normal).toMatchObject({ n: 3, p50: 6, max: 8 });
    expect(s.summary.queue_wait_s_by_lane.low).toBeUndefined();
  });

  it('keeps at most its minutes and its samples per minute; counts and means stay exact past the sample bound', () => {
    let now = T0;
    const series = new EpisodeSeries({ now: () => now, minutesKept: 10, samplesPerMinute: 5 });
    for (let i = 0; i < 50; i++) series.ended(ended({ reward: i < 25 ? 0 : 1 }));
    let s = series.view('all');
    expect(s.summary.reward.eval).toMatchObject({ n: 50, mean: 0.5, max: 1 });
    now += 10 * BUCKET_MS;
    series.ended(ended());
    s = series.view('all');
    expect(s.t).toHaveLength(1);
    expect(s.summary.reward.eval).toMatchObject({ n: 1 });
  });
});

describe('recentTasks', () => {
  const summary = (task_id: string, reward: number | null, failure_reason: string | null = null): EpisodeSummary =>
    ({ task_id, split: 'eval', reward, failure_reason, ended_at: '2026-01-01T00:00:00.000Z' }) as EpisodeSummary;
  it('counts each task over the episodes given, most episodes first, with the newest reward', () => {
    const out = recentTasks([summary('a', 1), summary('b', 0.2), summary('a', 0), summary('a', null, 'env_crashed')]);
    expect(out).toEqual([
      {
        task_id: 'a',
        split: 'eval',
        ended: 3,
        failed: 1,
        n: 2,
        mean: 0.5,
        scores: {},
        cost: NO_COST,
        last_reward: 1,
        last_ended_at: '2026-01-01T00:00:00.000Z',
      },
      {
        task_id: 'b',
        split: 'eval',
        ended: 1,
        failed: 0,
        n: 1,
        mean: 0.2,
        scores: {},
        cost: NO_COST,
        last_reward: 0.2,
        last_ended_at: '2026-01-01T00:00:00.000Z',
      },
    ]);
  });
});

function round(x: number): number {
  return Math.round(x * 1e6) / 1e6;
}
