/**
 * The order env images are made in: jobs run in the order they were added (the manifest's), at
 * most `limit` at once, and a job somebody waits for (a reset of its task) moves to the front of
 * those not started. Once stopped, no job starts; the ones running finish (or are cancelled by
 * their own signal) and the rest are settled as stopped. Pure ordering: no engine, no timers.
 */

interface Job {
  key: string;
  run: () => Promise<void>;
}

export class ImageQueue {
  private readonly waiting: Job[] = [];
  private readonly running = new Set<string>();
  private stopped = false;
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly limit: number) {
    if (!(limit >= 1)) throw new Error(`an image queue runs at least one job at once (got ${limit})`);
  }

  /** queues `run` under `key` (once: a key already queued or running is not queued again) */
  add(key: string, run: () => Promise<void>): void {
    if (this.stopped || this.running.has(key) || this.waiting.some((j) => j.key === key)) return;
    this.waiting.push({ key, run });
    this.pump();
  }

  /** moves `key` to the front of the jobs not started; false when it is not waiting (running, done, unknown) */
  first(key: string): boolean {
    const i = this.waiting.findIndex((j) => j.key === key);
    if (i < 0) return false;
    if (i > 0) this.waiting.unshift(...this.waiting.splice(i, 1));
    return true;
  }

  /** the keys not started yet, next first */
  get queued(): string[] {
    return this.waiting.map((j) => j.key);
  }

  get active(): string[] {
    return [...this.running];
  }

  /** no job starts from now on; returns the keys that never will */
  stop(): string[] {
    this.stopped = true;
    const dropped = this.waiting.splice(0).map((j) => j.key);
    this.settleIdle();
    return dropped;
  }

  /** resolves when nothing is queued or running */
  idle(): Promise<void> {
    if (this.waiting.length === 0 && this.running.size === 0) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  private pump(): void {
    while (!this.stopped && this.running.size < this.limit && this.waiting.length > 0) {
      const job = this.waiting.shift()!;
      this.running.add(job.key);
      // a job settles its own outcome; the queue only counts it
      void job
        .run()
        .catch(() => undefined)
        .finally(() => {
          this.running.delete(job.key);
          this.pump();
          this.settleIdle();
        });
    }
  }

  private settleIdle(): void {
    if (this.waiting.length > 0 || this.running.size > 0) return;
    const ws = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of ws) w();
  }
}
