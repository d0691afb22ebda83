/**
 * What the gateway tells its observer (the episode machinery: transcripts, --record, the console):
 * one record per call a harness made, and one end per episode whose model access ended on its own
 * (a budget spent, an upstream that failed or stalled). Declared once here; snake_case, as every
 * wire shape of the server.
 */
import type { FailureReason } from '../protocol/observations.js';
import type { ApiName } from './apis.js';
import type { Usage } from './reassembly.js';

/** why an episode's model access ended: reasons of the server's failure table (src/failures.ts) */
export type GatewayEndReason = Extract<
  FailureReason,
  'model_calls_exhausted' | 'model_tokens_exhausted' | 'model_time_exhausted' | 'model_upstream_error' | 'model_upstream_timeout'
>;

export interface GatewayEnd {
  reason: GatewayEndReason;
  message: string;
}

/**
 * How a call ended: `ok` (the upstream answered 2xx and the harness got it whole),
 * `upstream_rejected` (a 4xx, passed through: the request's fault, the episode goes on),
 * `upstream_error` / `upstream_timeout` (the episode's model access ends), `refused` (the gateway
 * answered itself: no credential, unknown path, bad body, too many at once, budget spent),
 * `cut_short` (the episode's access ended, or it was revoked, while the call ran), `client_gone`
 * (the harness hung up first).
 */
export type CallOutcome = 'ok' | 'upstream_rejected' | 'upstream_error' | 'upstream_timeout' | 'refused' | 'cut_short' | 'client_gone';

export interface ModelCallRecord {
  episode_id: string;
  /** 1, 2, … per episode, in the order the calls arrived */
  seq: number;
  /** null: a path the gateway does not serve */
  api: ApiName | null;
  method: string;
  path: string;
  stream: boolean;
  /** epoch milliseconds */
  started_at: number;
  latency_ms: number;
  /** until the upstream's first body byte (a stream's time to first token); null when none came */
  first_byte_ms: number | null;
  /** the status the harness got */
  status: number;
  upstream_status: number | null;
  outcome: CallOutcome;
  /** for `refused` and `cut_short`: the code the harness was given (unauthorized, busy, a budget's reason…) */
  refusal: string | null;
  /** the body as sent upstream (the episode's model in it), null when none */
  request: unknown;
  /** the reply as JSON; a streamed one put back together; a body that was not JSON as { text } */
  response: unknown;
  usage: Usage | null;
  /** what went wrong, for a person */
  error: string | null;
}

export interface GatewayObserver {
  /** every call, once it is over (also refused ones): before revoke() resolves, never after */
  call?(record: ModelCallRecord): void;
  /** once per episode, when its model access ended on its own (never for revoke) */
  ended?(episodeId: string, end: GatewayEnd): void;
}
