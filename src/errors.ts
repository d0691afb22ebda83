/**
 * One error type per failure kind, mapped in one place (`toWsError`, `toHttpError`, `toRpcError`)
 * to WebSocket error codes, HTTP statuses and JSON-RPC errors. Expected failures carry messages a
 * person can act on. Why an env failed (a Failure's reason) is decided in failures.ts.
 */
import type { ErrorFrameData, WsErrorCode } from './protocol/frames.js';
import { RpcCode, rpcError, type RpcError, type RpcId } from './protocol/jsonrpc.js';
import type { Lane } from './protocol/lanes.js';
import type { Failure } from './protocol/observations.js';

export abstract class ServerError extends Error {
  abstract readonly wsCode: WsErrorCode;
  abstract readonly httpStatus: number;
  abstract readonly httpCode: string;
  /** extra fields of the WS error's data and the HTTP body */
  details(): Record<string, unknown> {
    return {};
  }
}

/** The client sent something malformed: it can fix it and try again. */
export class BadInputError extends ServerError {
  override readonly name = 'BadInputError';
  readonly httpStatus = 400;
  constructor(
    readonly wsCode: 'INVALID_JSON' | 'UNKNOWN_TYPE' | 'VALIDATION_ERROR',
    message: string,
    readonly httpCode = wsCode === 'INVALID_JSON' ? 'invalid_json' : 'invalid_request',
  ) {
    super(message);
  }
}

/** A task, split or episode that does not exist. */
export class NotFoundError extends ServerError {
  override readonly name = 'NotFoundError';
  readonly wsCode = 'VALIDATION_ERROR' as const;
  readonly httpStatus = 404;
  readonly httpCode = 'not_found';
}

export interface CapacityDetails {
  active_sessions: number;
  max_sessions: number;
  waiting: number;
  /** the lane the reset waited in */
  lane: Lane;
  waited_s: number;
  retry_after_s: number;
}

/** No slot within the reset timeout, or the queue is full. */
export class CapacityError extends ServerError {
  override readonly name = 'CapacityError';
  readonly wsCode = 'CAPACITY_REACHED' as const;
  readonly httpStatus = 503;
  readonly httpCode = 'capacity_reached';
  constructor(
    message: string,
    readonly capacity: CapacityDetails,
  ) {
    super(message);
  }
  override details(): Record<string, unknown> {
    return { ...this.capacity };
  }
}

/** The server is draining after SIGTERM. */
export class ShuttingDownError extends ServerError {
  override readonly name = 'ShuttingDownError';
  readonly wsCode = 'SESSION_ERROR' as const;
  readonly httpStatus = 503;
  readonly httpCode = 'shutting_down';
  constructor(message = 'the server is shutting down; reconnect to a running server') {
    super(message);
  }
  override details(): Record<string, unknown> {
    return { reason: 'shutting_down' };
  }
}

/** A deploy (or the env's reset) failed: no episode started, its slot is free again. */
export class DeployFailedError extends ServerError {
  override readonly name = 'DeployFailedError';
  readonly wsCode = 'EXECUTION_ERROR' as const;
  readonly httpStatus = 502;
  readonly httpCode = 'deploy_failed';
  constructor(readonly failure: Failure) {
    super(failure.message);
  }
  override details(): Record<string, unknown> {
    return { reason: this.failure.reason, failure: this.failure };
  }
}

/** A client sent more requests on one episode at once than it may have in flight. */
export class TooManyRequestsError extends ServerError {
  override readonly name = 'TooManyRequestsError';
  readonly wsCode = 'EXECUTION_ERROR' as const;
  readonly httpStatus = 429;
  readonly httpCode = 'too_many_requests';
  constructor(
    id: string,
    readonly limit: number,
  ) {
    super(`episode ${id} already has ${limit} requests in flight; wait for their answers (steps run one at a time)`);
  }
  override details(): Record<string, unknown> {
    return { limit: this.limit };
  }
}

/** A step with no episode, or after the episode ended. */
export class EpisodeStateError extends ServerError {
  override readonly name = 'EpisodeStateError';
  readonly wsCode = 'EXECUTION_ERROR' as const;
  readonly httpStatus = 409;
  readonly httpCode: string;
  constructor(
    readonly reason: 'no_episode' | 'episode_done',
    message: string,
  ) {
    super(message);
    this.httpCode = reason;
  }
  override details(): Record<string, unknown> {
    return { reason: this.reason };
  }
}

/** An episode a WebSocket session holds is driven through that session only. */
export class OwnedBySessionError extends ServerError {
  override readonly name = 'OwnedBySessionError';
  readonly wsCode = 'EXECUTION_ERROR' as const;
  readonly httpStatus = 409;
  readonly httpCode = 'owned_by_ws_session';
  constructor(id: string) {
    super(`episode ${id} belongs to a WebSocket session; step it over that /ws connection`);
  }
  override details(): Record<string, unknown> {
    return { reason: 'owned_by_ws_session' };
  }
}

/**
 * A JSON-RPC request the server refuses as such (an unknown method, params it cannot use, a
 * session that is not there), with its JSON-RPC code: thrown inside a method, answered by toRpcError.
 */
export class RpcFailure extends Error {
  override readonly name = 'RpcFailure';
  constructor(
    readonly code: number,
    message: string,
    readonly data?: Record<string, unknown>,
  ) {
    super(message);
  }
}

/** WS `{"type":"error","data":{...}}`; anything unexpected becomes a message without internals. */
export function toWsError(err: unknown): { type: 'error'; data: ErrorFrameData } {
  if (err instanceof ServerError) {
    return { type: 'error', data: { code: err.wsCode, message: err.message, ...err.details() } };
  }
  return { type: 'error', data: { code: 'EXECUTION_ERROR', message: 'internal error; see the server log' } };
}

export function toHttpError(err: unknown): { status: number; body: Record<string, unknown> } {
  if (err instanceof ServerError) {
    return { status: err.httpStatus, body: { error: err.httpCode, message: err.message, ...err.details() } };
  }
  return { status: 500, body: { error: 'internal_error', message: 'internal error; see the server log' } };
}

/**
 * A method's failure as a JSON-RPC error, for both MCP flavours: bad input is -32602, the server's
 * refusals (capacity, shutting down, a failed deploy, an ended episode) -32000 with their details,
 * anything else -32603 without internals (the caller logs those: see isExpected).
 */
export function toRpcError(id: RpcId, err: unknown): RpcError {
  if (err instanceof RpcFailure) return rpcError(id, err.code, err.message, err.data);
  if (err instanceof BadInputError || err instanceof NotFoundError) {
    return rpcError(id, RpcCode.INVALID_PARAMS, `Invalid params: ${err.message}`, { error: err.httpCode });
  }
  if (err instanceof ServerError) {
    // capacity (its retry_after_s among the details), shutting down, a failed deploy, a step on an ended episode
    return rpcError(id, RpcCode.SERVER_ERROR, err.message, { error: err.httpCode, ...err.details() });
  }
  return rpcError(id, RpcCode.INTERNAL_ERROR, 'Internal error; see the server log');
}

/** Whether an error is one of the server's expected answers (anything else is logged as a fault). */
export function isExpected(err: unknown): boolean {
  return err instanceof ServerError || err instanceof RpcFailure;
}
