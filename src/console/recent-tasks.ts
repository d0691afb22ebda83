/** The console's per-task view: counts, rewards, score means and cost means of each task over the last N ended episodes kept. */
import type { EpisodeSummary, RecentTask } from '../protocol/console.js';
import { CostSums } from './cost-means.js';
import { ScoreSums } from './score-means.js';

/** `ended` newest first (as EpisodeHistory.endedSummaries gives them); tasks with most episodes first */
export function recentTasks(ended: readonly EpisodeSummary[]): RecentTask[] {
  const byTask = new Map<string, RecentTask & { sum: number; sums: ScoreSums; costs: CostSums }>();
  for (const e of ended) {
    let t = byTask.get(e.task_id);
    if (!t) {
      // the first seen is the newest
      t = {
        task_id: e.task_id,
        split: e.split,
        ended: 0,
        failed: 0,
        n: 0,
        mean: null,
        scores: {},
        cost: new CostSums().means(),
        last_reward: e.reward,
        last_ended_at: e.ended_at,
        sum: 0,
        sums: new ScoreSums(),
        costs: new CostSums(),
      };
      byTask.set(e.task_id, t);
    }
    t.ended++;
    if (e.failure_reason !== null) t.failed++;
    t.costs.add(e.cost);
    if (e.reward !== null) {
      t.n++;
      t.sum += e.reward;
      t.sums.add(e.scores);
    }
  }
  return [...byTask.values()]
    .map(({ sum, sums, costs, ...t }) => ({ ...t, mean: t.n ? Math.round((sum / t.n) * 1e6) / 1e6 : null, scores: sums.means(), cost: costs.means() }))
    .sort((a, b) => b.ended - a.ended || a.task_id.localeCompare(b.task_id));
}
