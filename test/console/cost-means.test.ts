/**
 * What episodes cost, aggregated for the console: per group over a window (fed as each teardown
 * reads its episode's cost, in whatever minute that is), per task over the episodes kept. Each
 * figure's mean is over the episodes that reported it: a null figure is in no mean.
 */
import { describe, expect, it } from 'vitest';
import { CostSums } from '../../src/console/cost-means.js';
import { recentTasks } from '../../src/console/recent-tasks.js';
import { BUCKET_MS, EpisodeSeries } from '../../src/console/series.js';
import type { EpisodeSummary } from '../../src/protocol/console.js';
import type { EpisodeCost } from '../../src/protocol/observations.js';

const T0 = Date.UTC(2026, 0, 1, 12, 0, 10);
const cost = (cpu_s: number | null, peak: number | null, written: number | null, wall_s: number): EpisodeCost => ({
  cpu_s,
  peak_memory_bytes: peak,
  bytes_written: written,
  wall_s,
});

describe('cost means', () => {
  it('each figure over the episodes that reported it; none: null', () => {
    const sums = new CostSums();
    expect(sums.means()).toEqual({ n: 0, cpu_s: null, peak_memory_bytes: null, bytes_written: null, wall_s: null });
    sums.add(cost(1, 100, null, 2));
    sums.add(cost(2, 201, null, 4.5));
    sums.add(cost(null, null, null, 1));
    sums.add(null);
    expect(sums.means()).toEqual({ n: 3, cpu_s: 1.5, peak_memory_bytes: 151, bytes_written: null, wall_s: 2.5 });
    const more = new CostSums();
    more.add(cost(6, 300, 1000, 0.5));
    sums.merge(more);
    expect(sums.means()).toEqual({ n: 4, cpu_s: 3, peak_memory_bytes: 200, bytes_written: 1000, wall_s: 2 });
  });

  it('per group over the window, across minutes; an ended episode whose cost is not read yet is in no mean', () => {
    let now = T0;
    const series = new EpisodeSeries({ now: () => now });
    const e = {
      split: 'train',
      endReason: 'finished',
      failureReason: null,
      reward: 1,
      scores: null,
      steps: 1,
      turns: 1,
      queuedWithoutStart: null,
      lane: 'normal' as const,
    };
    series.ended({ ...e, groups: { size: 'small' } });
    series.costed({ split: 'train', groups: { size: 'small' }, cost: cost(1, 10, 100, 2) });
    series.ended({ ...e, groups: { size: 'small' } });
    now += BUCKET_MS;
    // the second one's teardown read its cost the next minute
    series.costed({ split: 'train', groups: { size: 'small' }, cost: cost(3, 30, 300, 4) });
    series.ended({ ...e, groups: { size: 'large' } });
    const g = series.view('all').groups.train!.size!;
    expect(g.small).toMatchObject({ ended: 2, cost: { n: 2, cpu_s: 2, peak_memory_bytes: 20, bytes_written: 200, wall_s: 3 } });
    expect(g.large).toMatchObject({ ended: 1, cost: { n: 0, cpu_s: null, wall_s: null } });
  });

  it('per task over the episodes kept', () => {
    const summary = (task_id: string, c: EpisodeCost | null) =>
      ({ task_id, split: 'eval', reward: 1, failure_reason: null, ended_at: null, scores: null, cost: c }) as EpisodeSummary;
    const out = recentTasks([summary('a', cost(1, 100, 0, 1)), summary('a', cost(2, 300, 10, 2)), summary('a', null), summary('b', cost(null, null, null, 5))]);
    expect(out.map((t) => [t.task_id, t.cost])).toEqual([
      ['a', { n: 2, cpu_s: 1.5, peak_memory_bytes: 200, bytes_written: 5, wall_s: 1.5 }],
      ['b', { n: 1, cpu_s: null, peak_memory_bytes: null, bytes_written: null, wall_s: 5 }],
    ]);
  });
});
