/**
 * One episode's standing at the gateway: its credential, upstream and budgets, what it has used,
 * the requests it has open, and whether its model access has ended (and why). The budgets are
 * decided here: a call is admitted (with the part of the token budget it holds while it runs, and
 * the reply cap that leaves it), waits for calls in flight to give their part back, or is refused;
 * a finished call is settled, and an end is given to the observer once and cuts every open
 * request short.
 */
import type { ReplyCap } from './apis.js';
import type { Credential } from './credentials.js';
import type { Door } from './door.js';
import type { Usage } from './reassembly.js';
import type { CallOutcome, GatewayEnd, GatewayEndReason, GatewayObserver, ModelCallRecord } from './records.js';
import type { Budgets, Upstream } from './upstream.js';

/** what a harness gets for each way model access ends */
export const END_STATUS: Record<GatewayEndReason, number> = {
  model_calls_exhausted: 429,
  model_tokens_exhausted: 429,
  model_time_exhausted: 429,
  model_upstream_error: 502,
  model_upstream_timeout: 504,
};

/** why a running request stopped early: set as its abort reason */
export interface Stop {
  kind: 'timeout' | 'stall' | 'too_large' | 'client_gone' | 'cut_short';
  message: string;
  /** cut_short: the code and status the harness is given */
  code?: string;
  status?: number;
}

interface OpenRequest {
  abort: AbortController;
  done: Promise<void>;
}

/**
 * The part of the token budget a call in flight holds: the most its reply may count (its cap
 * times its choices), or, for a call with no cap, all that was left. Prompts are not held: their
 * tokens are known only once the upstream reports them.
 */
export interface Hold {
  readonly tokens: number;
  /** the cap per choice the request goes with (null: the harness's own, or none) */
  readonly cap: number | null;
}

export type Admission = { hold: Hold } | { refused: GatewayEndReason } | { stopped: true };

export class EpisodeGate {
  /** null until the door listens (no connection can come before) */
  door: Door | null = null;
  calls = 0;
  /** counted: the upstream's usage of each call, else the estimate (call.ts) */
  tokens = 0;
  /** model calls in flight: waiting for the budget, forwarded, or read on after their harness hung up */
  forwarding = 0;
  ended: GatewayEnd | null = null;
  revoked = false;
  private seq = 0;
  private readonly requests = new Set<OpenRequest>();
  private readonly holds = new Set<Hold>();
  private held = 0;
  private readonly waiters = new Set<() => void>();
  private wallTimer: NodeJS.Timeout | null = null;

  constructor(
    /** the episode's id; a warm-pool env's own id until an episode takes it (bind) */
    public id: string,
    readonly credential: Credential,
    public upstream: Upstream,
    public budgets: Budgets,
    private readonly observer: GatewayObserver,
    /** the door admits by source alone and sends the harness's own key upstream (IssueRequest.harnessKey) */
    readonly forwardsHarnessKey = false,
    /** false for a warm-pool env's credential until an episode takes the env: its calls are refused */
    public bound = true,
  ) {}

  /** a warm-pool env's credential goes to the episode that took the env: its calls are that episode's from now on */
  bind(episodeId: string, upstream: Upstream, budgets: Budgets): void {
    this.id = episodeId;
    this.upstream = upstream;
    this.budgets = budgets;
    this.bound = true;
    this.startClock();
  }

  /** the wall-time budget starts (when the credential is handed out) */
  startClock(): void {
    const s = this.budgets.wall_time_s;
    if (s === undefined) return;
    // held (not unref'd): a harness episode may wait on it; revoke() and close() clear it
    this.wallTimer = setTimeout(() => this.end('model_time_exhausted', `the episode's model access passed its wall-time budget of ${s} s`), s * 1000);
  }

  /** runs one request, tracked until it settles; `handle` gets the signal that cuts it short */
  open(handle: (signal: AbortSignal) => Promise<void>): void {
    const abort = new AbortController();
    const r: OpenRequest = { abort, done: Promise.resolve() };
    this.requests.add(r);
    r.done = handle(abort.signal).finally(() => this.requests.delete(r));
  }

  /** cuts every open request short and resolves once each has settled (its record given); the door stays for the caller */
  async revoke(): Promise<void> {
    this.revoked = true;
    this.stopClock();
    this.cutShort({ kind: 'cut_short', code: 'episode_ended', status: 410, message: 'the episode ended' });
    await Promise.allSettled([...this.requests].map((r) => r.done));
  }

