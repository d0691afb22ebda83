/**
 * What the gateway tells its observer (the episode machinery: transcripts, --record, the console):
 * one record per call a harness made, and one end per episode whose model access ended on its own
 * (a budget spent, an upstream that failed or stalled). Declared once here; snake_case, as every
 * wire shape of the server.
 */
import type { FailureReason } from '../protocol/observations.js';
import type { CallOutcome, ModelCall } from '../protocol/model.js';

/** why an episode's model access ended: reasons of the server's failure table (src/failures.ts) */
export type GatewayEndReason = Extract<
  FailureReason,
  'model_calls_exhausted' | 'model_tokens_exhausted' | 'model_time_exhausted' | 'model_upstream_error' | 'model_upstream_timeout'
>;

export interface GatewayEnd {
  reason: GatewayEndReason;
  message: string;
}

/** one record per call a harness made (declared with the wire shapes: the transcript carries it) */
export type ModelCallRecord = ModelCall;
export type { CallOutcome };

export interface GatewayObserver {
  /** every call, once it is over (also refused ones): before revoke() resolves, never after */
  call?(record: ModelCallRecord): void;
  /** once per episode, when its model access ended on its own (never for revoke) */
  ended?(episodeId: string, end: GatewayEnd): void;
}
