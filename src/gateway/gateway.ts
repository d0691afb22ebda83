/**
 * The episode-scoped model gateway: the one endpoint an episode's env may reach. The episode
 * machinery issues a credential per episode (with the door its env reaches, the upstream its calls
 * go to and its budgets) and revokes it when the episode ends. A harness in the env calls the
 * door with the usual SDK variables; each call is checked (door, source, credential, budgets),
 * forwarded to the episode's upstream with the upstream's own headers, streamed back as it arrives,
 * bounded in time and size, and reported to the observer. An episode whose budget is spent, or
 * whose upstream fails or stalls, has its model access ended with a reason of the failure table;
 * nothing of one episode touches another's.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { GATEWAY } from '../defaults.js';
import { describeIssues } from '../protocol/zod-issues.js';
import { errorBody } from './apis.js';
import { Call, sendJson, type GatewayLimits } from './call.js';
import { Credential, newCredential } from './credentials.js';
import { Door, type DoorSpec } from './door.js';
import { EpisodeGate } from './episode-gate.js';
import type { GatewayEnd, GatewayObserver } from './records.js';
import { BudgetsSchema, UpstreamClient, UpstreamSchema, type Budgets, type BudgetsInput, type Upstream, type UpstreamInput } from './upstream.js';

export type { GatewayLimits } from './call.js';

export interface GatewayOptions {
  /** the upstream of an episode whose issue names none (the server's --model-url, --model) */
  defaultUpstream?: UpstreamInput;
  observer?: GatewayObserver;
  limits?: Partial<GatewayLimits>;
}

export interface IssueRequest {
  door: DoorSpec;
  upstream?: UpstreamInput;
  budgets?: BudgetsInput;
  /**
   * The harness brings a key of its own, given it outside its env (slime's session id as its
   * bearer): the door admits by its source alone (the env's subnet, as every door does first),
   * and the key a request presents goes upstream as `Authorization: Bearer`, unless it is the
   * episode's credential (which never leaves the server). The upstream's own headers still go,
   * after it. Absent: only the episode's credential admits a request, and no key goes upstream.
   */
  harnessKey?: 'forward';
  /**
   * A warm-pool env's credential, issued at its deploy before any episode takes it: its calls are
   * refused (403 `not_in_episode`) until bind() gives it to the episode that took the env.
   */
  unbound?: true;
}

/** the variables a harness reads, pointing at the episode's door with its credential */
export interface GatewayEnv {
  OPENAI_BASE_URL: string;
  OPENAI_API_KEY: string;
  ANTHROPIC_BASE_URL: string;
  ANTHROPIC_API_KEY: string;
}

export interface Issued {
  credential: string;
  /** the door, http://address:port */
  origin: string;
  /** where the door listens */
  address: string;
  port: number;
  env: GatewayEnv;
}

export interface EpisodeModelUse {
  calls: number;
  tokens: number;
  in_flight: number;
  ended: GatewayEnd | null;
}

export class GatewayError extends Error {
  override readonly name = 'GatewayError';
}

export class ModelGateway {
  private readonly gates = new Map<string, EpisodeGate>();
  private readonly client = new UpstreamClient();
  private readonly limits: GatewayLimits;
  private readonly defaultUpstream: Upstream | null;
  private readonly observer: GatewayObserver;
  private closed = false;

  constructor(opts: GatewayOptions = {}) {
    this.limits = { ...GATEWAY, ...opts.limits };
    this.defaultUpstream = opts.defaultUpstream ? parseUpstream(opts.defaultUpstream) : null;
    this.observer = opts.observer ?? {};
  }

