/**
 * The order env images are made in: jobs run in the order they were added (the manifest's), at
 * most `limit` at once. A job somebody waits for (a reset of its task) is urgent: it starts at once,
 * beside the background ones (at most `limit` urgent jobs at once, the rest first in line), and
 * while an urgent job runs or waits no background job starts, so the image a reset waits for gets
 * the engine (the background ones running finish). Once stopped, no job starts; the ones running
 * finish (or are cancelled by their own signal) and the rest are settled as stopped. Pure
 * ordering: no engine, no timers.
 */

interface Job {
  key: string;
  run: () => Promise<void>;
  urgent: boolean;
}

export class ImageQueue {
  private readonly waiting: Job[] = [];
  private readonly running = new Set<string>();
  /** the running jobs that were urgent when they started */
  private readonly urgentRunning = new Set<string>();
  private stopped = false;
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly limit: number) {
    if (!(limit >= 1)) throw new Error(`an image queue runs at least one job at once (got ${limit})`);
  }

  /** queues `run` under `key` (once: a key already queued or running is not queued again) */
  add(key: string, run: () => Promise<void>): void {
    if (this.stopped || this.running.has(key) || this.waiting.some((j) => j.key === key)) return;
    this.waiting.push({ key, run, urgent: false });
    this.pump();
  }

  /**
   * `key` is waited for: it moves to the front of the jobs not started (behind the urgent ones
   * already there) and starts at once unless `limit` urgent jobs run; false when it is not waiting
   * (running, done, unknown)
   */
  first(key: string): boolean {
    const i = this.waiting.findIndex((j) => j.key === key);
    if (i < 0) return false;
    const [job] = this.waiting.splice(i, 1);
    job!.urgent = true;
    const at = this.waiting.findIndex((j) => !j.urgent);
    this.waiting.splice(at < 0 ? this.waiting.length : at, 0, job!);
    this.pump();
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
    while (!this.stopped && this.waiting.length > 0) {
      const next = this.waiting[0]!;
      const background = this.running.size - this.urgentRunning.size;
      // urgent jobs are first in line: one starts while fewer than `limit` urgent ones run; a
      // background one only while none is urgent, running or waiting, and within the bound
      const canStart = next.urgent ? this.urgentRunning.size < this.limit : this.urgentRunning.size === 0 && background < this.limit;
      if (!canStart) return;
      const job = this.waiting.shift()!;
      this.running.add(job.key);
      if (job.urgent) this.urgentRunning.add(job.key);
      // a job settles its own outcome; the queue only counts it
      void job
        .run()
        .catch(() => undefined)
        .finally(() => {
          this.running.delete(job.key);
          this.urgentRunning.delete(job.key);
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
