/**
 * FIFO admission: at most `capacity` slots are held at once; further requests wait in arrival
 * order, each until its own deadline or abort. A released slot goes straight to the head waiter,
 * so a newcomer can never overtake the queue. Every waiter gets exactly one outcome.
 */
import { abortError } from '../abort.js';
import { HOLD_TIMES_KEPT } from '../defaults.js';
import { CapacityError, ShuttingDownError } from '../errors.js';
import { fmtS, seconds3 } from '../time.js';

export interface Slot {
  /** idempotent: the first call frees the slot, later calls do nothing */
  release(): void;
  readonly acquiredAt: number;
}

export interface AcquireOptions {
  timeoutMs: number;
  signal?: AbortSignal;
}

interface Waiter {
  enqueuedAt: number;
  resolve: (slot: Slot) => void;
  reject: (err: Error) => void;
  settled: boolean;
  cleanup: () => void;
}

export class Admission {
  private active = 0;
  private readonly queue: Waiter[] = [];
  private draining: Error | null = null;
  /** recent hold times (ms), to estimate retry_after_s */
  private readonly holds: number[] = [];
  /** told (after the current call stack) each time a slot goes back unclaimed */
  private readonly freeListeners: Array<() => void> = [];

  constructor(
    readonly capacity: number,
    readonly maxWaiting: number,
    private readonly now: () => number = Date.now,
  ) {}

  get activeCount(): number {
    return this.active;
  }

  get waitingCount(): number {
    return this.queue.length;
  }

  acquire(opts: AcquireOptions): Promise<Slot> {
    const start = this.now();
    if (this.draining) {
      return Promise.reject(this.draining);
    }
    if (opts.signal?.aborted) return Promise.reject(abortError('aborted'));
    if (this.active < this.capacity && this.queue.length === 0) {
      this.active++;
      return Promise.resolve(this.makeSlot());
    }
    if (this.queue.length >= this.maxWaiting) {
      return Promise.reject(
        new CapacityError(
          `all ${this.capacity} env slots are busy and ${this.queue.length} resets already wait (--max-waiting ${this.maxWaiting}); retry later`,
          this.capacityDetails(0),
        ),
      );
    }
    return new Promise<Slot>((resolve, reject) => {
      const waiter: Waiter = {
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
        const details = this.capacityDetails(waited);
        waiter.reject(
          new CapacityError(
            `no env slot became free within the reset timeout (${fmtS(opts.timeoutMs)}): ${this.active} of ${this.capacity} envs are running and ${this.queue.length} resets wait; retry later`,
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
   * goes ahead of the FIFO queue. Null otherwise (and while draining).
   */
  tryAcquire(): Slot | null {
    if (this.draining || this.active >= this.capacity || this.queue.length > 0) return null;
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
    for (const w of [...this.queue]) {
      w.reject(err);
    }
  }

  capacityDetails(waitedMs: number) {
    return {
      active_sessions: this.active,
      max_sessions: this.capacity,
      waiting: this.queue.length,
      waited_s: seconds3(waitedMs),
      retry_after_s: this.retryAfterS(),
    };
  }

  /** A rough wait for the queue ahead to drain, from recent hold times; 1..300 s. */
  retryAfterS(): number {
    const avg = this.holds.length ? this.holds.reduce((a, b) => a + b, 0) / this.holds.length : 10_000;
    const s = Math.ceil(((this.queue.length + 1) * avg) / this.capacity / 1000);
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

  /** The freed slot goes to the head waiter, or back to the pool. */
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
    const i = this.queue.indexOf(w);
    if (i >= 0) this.queue.splice(i, 1);
  }
}
