/**
 * Each score's mean beside the mean reward (the console's group and task tables, as vf-eval
 * prints each rubric function's mean): per score name, the scored episodes that reported it and
 * their sum, exact; the mean rounded to the 6 decimals rewards carry.
 */
import type { ScoreMeans } from '../protocol/console.js';
import type { Scores } from '../protocol/observations.js';

export class ScoreSums {
  private readonly sums = new Map<string, { n: number; sum: number }>();

  /** a scored episode's scores (null: it reported none) */
  add(scores: Readonly<Scores> | null): void {
    for (const [name, v] of Object.entries(scores ?? {})) this.addSum(name, 1, v);
  }

  /** another set of sums (a bucket's, into the window's) */
  merge(other: ScoreSums): void {
    for (const [name, s] of other.sums) this.addSum(name, s.n, s.sum);
  }

  /** score name → mean, by name */
  means(): ScoreMeans {
    const names = [...this.sums.keys()].sort();
    return Object.fromEntries(names.map((name) => [name, Math.round((this.sums.get(name)!.sum / this.sums.get(name)!.n) * 1e6) / 1e6]));
  }

  private addSum(name: string, n: number, sum: number): void {
    const s = this.sums.get(name);
    if (s) {
      s.n += n;
      s.sum += sum;
    } else this.sums.set(name, { n, sum });
  }
}
