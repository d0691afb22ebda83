/**
 * Every error the server answers a client with, in one table (SERVER_ERRORS, in the manner of
 * fastify's own table of error codes): each kind with its HTTP `error` code and status, the code of
 * a WebSocket error frame and the JSON-RPC error code. One error class per kind of failure carries
 * its kind; `toWsError`, `toHttpError` and `toRpcError` read the table. Expected failures carry
 * messages a person can act on. Why an env failed (a Failure's reason) is decided in failures.ts.
 */
import type { ErrorFrameData, WsErrorCode } from './protocol/frames.js';
import { RpcCode, rpcError, type RpcError, type RpcId } from './protocol/jsonrpc.js';
import type { Lane } from './protocol/lanes.js';
import type { Failure } from './protocol/observations.js';

export interface ServerErrorRow {
  /** the HTTP body's `error` (and a JSON-RPC error's `data.error`, a request log line's refusal) */
  error: string;
  /** the HTTP status */
  http: number;
  /** the `code` of a WebSocket error frame */
  ws: WsErrorCode;
  /** the JSON-RPC error code: -32602 for the client's mistakes, -32000 for the server's refusals */
  rpc: number;
}

/** kind → how each protocol says it (docs/protocol.md, errors) */
export const SERVER_ERRORS = {
  /** a frame or body that is not JSON */
  invalid_json: { error: 'invalid_json', http: 400, ws: 'INVALID_JSON', rpc: RpcCode.INVALID_PARAMS },
  /** a /ws frame of a type the protocol does not have */
  unknown_type: { error: 'invalid_request', http: 400, ws: 'UNKNOWN_TYPE', rpc: RpcCode.INVALID_PARAMS },
  /** a request the client can fix and send again */
  invalid_request: { error: 'invalid_request', http: 400, ws: 'VALIDATION_ERROR', rpc: RpcCode.INVALID_PARAMS },
  /** a task, split or episode that does not exist */
  not_found: { error: 'not_found', http: 404, ws: 'VALIDATION_ERROR', rpc: RpcCode.INVALID_PARAMS },
  /** no slot within the reset timeout, or the queue is full */
  capacity_reached: { error: 'capacity_reached', http: 503, ws: 'CAPACITY_REACHED', rpc: RpcCode.SERVER_ERROR },
  /** the server is draining after SIGTERM */
  shutting_down: { error: 'shutting_down', http: 503, ws: 'SESSION_ERROR', rpc: RpcCode.SERVER_ERROR },
  /** a deploy (or the env's reset) failed */
  deploy_failed: { error: 'deploy_failed', http: 502, ws: 'EXECUTION_ERROR', rpc: RpcCode.SERVER_ERROR },
  /** more requests on one episode at once than it may have in flight */
  too_many_requests: { error: 'too_many_requests', http: 429, ws: 'EXECUTION_ERROR', rpc: RpcCode.SERVER_ERROR },
  /** a step with no episode */
  no_episode: { error: 'no_episode', http: 409, ws: 'EXECUTION_ERROR', rpc: RpcCode.SERVER_ERROR },
  /** a step after the episode ended */
  episode_done: { error: 'episode_done', http: 409, ws: 'EXECUTION_ERROR', rpc: RpcCode.SERVER_ERROR },
  /** an episode a WebSocket session holds, driven from elsewhere */
  owned_by_ws_session: { error: 'owned_by_ws_session', http: 409, ws: 'EXECUTION_ERROR', rpc: RpcCode.SERVER_ERROR },
} as const satisfies Record<string, ServerErrorRow>;

export type ServerErrorKind = keyof typeof SERVER_ERRORS;

/** what anything not in the table becomes: a message without internals (the caller logs it) */
const INTERNAL = { error: 'internal_error', http: 500, ws: 'EXECUTION_ERROR', rpc: RpcCode.INTERNAL_ERROR } as const satisfies ServerErrorRow;

export abstract class ServerError extends Error {
  /** its row of SERVER_ERRORS */
  abstract readonly kind: ServerErrorKind;
  /** how the protocols say it: the row of its kind */
  get row(): ServerErrorRow {
    return SERVER_ERRORS[this.kind];
  }
  /** extra fields of the WS error's data and the HTTP body */
  details(): Record<string, unknown> {
    return {};
  }
}

/** The client sent something malformed: it can fix it and try again. */
export class BadInputError extends ServerError {
  override readonly name = 'BadInputError';
  readonly kind: 'invalid_json' | 'unknown_type' | 'invalid_request';
  constructor(wsCode: 'INVALID_JSON' | 'UNKNOWN_TYPE' | 'VALIDATION_ERROR', message: string) {
    super(message);
    this.kind = wsCode === 'INVALID_JSON' ? 'invalid_json' : wsCode === 'UNKNOWN_TYPE' ? 'unknown_type' : 'invalid_request';
  }
}

/** A task, split or episode that does not exist. */
export class NotFoundError extends ServerError {
  override readonly name = 'NotFoundError';
  readonly kind = 'not_found';
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
  readonly kind = 'capacity_reached';
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
  readonly kind = 'shutting_down';
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
  readonly kind = 'deploy_failed';
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
  readonly kind = 'too_many_requests';
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
  readonly kind: 'no_episode' | 'episode_done';
  constructor(
    readonly reason: 'no_episode' | 'episode_done',
    message: string,
  ) {
    super(message);
    this.kind = reason;
  }
  override details(): Record<string, unknown> {
    return { reason: this.reason };
  }
}

/** An episode a WebSocket session holds is driven through that session only. */
export class OwnedBySessionError extends ServerError {
  override readonly name = 'OwnedBySessionError';
  readonly kind = 'owned_by_ws_session';
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
    return { type: 'error', data: { code: err.row.ws, message: err.message, ...err.details() } };
  }
  return { type: 'error', data: { code: INTERNAL.ws, message: 'internal error; see the server log' } };
}

export function toHttpError(err: unknown): { status: number; body: Record<string, unknown> } {
  if (err instanceof ServerError) {
    return { status: err.row.http, body: { error: err.row.error, message: err.message, ...err.details() } };
  }
  return { status: INTERNAL.http, body: { error: INTERNAL.error, message: 'internal error; see the server log' } };
}

/**
 * A method's failure as a JSON-RPC error, for both MCP flavours, with the code of its row: the
 * client's mistakes (-32602) say "Invalid params", the server's refusals (-32000: capacity with its
 * retry_after_s, shutting down, a failed deploy, an ended episode) carry their details; anything
 * else is -32603 without internals (the caller logs those: see isExpected).
 */
export function toRpcError(id: RpcId, err: unknown): RpcError {
  if (err instanceof RpcFailure) return rpcError(id, err.code, err.message, err.data);
  if (err instanceof ServerError) {
    const { rpc, error } = err.row;
    return rpcError(id, rpc, rpc === RpcCode.INVALID_PARAMS ? `Invalid params: ${err.message}` : err.message, { error, ...err.details() });
  }
  return rpcError(id, INTERNAL.rpc, 'Internal error; see the server log');
}

/** Whether an error is one of the server's expected answers (anything else is logged as a fault). */
export function isExpected(err: unknown): boolean {
  return err instanceof ServerError || err instanceof RpcFailure;
}
