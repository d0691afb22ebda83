/** What check counts and compares plays against: the sample of tasks, the declared score ranges, the tallies of golden and empty plays. */
import type { LoadedBundle, Task } from '../../bundle/index.js';
import type { ScoreDeclaration } from '../../bundle/schema.js';
import type { Scores } from '../../protocol/observations.js';
import type { Play } from './play.js';

/** How the plays of one kind (golden, empty) went: passed of played, and the means of the scored ones. */
export interface PlayTally {
  passed: number;
  played: number;
  /** the mean reward of the plays that were scored; null when none was */
  reward: number | null;
  /** each score's mean over the plays that reported it */
  scores: Scores;
}

/** Counts plays and their rewards and scores; `tally()` gives the means. */
export class Plays {
  passed = 0;
  played = 0;
  private readonly rewards: number[] = [];
  private readonly scores = new Map<string, number[]>();

  add(p: Play): void {
    this.played++;
    if (p.reward !== null) this.rewards.push(p.reward);
    for (const [k, v] of Object.entries(p.scores ?? {})) this.scores.set(k, [...(this.scores.get(k) ?? []), v]);
  }

  tally(): PlayTally {
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    return {
      passed: this.passed,
      played: this.played,
      reward: this.rewards.length ? mean(this.rewards) : null,
      scores: Object.fromEntries([...this.scores].map(([k, xs]) => [k, mean(xs)])),
    };
  }
}

const DEFAULT_RANGE = { min: 0, max: 1 };

/** a score's declared range (0..1 when undeclared) and its floor (its min unless declared) */
export function rangeOf(declared: Record<string, ScoreDeclaration> | undefined, score: string): { min: number; max: number; floor: number } {
  const d = declared && Object.hasOwn(declared, score) ? declared[score] : undefined;
  const r = d ?? DEFAULT_RANGE;
  return { min: r.min, max: r.max, floor: d?.floor ?? r.min };
}

/** Evenly spread picks of `n` items of `list`, first and last included. */
export function spread<T>(list: readonly T[], n: number): T[] {
  if (n >= list.length) return [...list];
  const picked = new Set<number>();
  for (let i = 0; i < n; i++) picked.add(n === 1 ? 0 : Math.round((i * (list.length - 1)) / (n - 1)));
  return [...picked].sort((a, b) => a - b).map((i) => list[i] as T);
}

/** Evenly spread over each (split, toolset) group, first and last included; all of them for 'all'. */
export function sampleTasks(bundle: LoadedBundle, tasks: number | 'all', split?: string): Task[] {
  const out: Task[] = [];
  for (const [name, list] of Object.entries(bundle.splits)) {
    if (split !== undefined && name !== split) continue;
    const groups = new Map<string, Task[]>();
    for (const t of list) groups.set(t.toolset, [...(groups.get(t.toolset) ?? []), t]);
    for (const group of groups.values()) out.push(...(tasks === 'all' ? group : spread(group, tasks)));
  }
  return out;
}
