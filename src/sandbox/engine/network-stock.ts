/**
 * Episode networks made ahead of demand (--network-stock N). A network holds nothing of an
 * episode until the episode's env is attached to it, so it can be made before the reset arrives:
 * a deploy that finds one ready skips the network's creation. Each stocked network is handed to
 * exactly one deploy at a time.
 *
 * - Recycling (`recycle`): when the episode that took a network ends, its env removed and the
 *   network checked empty on the engine by the backend, the network goes back to the stock
 *   (`giveBack`) instead of being removed, and a later deploy takes it. It carries nothing of the
 *   last episode: no container, no endpoint, no alias (they went with the env). Networks that are
 *   out with a live episode count towards the stock's size, so under steady load the engine makes
 *   and removes no network at all; one that does not come back (not empty, a failed removal, the
 *   stock closing or already full) is removed as before and the stock refills behind it.
 *
 * - Keys: a stocked network is made under a key of its own, `net-<uuid>`, labelled on it as its
 *   episode label, so the start sweep and the reconciler find it like any labelled resource. The
 *   stock records which episode took which key, until that episode's removal is done (`forget`).
 * - Refills run one at a time (`parallel`), each in a turn the server gives (`start(turn)`: a refill
 *   turn of --max-concurrent-deploys, which waits while any reset waits), so in a burst larger than
 *   the stock the refills wait for the burst instead of competing with its deploys; a failed
 *   creation pauses the refills with a doubling backoff instead of retrying in a loop.
 * - The stock counts against nothing a user sees: not the env cap, not the networks in use.
 * - close(): no refill starts after it; creations in flight finish and, like every ready network,
 *   are removed; a second close() waits for the same removal.
 */
import { Backoff } from '../../util/backoff.js';
import { randomUUID } from 'node:crypto';
import { NETWORK_STOCK } from '../../defaults.js';
import type { StockStats, StockTurn } from '../sandbox.js';
import type { SandboxLogger } from './logger.js';

export const STOCK_KEY_PREFIX = 'net-';

export interface NetworkStockOptions<N> {
  /** networks kept ready; 0 turns the stock off */
  size: number;
  /** a taken network may come back when its episode ends (giveBack), and counts as the stock's meanwhile */
  recycle?: boolean;
  /** makes one network labelled with `key` as its episode; on failure leaves nothing (or only labelled leftovers) */
  create: (key: string) => Promise<N>;
  /** removes a network the stock made that nobody took */
  remove: (key: string, net: N) => Promise<void>;
  log: SandboxLogger;
  /** what the log calls one, e.g. "bridge" or "overlay" */
  what: string;
  /** creations at once (default NETWORK_STOCK.parallel) */
  parallel?: number;
  /** first pause after a failed creation, doubling up to backoffMaxMs (defaults: NETWORK_STOCK) */
  backoffBaseMs?: number;
  backoffMaxMs?: number;
}

const atOnce: StockTurn = (fn) => fn();

export interface Stocked<N> {
  key: string;
  net: N;
}

export class NetworkStock<N> {
  readonly size: number;
  private readonly opts: NetworkStockOptions<N>;
  private readonly parallel: number;
  private readonly readyNets: Stocked<N>[] = [];
  /** episode id → the network it took (labelled with the key, not the episode) */
  private readonly taken = new Map<string, Stocked<N>>();
  /** keys whose creation waits for its turn or is in flight */
  private readonly making = new Map<string, Promise<void>>();
  /** of those, the keys still waiting for a turn (nothing of them on the engine yet) */
  private readonly waitingTurn = new Set<string>();
  private turn: StockTurn = atOnce;
  private readonly stopping = new AbortController();
  private started = false;
  private closed = false;
  private closing: Promise<void> | null = null;
  private failures = 0;
  /** the pause after each failed creation in a row */
  private readonly pauses: Backoff;
  private pausedUntil = 0;
  private resumeTimer: NodeJS.Timeout | null = null;
  private madeCount = 0;
  private takenCount = 0;
  private missedCount = 0;
  private recycledCount = 0;
  private readonly recycle: boolean;

  constructor(opts: NetworkStockOptions<N>) {
    if (!Number.isInteger(opts.size) || opts.size < 0) throw new Error(`network stock size must be a whole number >= 0, got ${opts.size}`);
    this.size = opts.size;
    this.opts = opts;
    this.parallel = Math.max(1, opts.parallel ?? NETWORK_STOCK.parallel);
    this.recycle = opts.recycle ?? false;
    this.pauses = new Backoff(opts.backoffBaseMs ?? NETWORK_STOCK.backoffBaseMs, opts.backoffMaxMs ?? NETWORK_STOCK.backoffMaxMs);
  }

  /** begins filling, each creation in a `turn` (default: at once); call after the start sweep, which would remove what the stock made */
  start(turn?: StockTurn): void {
    if (this.started || this.closed) return;
    this.started = true;
    if (turn) this.turn = turn;
    this.fill();
  }

  /** a ready network, handed to `envId` for good (recorded until `forget`), or null: the deploy makes its own */
  take(envId: string): Stocked<N> | null {
    if (this.closed) return null;
    const got = this.readyNets.shift() ?? null;
    if (got) {
      this.takenCount++;
      this.taken.set(envId, got);
    } else if (this.size > 0) this.missedCount++;
    this.fill();
    return got;
  }