  /** ends the episode's model access on its own (a budget, the upstream): once, open requests cut short */
  end(reason: GatewayEndReason, message: string): void {
    if (this.ended || this.revoked) return;
    this.ended = { reason, message };
    this.stopClock();
    this.cutShort({ kind: 'cut_short', code: reason, status: END_STATUS[reason], message });
    this.observer.ended?.(this.id, this.ended);
  }

  /**
   * A model call may go upstream (counted), holding its part of the token budget; or the budgets
   * refuse it (and end access for it); or it is stopped (`signal`: its harness hung up, the episode
   * was revoked) while it waited for calls in flight to give back the budget it needs.
   */
  async admit(want: ReplyCap, signal: AbortSignal): Promise<Admission> {
    for (;;) {
      if (signal.aborted || this.revoked) return { stopped: true };
      if (this.ended) return { refused: this.ended.reason };
      const b = this.budgets;
      if (b.calls !== undefined && this.calls >= b.calls) {
        this.end('model_calls_exhausted', `the harness asked for model call ${this.calls + 1}, past the episode's budget of ${b.calls}`);
        return { refused: 'model_calls_exhausted' };
      }
      if (b.tokens !== undefined && this.tokens >= b.tokens) {
        this.end('model_tokens_exhausted', `the episode used ${this.tokens} tokens, its budget is ${b.tokens}`);
        return { refused: 'model_tokens_exhausted' };
      }
      const hold = this.holdFor(want);
      if (hold) {
        this.calls++;
        if (hold.tokens > 0) {
          this.holds.add(hold);
          this.held += hold.tokens;
        }
        return { hold };
      }
      await this.nextRelease(signal);
    }
  }

  /**
   * What a call may hold of the token budget now, or null when it must wait: a capped reply gets
   * its cap lowered to what is left, and waits while calls in flight hold all of it; a reply with
   * no cap holds all that is left, so it runs alone. With nothing in flight there is nothing to
   * wait for, and the call gets what is left (at least a token a choice).
   */
  private holdFor(want: ReplyCap): Hold | null {
    const budget = this.budgets.tokens;
    if (budget === undefined) return { tokens: 0, cap: null };
    const free = budget - this.tokens - this.held;
    const idle = this.holds.size === 0;
    if (want.cap === null) return idle ? { tokens: free, cap: null } : null;
    const each = Math.floor(free / want.choices);
    if (each < 1 && !idle) return null;
    const cap = Math.max(1, Math.min(want.cap, each));
    return { tokens: cap * want.choices, cap };
  }

  /** resolves when a call in flight gives its hold back, or `signal` fires */
  private nextRelease(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        this.waiters.delete(wake);
        signal.removeEventListener('abort', wake);
        resolve();
      };
      this.waiters.add(wake);
      signal.addEventListener('abort', wake);
    });
  }

  /** the call's part of the budget is given back (idempotent): its count is in `tokens` now, or it never went */
  release(hold: Hold | null): void {
    if (!hold || !this.holds.delete(hold)) return;
    this.held -= hold.tokens;
    for (const wake of [...this.waiters]) wake();
  }

  /** what a finished model call means for the budgets and the episode's access */
  settle(outcome: CallOutcome, usage: Usage | null, error: string | null, hold: Hold | null): void {
    if (usage) this.tokens += usage.total_tokens;
    // the waiters woken here look again once this returns: after any end it causes
    this.release(hold);
    if (outcome === 'upstream_error') this.end('model_upstream_error', error ?? 'the model upstream failed');
    else if (outcome === 'upstream_timeout') this.end('model_upstream_timeout', error ?? 'the model upstream did not answer in time');
    else if (this.budgets.tokens !== undefined && this.tokens > this.budgets.tokens) {
      this.end('model_tokens_exhausted', `the episode used ${this.tokens} tokens, past its budget of ${this.budgets.tokens}`);
    }
  }

  report(record: Omit<ModelCallRecord, 'episode_id' | 'seq'>): void {
    this.observer.call?.({ episode_id: this.id, seq: ++this.seq, ...record });
  }

  private cutShort(stop: Stop): void {
    for (const r of this.requests) r.abort.abort(stop);
  }

  private stopClock(): void {
    if (this.wallTimer) clearTimeout(this.wallTimer);
    this.wallTimer = null;
  }
}
