/**
 * --max-concurrent-deploys: at most `limit` env deploys (network, container, readiness) run at
 * once, for resets and warm-pool refills alike. A freed turn goes to the oldest waiting reset
 * first, then to the oldest refill: refills yield to resets. A refill that a waiting reset has
 * been promised is promoted to a reset's priority. A turn taken while others were running starts
 * after a small random delay (jitter), so a burst does not reach the engine in lockstep.
 */
import { abortError } from '../../util/abort.js';

export type DeployPriority = 'reset' | 'refill';

export interface DeployTicket {
  /** a queued refill that a reset now waits for: it goes ahead of the other refills */
  promote(): void;
}

interface Queued {
  priority: DeployPriority;
  grant: () => void;
  reject: (err: Error) => void;
}

export interface DeployLimiterOptions {
  limit: number;
  jitterMs?: number;
  random?: () => number;
}

export class DeployLimiter {
  readonly limit: number;
  private running = 0;
  private readonly queue: Queued[] = [];
  private readonly jitterMs: number;
  private readonly random: () => number;
  /** the most deploys that ran at once (tests assert the cap with it) */
  peak = 0;

  constructor(opts: DeployLimiterOptions) {
    this.limit = opts.limit;
    this.jitterMs = opts.jitterMs ?? 0;
    this.random = opts.random ?? Math.random;
  }

  get inFlight(): number {
    return this.running;
  }

  get waiting(): number {
    return this.queue.length;
  }

  /**
   * Runs `fn` once a turn is free. Aborting `signal` while queued rejects with an AbortError and
   * gives the place up; once `fn` runs, the signal is fn's business.
   */
  async run<T>(fn: () => Promise<T>, opts: { priority: DeployPriority; signal?: AbortSignal; ticket?: (t: DeployTicket) => void }): Promise<T> {
    const contended = await this.turn(opts);
    try {
      if (contended && this.jitterMs > 0) {
        await new Promise((r) => setTimeout(r, Math.floor(this.random() * this.jitterMs)));
      }
      if (opts.signal?.aborted) throw abortError(opts.signal.reason);
      return await fn();
    } finally {
      this.release();
    }
  }

  /** resolves with whether the turn had to be waited for, or others were running */
  private turn(opts: { priority: DeployPriority; signal?: AbortSignal; ticket?: (t: DeployTicket) => void }): Promise<boolean> {
    if (opts.signal?.aborted) return Promise.reject(abortError(opts.signal.reason));
    if (this.running < this.limit && this.queue.length === 0) {
      this.running++;
      this.peak = Math.max(this.peak, this.running);
      return Promise.resolve(this.running > 1);
    }
    return new Promise<boolean>((resolve, reject) => {
      const onAbort = () => {
        const i = this.queue.indexOf(q);
        if (i >= 0) this.queue.splice(i, 1);
        reject(abortError(opts.signal?.reason));
      };
      const q: Queued = {
        priority: opts.priority,
        grant: () => {
          opts.signal?.removeEventListener('abort', onAbort);
          resolve(true);
        },
        reject,
      };
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      this.queue.push(q);
      opts.ticket?.({
        promote: () => {
          q.priority = 'reset';
        },
      });
    });
  }

  private release(): void {
    let i = this.queue.findIndex((q) => q.priority === 'reset');
    if (i < 0 && this.queue.length > 0) i = 0;
    if (i < 0) {
      this.running--;
      return;
    }
    const [next] = this.queue.splice(i, 1);
    this.peak = Math.max(this.peak, this.running);
    next!.grant();
  }
}
