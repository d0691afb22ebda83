/**
 * Episodes' model access through the gateway (src/gateway/, docs/gateway.md): which upstream and
 * budgets an episode gets (its reset's `model` and `model_budgets`, or the server's), its
 * credential issued at its deploy once its network exists (the door on that network, the variables
 * in its env), and revoked before its teardown. The episode machinery holds one of these when the
 * server has a gateway (--model-url or --model-from-reset); the episode calls doorFor() and
 * revoke(), and the runtime tells an episode when its access ended on its own (a budget, the
 * upstream) through the gateway's observer.
 *
 * With a warm pool, a pooled env's door opens at its deploy with a credential bound to no episode
 * (pooledDoor: the server's upstream, its calls refused); the episode that takes the env binds it
 * at the hand-over (handOver), and revokes it at its end like its own; the pool revokes those of
 * envs it discards.
 */
import { BadInputError } from '../errors.js';
import type { ModelGateway } from '../gateway/index.js';
import type { ResetData } from '../protocol/frames.js';
import type { Budgets, Upstream } from '../protocol/model.js';
import type { ModelDoorHook } from '../sandbox/sandbox.js';

export interface ModelAccessOptions {
  gateway: ModelGateway;
  /** the server's upstream (--model-url, --model, the key), if it has one */
  defaultUpstream: Upstream | null;
  /** the model a reset's upstream names when it names none (--model) */
  defaultModel: string | null;
  /** a reset may name its episode's upstream (--model-from-reset) */
  fromReset: boolean;
  /** the server's budgets (--model-calls, --model-tokens, --model-time): a reset's are capped by them */
  budgets: Budgets;
}

/** what an episode's model access will be, decided at its reset */
export interface ModelAsk {
  upstream: Upstream;
  budgets: Budgets;
}

/**
 * The model access a reset asks for, checked: null when the episode gets none (the server has no
 * gateway, or only per-reset upstreams and this reset named none). Throws BadInputError for fields
 * this server does not take.
 */
export function modelAsk(access: ModelAccess | undefined, data: ResetData): ModelAsk | null {
  if (!access) {
    if (data.model !== undefined || data.model_budgets !== undefined) {
      throw new BadInputError('VALIDATION_ERROR', 'data.model: this server has no model gateway (start it with --model-url, or --model-from-reset)');
    }
    return null;
  }
  return access.ask(data);
}

export class ModelAccess {
  private readonly asks = new Map<string, ModelAsk>();
  /** pooled envs' ids whose doors may open or are open, bound to no episode yet */
  private readonly pooled = new Set<string>();

  constructor(private readonly opts: ModelAccessOptions) {}

  get gateway(): ModelGateway {
    return this.opts.gateway;
  }

  ask(data: ResetData): ModelAsk | null {
    const { defaultUpstream, fromReset, budgets } = this.opts;
    if (data.model !== undefined && !fromReset) {
      throw new BadInputError(
        'VALIDATION_ERROR',
        'data.model: this server takes no model upstream at reset (its own is --model-url; --model-from-reset lets a reset name one)',
      );
    }
    const upstream = data.model ? { ...data.model, model: data.model.model ?? this.opts.defaultModel ?? undefined } : defaultUpstream;
    if (!upstream) {
      if (data.model_budgets !== undefined)
        throw new BadInputError('VALIDATION_ERROR', 'data.model_budgets: the reset names no model upstream (data.model) and the server has none');
      return null;
    }
    return { upstream, budgets: capBudgets(budgets, data.model_budgets ?? {}) };
  }

  /** holds what the episode's reset asked for until its deploy */
  hold(episodeId: string, ask: ModelAsk | null): void {
    if (ask) this.asks.set(episodeId, ask);
  }

