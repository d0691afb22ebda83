/**
 * The server's own address pool for episode networks. Docker's default pools hold about 30 bridge
 * networks; carving /28s out of a private /16 gives thousands. Another process (or another server
 * instance) may already use part of the range: the engine then refuses with "pool overlaps", and
 * that subnet is set aside for a while instead of being tried again by every deploy.
 */
import { formatIPv4, parseCidr } from '../../util/cidr.js';
import { SandboxError } from '../sandbox.js';

/** A subnet the engine reports in use by someone else is retried after this long. */
const FOREIGN_SUBNET_RETRY_MS = 60_000;

export interface Subnet {
  index: number;
  /** e.g. 10.213.0.16/28 */
  cidr: string;
  /** first usable address, e.g. 10.213.0.17 */
  gateway: string;
}

export interface SubnetPoolOptions {
  /** CIDR of the whole pool, e.g. 10.213.0.0/16 */
  pool: string;
  /** prefix length of each episode subnet, e.g. 28 (14 usable addresses) */
  prefix: number;
  /** how long a subnet the engine reported as taken by someone else is skipped */
  foreignTtlMs?: number;
  now?: () => number;
}

export class SubnetPool {
  private readonly base: number;
  private readonly size: number;
  private readonly prefix: number;
  readonly capacity: number;
  readonly description: string;
  private readonly held = new Map<string, number>();
  private readonly heldIndexes = new Set<number>();
  private readonly foreignUntil = new Map<number, number>();
  private cursor = 0;
  private readonly foreignTtlMs: number;
  private readonly now: () => number;

  constructor(opts: SubnetPoolOptions) {
    const pool = parseCidr(opts.pool);
    if ('problem' in pool) throw new Error(`subnet pool: ${pool.problem}`);
    const poolPrefix = pool.prefix;
    if (!Number.isInteger(opts.prefix) || opts.prefix < poolPrefix || opts.prefix > 29) {
      throw new Error(`episode subnet prefix must be an integer between /${poolPrefix} and /29, got /${opts.prefix}`);
    }
    const poolSize = 2 ** (32 - poolPrefix);
    const start = pool.base;
    this.base = start;
    this.prefix = opts.prefix;
    this.size = 2 ** (32 - opts.prefix);
    this.capacity = poolSize / this.size;
    this.description = `${opts.pool} (/${opts.prefix} subnets)`;
    this.foreignTtlMs = opts.foreignTtlMs ?? FOREIGN_SUBNET_RETRY_MS;
    this.now = opts.now ?? Date.now;
  }

  subnet(index: number): Subnet {
    const net = this.base + index * this.size;
    return { index, cidr: `${formatIPv4(net)}/${this.prefix}`, gateway: formatIPv4(net + 1) };
  }

  /** the next free subnet, held by `owner` until released; throws when none is left */
  acquire(owner: string): Subnet {
    if (this.held.has(owner)) throw new Error(`subnet pool: ${owner} already holds a subnet`);
    const now = this.now();
    for (let i = 0; i < this.capacity; i++) {
      const index = (this.cursor + i) % this.capacity;
      if (this.heldIndexes.has(index)) continue;
      const until = this.foreignUntil.get(index);
      if (until !== undefined) {
        if (until > now) continue;
        this.foreignUntil.delete(index);
      }
      // Round robin rather than lowest-first: a just-released subnet is reused last, which keeps
      // a slow engine-side cleanup from colliding with the next episode.
      this.cursor = (index + 1) % this.capacity;
      this.held.set(owner, index);
      this.heldIndexes.add(index);
      return this.subnet(index);
    }
    throw new SandboxError(
      'engine_failed',
      `the subnet pool ${this.description} has no free subnet: ${this.held.size} held by episodes, ` +
        `${this.foreignUntil.size} used by other networks on the engine; widen --subnet-pool or lower max_concurrent_envs`,
    );
  }

  /** the engine says another network uses this owner's subnet: give it up and skip it for a while */
  markForeign(owner: string): void {
    const index = this.held.get(owner);
    if (index === undefined) return;
    this.release(owner);
    this.foreignUntil.set(index, this.now() + this.foreignTtlMs);
  }

  /** call only once the owner's network is gone from the engine */
  release(owner: string): void {
    const index = this.held.get(owner);
    if (index === undefined) return;
    this.held.delete(owner);
    this.heldIndexes.delete(index);
  }

  holds(owner: string): boolean {
    return this.held.has(owner);
  }

  get inUse(): number {
    return this.held.size;
  }
}