  /**
   * Opens the episode's door and gives its credential and the variables its harness reads. The
   * upstream defaults to the server's; budgets left out are unbounded (the call bounds still hold).
   */
  async issue(episodeId: string, req: IssueRequest): Promise<Issued> {
    if (this.closed) throw new GatewayError('the model gateway is closed');
    if (this.gates.has(episodeId)) throw new GatewayError(`episode ${episodeId} already has a model credential`);
    const upstream = req.upstream ? parseUpstream(req.upstream) : this.defaultUpstream;
    if (!upstream) throw new GatewayError(`episode ${episodeId} names no model upstream and the server has no default (--model-url)`);
    const gate = new EpisodeGate(
      episodeId,
      new Credential(newCredential()),
      upstream,
      parseBudgets(req.budgets ?? {}),
      this.observer,
      req.harnessKey === 'forward',
      req.unbound !== true,
    );
    this.gates.set(episodeId, gate);
    let door: Door;
    try {
      door = await Door.open(req.door, this.limits, (rq, rs) => gate.open((signal) => this.serve(gate, rq, rs, signal)));
    } catch (err) {
      this.gates.delete(episodeId);
      throw err;
    }
    if (this.gates.get(episodeId) !== gate) {
      // revoked (or the gateway closed) while its door opened: nothing of it may stay open
      await door.close();
      throw new GatewayError(`episode ${episodeId}'s model access was revoked while its door opened`);
    }
    gate.door = door;
    if (gate.bound) gate.startClock();
    const key = gate.credential.value;
    return {
      credential: key,
      origin: door.origin,
      address: door.address,
      port: door.port,
      env: { OPENAI_BASE_URL: `${door.origin}/v1`, OPENAI_API_KEY: key, ANTHROPIC_BASE_URL: door.origin, ANTHROPIC_API_KEY: key },
    };
  }

  /**
   * Gives a warm-pool env's credential (issued `unbound` under the env's id) to the episode that
   * took the env, with that episode's upstream and budgets: from now on its calls are the
   * episode's (its transcript, usage, budgets; revoke(episodeId) ends them). Synchronous, so no
   * call lands between the hand-over and the binding. False when the env has no such credential.
   */
  bind(envId: string, episodeId: string, grant: { upstream?: UpstreamInput; budgets?: BudgetsInput }): boolean {
    const gate = this.gates.get(envId);
    if (!gate || gate.bound || gate.revoked) return false;
    if (this.gates.has(episodeId)) throw new GatewayError(`episode ${episodeId} already has a model credential`);
    const upstream = grant.upstream ? parseUpstream(grant.upstream) : this.defaultUpstream;
    if (!upstream) throw new GatewayError(`episode ${episodeId} names no model upstream and the server has no default (--model-url)`);
    this.gates.delete(envId);
    this.gates.set(episodeId, gate);
    gate.bind(episodeId, upstream, parseBudgets(grant.budgets ?? {}));
    return true;
  }

  /**
   * Ends the episode's model access: calls in flight are cut short (each reported), the door
   * closes, the credential is forgotten. Resolves once every call's record was given. Idempotent.
   */
  async revoke(episodeId: string): Promise<void> {
    const gate = this.gates.get(episodeId);
    if (!gate) return;
    this.gates.delete(episodeId);
    await gate.revoke();
    await gate.door?.close();
  }

  /** the episode's model use so far (null: no credential) */
  use(episodeId: string): EpisodeModelUse | null {
    const g = this.gates.get(episodeId);
    return g ? { calls: g.calls, tokens: g.tokens, in_flight: g.forwarding, ended: g.ended } : null;
  }

  /** the episodes holding a credential */
  get episodes(): string[] {
    return [...this.gates.keys()];
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.gates.keys()].map((id) => this.revoke(id)));
    this.client.close();
  }

  private async serve(gate: EpisodeGate, req: IncomingMessage, res: ServerResponse, signal: AbortSignal): Promise<void> {
    try {
      await new Call(gate, this.limits, this.client, req, res, signal).run();
    } catch (err) {
      // a bug, not a harness's doing: the harness still gets an answer
      if (!res.headersSent) sendJson(res, 500, errorBody('openai', 'gateway_error', `the gateway failed: ${(err as Error).message}`));
      else res.destroy();
    }
  }
}

function parseUpstream(u: unknown): Upstream {
  const r = UpstreamSchema.safeParse(u);
  if (!r.success) throw new GatewayError(`the model upstream: ${describeIssues(r.error, { root: '(root)' })}`);
  return r.data;
}

function parseBudgets(b: unknown): Budgets {
  const r = BudgetsSchema.safeParse(b);
  if (!r.success) throw new GatewayError(`the model budgets: ${describeIssues(r.error, { root: '(root)' })}`);
  return r.data;
}