  /** the hook its env's deploy calls to open its door (undefined: the episode has no model access) */
  doorFor(episodeId: string): ModelDoorHook | undefined {
    const ask = this.asks.get(episodeId);
    if (!ask) return undefined;
    return async (place) => {
      // a deploy that runs on after its episode's teardown began opens no door
      if (this.asks.get(episodeId) !== ask) throw new Error(`episode ${episodeId} ended before its model door opened`);
      const issued = await this.opts.gateway.issue(episodeId, { door: place, upstream: ask.upstream, budgets: ask.budgets });
      return { env: { ...issued.env }, door: { ip: issued.address, port: issued.port } };
    };
  }

  /**
   * The hook a warm-pool env's deploy opens its door with: a credential bound to no episode (its
   * calls refused until handOver). The server's upstream; budgets come with the episode.
   */
  pooledDoor(envId: string): ModelDoorHook {
    this.pooled.add(envId);
    return async (place) => {
      // a deploy that runs on after the pool discarded its env opens no door
      if (!this.pooled.has(envId)) throw new Error(`pooled env ${envId} was discarded before its model door opened`);
      const upstream = this.opts.defaultUpstream;
      const issued = await this.opts.gateway.issue(envId, { door: place, unbound: true, ...(upstream ? { upstream } : {}) });
      return { env: { ...issued.env }, door: { ip: issued.address, port: issued.port } };
    };
  }

  /**
   * A pooled env was handed to `episodeId` (synchronously with the hand-over): its credential is
   * the episode's from now on, with the episode's upstream and budgets, or revoked when the
   * episode has no model access.
   */
  handOver(envId: string, episodeId: string): void {
    if (!this.pooled.delete(envId)) return;
    const ask = this.asks.get(episodeId);
    if (!ask || !this.opts.gateway.bind(envId, episodeId, { upstream: ask.upstream, budgets: ask.budgets })) {
      void this.opts.gateway.revoke(envId).catch(() => undefined);
    }
  }

  /**
   * The door of an E2B sandbox (--e2b-model-door, docs/e2b.md): the server's upstream and budgets,
   * as an episode whose reset named neither gets. With `hostName` (--e2b-model-door-host), that
   * name resolves to the door inside the sandbox and the door takes the harness's own key,
   * sending it upstream (a harness configured outside the sandbox: slime's adapter URL and session
   * id). Null when the server has no upstream of its own.
   */
  sandboxDoor(sandboxId: string, opts: { hostName: string | null; isLive: () => boolean }): ModelDoorHook | null {
    const upstream = this.opts.defaultUpstream;
    if (!upstream) return null;
    return async (place) => {
      // a deploy that runs on after its sandbox ended opens no door
      if (!opts.isLive()) throw new Error(`sandbox ${sandboxId} ended before its model door opened`);
      const issued = await this.opts.gateway.issue(sandboxId, {
        door: place,
        upstream,
        budgets: this.opts.budgets,
        ...(opts.hostName !== null ? { harnessKey: 'forward' as const } : {}),
      });
      return {
        env: { ...issued.env },
        ...(opts.hostName !== null ? { hosts: { [opts.hostName]: issued.address } } : {}),
        door: { ip: issued.address, port: issued.port },
      };
    };
  }

  /**
   * Closes the door of a pooled env that died before its episode's first observation, keeping the
   * episode's ask: the fresh env deployed in its place opens its own (doorFor).
   */
  async dropDoor(episodeId: string): Promise<void> {
    await this.opts.gateway.revoke(episodeId);
  }

  /** ends the episode's model access (calls in flight cut short, each recorded) and closes its door; idempotent */
  async revoke(episodeId: string): Promise<void> {
    this.asks.delete(episodeId);
    this.pooled.delete(episodeId);
    await this.opts.gateway.revoke(episodeId);
  }

  close(): Promise<void> {
    return this.opts.gateway.close();
  }
}

/** each budget at most the server's: a reset may ask for less, never for more */
export function capBudgets(server: Budgets, asked: Budgets): Budgets {
  const out: Budgets = {};
  for (const k of ['calls', 'tokens', 'wall_time_s'] as const) {
    const s = server[k];
    const a = asked[k];
    const v = s === undefined ? a : a === undefined ? s : Math.min(s, a);
    if (v !== undefined) out[k] = v;
  }
  return out;
}
