/**
 * The console's task search (GET /console/tasks?q=): the tasks of a split whose id contains a
 * string, case-insensitive, without holding the event loop. A split's ids are lowered once (the
 * first search of it), a search scans them TASK_SEARCH.chunk at a time and lets the event loop
 * serve what waits (/health, steps, other searches) between chunks, and recent answers are kept:
 * before, every search lowered and scanned every task in one go (430 ms at a million tasks), and
 * twenty at once held /health for seconds.
 */
import type { Task } from '../bundle/index.js';

/**
 * The console's task search (src/console/task-search.ts): ids scanned `chunk` at a time, the event
 * loop served between chunks; the last `cachedQueries` answers kept, those of at most
 * `cachedMatchesMax` tasks (a million ids scan in tens of milliseconds, in chunks of a fraction of one).
 */
const TASK_SEARCH = { chunk: 8_192, cachedQueries: 32, cachedMatchesMax: 65_536 } as const;

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

export class TaskSearch {
  /** split → its task ids, lowered */
  private readonly lowered = new Map<string, Promise<string[]>>();
  /** `split \0 query` → the indexes of its matches, most recent last */
  private readonly answers = new Map<string, Promise<Int32Array>>();

  constructor(
    private readonly splits: Readonly<Record<string, readonly Task[]>>,
    private readonly settings: { chunk: number; cachedQueries: number; cachedMatchesMax: number } = TASK_SEARCH,
  ) {}

  /** the indexes (in the split, in order) of its tasks whose id contains `query`, case-insensitive; `split` must exist */
  matches(split: string, query: string): Promise<Int32Array> {
    const q = query.toLowerCase();
    const key = `${split}\0${q}`;
    const kept = this.answers.get(key);
    if (kept) {
      this.answers.delete(key);
      this.answers.set(key, kept);
      return kept;
    }
    const answer = this.scan(split, q);
    this.answers.set(key, answer);
    while (this.answers.size > this.settings.cachedQueries) this.answers.delete(this.answers.keys().next().value!);
    answer.then(
      (m) => {
        if (m.length > this.settings.cachedMatchesMax) this.answers.delete(key);
      },
      () => this.answers.delete(key),
    );
    return answer;
  }

  private ids(split: string): Promise<string[]> {
    let ids = this.lowered.get(split);
    if (!ids) {
      ids = this.lower(this.splits[split] ?? []);
      this.lowered.set(split, ids);
    }
    return ids;
  }

  private async lower(tasks: readonly Task[]): Promise<string[]> {
    const out = new Array<string>(tasks.length);
    for (let i = 0; i < tasks.length; i += this.settings.chunk) {
      const end = Math.min(tasks.length, i + this.settings.chunk);
      for (let j = i; j < end; j++) out[j] = tasks[j]!.task_id.toLowerCase();
      if (end < tasks.length) await nextTurn();
    }
    return out;
  }

  private async scan(split: string, q: string): Promise<Int32Array> {
    const ids = await this.ids(split);
    const found: number[] = [];
    for (let i = 0; i < ids.length; i += this.settings.chunk) {
      const end = Math.min(ids.length, i + this.settings.chunk);
      for (let j = i; j < end; j++) if (ids[j]!.includes(q)) found.push(j);
      if (end < ids.length) await nextTurn();
    }
    return Int32Array.from(found);
  }
}
