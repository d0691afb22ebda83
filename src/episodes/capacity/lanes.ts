/**
 * The order of the admission queue: one FIFO per lane (src/protocol/lanes.ts), the highest lane
 * served first, and a share for the rest: at least one of every LANE_SHARE.oldestEvery (K) grants
 * goes to the oldest waiter of all, whatever its lane.
 *
 * The rule: a grant goes to the head of the highest lane that has a waiter, unless the K−1 grants
 * before it all went to someone other than the oldest waiter at their time; then it goes to the
 * oldest waiter. What follows (test/episodes/capacity/lanes.test.ts checks each on random runs):
 *
 * - FIFO within a lane: every grant is the head of its lane (the oldest waiter of all is the head
 *   of its own lane, since each lane is in arrival order).
 * - Among any K consecutive grants, one goes to the waiter that was oldest when it was made: K−1
 *   grants in a row to others leave the counter at K−1, which sends the next to the oldest.
 * - No starvation: a waiter that found A older waiters queued is granted within K·(A+1) grants
 *   (plain FIFO: A+1). Newcomers are younger, so the oldest waiter is always it or one of those
 *   A; each run of K grants serves the oldest, so it removes one of the A or serves it.
 * - Higher lanes first: a grant that is not the head of the highest waiting lane went to the
 *   oldest waiter, after K−1 grants in a row that did not.
 *
 * K = 1 is plain FIFO.
 */
import { LANE_SHARE } from '../../defaults.js';
import { LANES, laneRank, type Lane, type LaneCounts } from '../../protocol/lanes.js';

interface Entry<T> {
  value: T;
  /** arrival order across every lane */
  seq: number;
}

export class LaneQueue<T extends { readonly lane: Lane }> {
  /** one FIFO per lane, in LANES order */
  private readonly fifos: Entry<T>[][] = LANES.map(() => []);
  private seq = 0;
  private count = 0;
  /** grants in a row that went to someone other than the oldest waiter */
  private passedOldest = 0;

  constructor(readonly oldestEvery: number = LANE_SHARE.oldestEvery) {
    if (!Number.isInteger(oldestEvery) || oldestEvery < 1) throw new Error(`oldestEvery must be a positive integer, not ${oldestEvery}`);
  }

  get size(): number {
    return this.count;
  }

  sizes(): LaneCounts {
    return Object.fromEntries(LANES.map((lane, i) => [lane, this.fifos[i]!.length])) as LaneCounts;
  }

  push(value: T): void {
    this.fifos[laneRank(value.lane)]!.push({ value, seq: this.seq++ });
    this.count++;
  }

  /** takes a waiter out without granting it (its deadline, its abort); false if it was not queued */
  remove(value: T): boolean {
    const fifo = this.fifos[laneRank(value.lane)]!;
    const i = fifo.findIndex((e) => e.value === value);
    if (i < 0) return false;
    fifo.splice(i, 1);
    this.count--;
    return true;
  }

  /** The next waiter to grant a slot to, out of the queue; undefined when none waits. */
  shift(): T | undefined {
    let top: Entry<T>[] | undefined;
    let oldest: Entry<T>[] | undefined;
    for (const fifo of this.fifos) {
      const head = fifo[0];
      if (!head) continue;
      top ??= fifo;
      if (!oldest || head.seq < oldest[0]!.seq) oldest = fifo;
    }
    if (!top || !oldest) return undefined;
    const pick = top !== oldest && this.passedOldest >= this.oldestEvery - 1 ? oldest : top;
    this.passedOldest = pick === oldest ? 0 : this.passedOldest + 1;
    this.count--;
    return pick.shift()!.value;
  }

  /** every waiter, highest lane first (the drain) */
  values(): T[] {
    return this.fifos.flatMap((fifo) => fifo.map((e) => e.value));
  }

  /**
   * About how many of those queued now are granted before a newcomer of `lane` (for Retry-After):
   * everyone of its lane and above, and of the lanes below those the share serves meanwhile (one
   * per K−1 of the others).
   */
  ahead(lane: Lane): number {
    const rank = laneRank(lane);
    let atOrAbove = 0;
    let below = 0;
    this.fifos.forEach((fifo, i) => (i <= rank ? (atOrAbove += fifo.length) : (below += fifo.length)));
    const share = this.oldestEvery === 1 ? below : Math.floor(atOrAbove / (this.oldestEvery - 1));
    return atOrAbove + Math.min(below, share);
  }
}