  /** the key of the network `envId` took, if it took one whose removal is not done */
  keyTakenBy(envId: string): string | undefined {
    return this.taken.get(envId)?.key;
  }

  /** the network `envId` took, if it took one whose removal is not done */
  takenBy(envId: string): Stocked<N> | undefined {
    return this.taken.get(envId);
  }

  /** the episode's removal is done, its taken network with it */
  forget(envId: string): void {
    if (this.taken.delete(envId) && this.recycle) this.fill();
  }

  /** whether a network coming back now would be taken back (recycling on, open, not full) */
  wantsBack(): boolean {
    return this.recycle && !this.closed && this.readyNets.length + this.making.size < this.size;
  }

  /**
   * The episode that took a network has ended, its env removed and the network checked empty by
   * the caller: the network is ready for the next deploy. False when the stock does not take it
   * back (see wantsBack): the caller removes it, then calls forget.
   */
  giveBack(envId: string): boolean {
    const got = this.taken.get(envId);
    if (!got || !this.wantsBack()) return false;
    this.taken.delete(envId);
    this.readyNets.push(got);
    this.recycledCount++;
    return true;
  }

  /**
   * The episode ids behind the episode labels of a sandbox's resources: a stocked key nobody took
   * is no episode's, one an episode took is reported as that episode's.
   */
  envIdsOf(labels: string[]): string[] {
    const takenBy = new Map([...this.taken].map(([episode, s]) => [s.key, episode]));
    const ids = labels.filter((id) => id && !this.holds(id)).map((id) => takenBy.get(id) ?? id);
    return [...new Set(ids)];
  }

  /** the key is a stocked network, ready or being made (nobody's episode yet) */
  holds(key: string): boolean {
    return this.making.has(key) || this.readyNets.some((s) => s.key === key);
  }

  get ready(): number {
    return this.readyNets.length;
  }

  /** stocked networks that exist or may exist on the engine, ready or being made (not those waiting for a turn) */
  get held(): number {
    return this.readyNets.length + this.creating;
  }

  /** creations past their turn, on the engine now */
  private get creating(): number {
    return this.making.size - this.waitingTurn.size;
  }

  stats(): StockStats {
    return {
      size: this.size,
      ready: this.readyNets.length,
      making: this.creating,
      made: this.madeCount,
      taken: this.takenCount,
      missed: this.missedCount,
      recycled: this.recycledCount,
      out: this.recycle ? this.taken.size : 0,
    };
  }

  private fill(): void {
    if (!this.started || this.closed) return;
    if (Date.now() < this.pausedUntil) return;
    // recycling: networks out with live episodes come back, so they count as the stock's
    const out = this.recycle ? this.taken.size : 0;
    while (this.readyNets.length + this.making.size + out < this.size && this.making.size < this.parallel) {
      const key = `${STOCK_KEY_PREFIX}${randomUUID()}`;
      this.waitingTurn.add(key);
      const made = this.turn(() => {
        this.waitingTurn.delete(key);
        return this.opts.create(key);
      }, this.stopping.signal).then(
        (net) => {
          this.making.delete(key);
          this.madeCount++;
          this.failures = 0;
          this.pauses.reset();
          if (this.closed) return this.discard({ key, net });
          this.readyNets.push({ key, net });
          this.fill();
        },
        (err: unknown) => {
          this.making.delete(key);
          // closed while it waited for its turn: nothing was made
          if (this.waitingTurn.delete(key) && this.closed) return;
          this.failures++;
          const pauseMs = this.pauses.next();
          this.opts.log.warn(
            { key, failures: this.failures, pause_ms: pauseMs, err: (err as Error).message },
            `could not make a ${this.opts.what} ahead of demand; deploys make their own, the stock retries in ${Math.round(pauseMs / 1000)} s`,
          );
          this.pause(pauseMs);
        },
      );
      this.making.set(key, made);
    }
  }

  private pause(ms: number): void {
    if (this.closed) return;
    this.pausedUntil = Date.now() + ms;
    if (this.resumeTimer) clearTimeout(this.resumeTimer);
    this.resumeTimer = setTimeout(() => {
      this.resumeTimer = null;
      this.pausedUntil = 0;
      this.fill();
    }, ms);
    this.resumeTimer.unref?.();
  }

  private async discard(s: Stocked<N>): Promise<void> {
    try {
      await this.opts.remove(s.key, s.net);
    } catch (err) {
      this.opts.log.warn({ key: s.key, err: (err as Error).message }, `could not remove a stocked ${this.opts.what}; the next start sweep removes it`);
    }
  }

  /**
   * Stops refilling, waits for creations in flight, removes every network nobody took. Every call
   * (the drain's, then the sandbox's close) waits for that same removal.
   */
  close(): Promise<void> {
    return (this.closing ??= this.removeAll());
  }

  private async removeAll(): Promise<void> {
    this.closed = true;
    this.stopping.abort(new Error('the network stock is closing'));
    if (this.resumeTimer) clearTimeout(this.resumeTimer);
    this.resumeTimer = null;
    // a creation waiting for its turn gives it up; one finishing after this point removes its own network (see fill)
    await Promise.all([...this.making.values()]);
    const left = this.readyNets.splice(0);
    await Promise.all(left.map((s) => this.discard(s)));
  }
}
