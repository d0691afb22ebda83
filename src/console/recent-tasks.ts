/** The console's per-task view: counts and rewards of each task over the last N ended episodes kept. */
import type { EpisodeSummary, RecentTask } from '../protocol/console.js';

/** `ended` newest first (as EpisodeHistory.endedSummaries gives them); tasks with most episodes first */
export function recentTasks(ended: readonly EpisodeSummary[]): RecentTask[] {
  const byTask = new Map<string, RecentTask & { sum: number }>();
  for (const e of ended) {
    let t = byTask.get(e.task_id);
    if (!t) {
      // the first seen is the newest
      t = { task_id: e.task_id, split: e.split, ended: 0, failed: 0, n: 0, mean: null, sum: 0, last_reward: e.reward, last_ended_at: e.ended_at };
      byTask.set(e.task_id, t);
    }
    t.ended++;
    if (e.failure_reason !== null) t.failed++;
    if (e.reward !== null) {
      t.n++;
      t.sum += e.reward;
    }
  }
  return [...byTask.values()]
    .map(({ sum, ...t }) => ({ ...t, mean: t.n ? Math.round((sum / t.n) * 1e6) / 1e6 : null }))
    .sort((a, b) => b.ended - a.ended || a.task_id.localeCompare(b.task_id));
}
