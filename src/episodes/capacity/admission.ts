/**
 * Admission: at most `capacity` slots are held at once; further requests wait in the queue, each
 * in its lane (lanes.ts: higher lanes first, FIFO within a lane, a bounded share for the lower
 * ones), each until its own deadline or abort. A released slot goes straight to the waiter the
 * queue names next, so a newcomer can never take a slot while anyone waits. Every waiter gets
 * exactly one outcome.
 */
import { abortError } from '../../util/abort.js';
import { CapacityError, ShuttingDownError } from '../../errors.js';
import { DEFAULT_LANE, type Lane, type LaneCounts } from '../../protocol/lanes.js';
import { fmtS, seconds3 } from '../../util/time.js';
import { LaneQueue } from './lanes.js';

/** Recent slot hold times the admission queue keeps to estimate Retry-After. */
const HOLD_TIMES_KEPT = 50;

export interface Slot {
  /** idempotent: the first call frees the slot, later calls do nothing */
  release(): void;
  readonly acquiredAt: number;
}

export interface AcquireOptions {
  timeoutMs: number;
  signal?: AbortSignal;
  /** the lane it waits in (default normal) */
  lane?: Lane;
}

interface Waiter {
  readonly lane: Lane;
  enqueuedAt: number;
  resolve: (slot: Slot) => void;
  reject: (err: Error) => void;
  settled: boolean;
  cleanup: () => void;
}

export class Admission {
  private active = 0;
  private readonly queue: LaneQueue<Waiter>;
  private draining: Error | null = null;
  /** recent hold times (ms), to estimate retry_after_s */
  private readonly holds: number[] = [];
  /** told (after the current call stack) each time a slot goes back unclaimed */
  private readonly freeListeners: Array<() => void> = [];

  constructor(
    readonly capacity: number,
    readonly maxWaiting: number,
    private readonly now: () => number = Date.now,
    /** LANE_SHARE.oldestEvery unless a test says otherwise (1: plain FIFO) */
    oldestEvery?: number,
  ) {
    this.queue = new LaneQueue(oldestEvery);
  }

  get activeCount(): number {
    return this.active;
  }

  get waitingCount(): number {
    return this.queue.size;
  }

  /** resets waiting, per lane */
  waitingByLane(): LaneCounts {
    return this.queue.sizes();
  }

  acquire(opts: AcquireOptions): Promise<Slot> {
    const start = this.now();
    const lane = opts.lane ?? DEFAULT_LANE;
    if (this.draining) {
      return Promise.reject(this.draining);
    }
    if (opts.signal?.aborted) return Promise.reject(abortError('aborted'));
    if (this.active < this.capacity && this.queue.size === 0) {
      this.active++;
      return Promise.resolve(this.makeSlot());
    }
    if (this.queue.size >= this.maxWaiting) {
      return Promise.reject(
        new CapacityError(
          `all ${this.capacity} env slots are busy and ${this.queue.size} resets already wait (--max-waiting ${this.maxWaiting}); retry later`,
          this.capacityDetails(0, lane),
        ),
      );
    }
    return new Promise<Slot>((resolve, reject) => {
      const waiter: Waiter = {
        lane,
        enqueuedAt: start,
        settled: false,
        resolve: (slot) => {
          if (waiter.settled) return slot.release();
          waiter.settled = true;
          waiter.cleanup();
          resolve(slot);
        },
        reject: (err) => {
          if (waiter.settled) return;
          waiter.settled = true;
          waiter.cleanup();
          this.remove(waiter);
          reject(err);
        },
        cleanup: () => {},
      };
      const timer = setTimeout(() => {
        const waited = this.now() - start;
        // details are computed before removal so `waiting` counts this waiter as the client saw it
        const details = this.capacityDetails(waited, lane);
        waiter.reject(
          new CapacityError(
            `no env slot became free within the reset timeout (${fmtS(opts.timeoutMs)}): ${this.active} of ${this.capacity} envs are running and ${this.queue.size} resets wait; retry later`,
            details,
          ),
        );
      }, opts.timeoutMs);
      // the reset timeout is a wait a command awaits (check has no listening socket): it keeps the process alive
      const onAbort = () => {
        waiter.reject(abortError('aborted'));
      };
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      waiter.cleanup = () => {
        clearTimeout(timer);
        opts.signal?.removeEventListener('abort', onAbort);
      };
      this.queue.push(waiter);
    });
  }

  /**
   * A slot only if one is free and nobody waits: whoever fills spare slots (the warm pool) never
   * goes ahead of the queue, in any lane. Null otherwise (and while draining).
   */
  tryAcquire(): Slot | null {
    if (this.draining || this.active >= this.capacity || this.queue.size > 0) return null;
    this.active++;
    return this.makeSlot();
  }

  /** `fn` runs (in a later microtask) every time a released slot finds no waiter */
  onSlotFree(fn: () => void): void {
    this.freeListeners.push(fn);
  }

  /** Rejects every waiter and every later acquire with `err`; held slots stay until released. */
  drain(err: Error = new ShuttingDownError()): void {
    this.draining = err;
    for (const w of this.queue.values()) {
      w.reject(err);
    }
  }

  capacityDetails(waitedMs: number, lane: Lane = DEFAULT_LANE) {
    return {
      active_sessions: this.active,
      max_sessions: this.capacity,
      waiting: this.queue.size,
      lane,
      waited_s: seconds3(waitedMs),
      retry_after_s: this.retryAfterS(lane),
    };
  }

  /** A rough wait, from recent hold times, for the resets a newcomer of `lane` would wait behind; 1..300 s. */
  retryAfterS(lane: Lane = DEFAULT_LANE): number {
    const avg = this.holds.length ? this.holds.reduce((a, b) => a + b, 0) / this.holds.length : 10_000;
    const s = Math.ceil(((this.queue.ahead(lane) + 1) * avg) / this.capacity / 1000);
    return Math.min(300, Math.max(1, s));
  }

  private makeSlot(): Slot {
    let released = false;
    const acquiredAt = this.now();
    return {
      acquiredAt,
      release: () => {
        if (released) return;
        released = true;
        this.holds.push(this.now() - acquiredAt);
        if (this.holds.length > HOLD_TIMES_KEPT) this.holds.shift();
        this.handOver();
      },
    };
  }

  /** The freed slot goes to the waiter the queue names next, or back to the pool. */
  private handOver(): void {
    const next = this.queue.shift();
    if (next) {
      next.resolve(this.makeSlot());
    } else {
      this.active--;
      if (this.freeListeners.length > 0) queueMicrotask(() => this.freeListeners.forEach((f) => f()));
    }
  }

  private remove(w: Waiter): void {
    this.queue.remove(w);
  }
}
