import { describe, expect, it } from 'vitest';
import {
  BadInputError,
  CapacityError,
  DeployFailedError,
  EpisodeStateError,
  isExpected,
  NotFoundError,
  OwnedBySessionError,
  RpcFailure,
  SERVER_ERRORS,
  ServerError,
  ShuttingDownError,
  toHttpError,
  toRpcError,
  toWsError,
  TooManyRequestsError,
} from '../src/errors.js';
import { RpcCode } from '../src/protocol/jsonrpc.js';
import { WsErrorCodeSchema } from '../src/protocol/frames.js';
import type { Failure } from '../src/protocol/observations.js';

const failure: Failure = {
  reason: 'image_unavailable',
  phase: 'deploy',
  retryable: false,
  message: 'no image openenv-local/x:1',
  episode_id: 'e1',
  task_id: 't1',
};
const capacity = { active_sessions: 2, max_sessions: 2, waiting: 0, lane: 'normal' as const, waited_s: 1, retry_after_s: 5 };

/** every error class, and how each protocol said it before the table: [error, HTTP status, HTTP error, WS code, JSON-RPC code] */
const CASES: [ServerError, number, string, string, number][] = [
  [new BadInputError('INVALID_JSON', 'not JSON'), 400, 'invalid_json', 'INVALID_JSON', -32602],
  [new BadInputError('UNKNOWN_TYPE', 'no such frame'), 400, 'invalid_request', 'UNKNOWN_TYPE', -32602],
  [new BadInputError('VALIDATION_ERROR', 'bad'), 400, 'invalid_request', 'VALIDATION_ERROR', -32602],
  [new NotFoundError('no task x'), 404, 'not_found', 'VALIDATION_ERROR', -32602],
  [new CapacityError('full', capacity), 503, 'capacity_reached', 'CAPACITY_REACHED', -32000],
  [new ShuttingDownError(), 503, 'shutting_down', 'SESSION_ERROR', -32000],
  [new DeployFailedError(failure), 502, 'deploy_failed', 'EXECUTION_ERROR', -32000],
  [new TooManyRequestsError('e1', 4), 429, 'too_many_requests', 'EXECUTION_ERROR', -32000],
  [new EpisodeStateError('no_episode', 'reset first'), 409, 'no_episode', 'EXECUTION_ERROR', -32000],
  [new EpisodeStateError('episode_done', 'it ended'), 409, 'episode_done', 'EXECUTION_ERROR', -32000],
  [new OwnedBySessionError('e1'), 409, 'owned_by_ws_session', 'EXECUTION_ERROR', -32000],
];

describe('the table of server errors', () => {
  it('has a row for every kind, each a status, an HTTP error, a WS code and a JSON-RPC code of the protocol', () => {
    for (const [kind, row] of Object.entries(SERVER_ERRORS)) {
      expect(WsErrorCodeSchema.safeParse(row.ws).success, kind).toBe(true);
      expect(row.http >= 400 && row.http < 600, kind).toBe(true);
      expect([RpcCode.INVALID_PARAMS, RpcCode.SERVER_ERROR], kind).toContain(row.rpc);
      // the client's mistakes are 4xx and "Invalid params"; the server's refusals are the rest
      expect(row.rpc === RpcCode.INVALID_PARAMS, kind).toBe(row.http === 400 || row.http === 404);
    }
    expect(new Set(CASES.map(([e]) => e.kind))).toEqual(new Set(Object.keys(SERVER_ERRORS)));
  });

  it('says each error over HTTP, /ws and JSON-RPC as it did before the table', () => {
    for (const [err, status, error, ws, rpc] of CASES) {
      const details = err.details();
      expect(toHttpError(err)).toEqual({ status, body: { error, message: err.message, ...details } });
      expect(toWsError(err)).toEqual({ type: 'error', data: { code: ws, message: err.message, ...details } });
      const message = rpc === -32602 ? `Invalid params: ${err.message}` : err.message;
      expect(toRpcError(7, err)).toEqual({ jsonrpc: '2.0', id: 7, error: { code: rpc, message, data: { error, ...details } } });
      expect(isExpected(err)).toBe(true);
    }
  });

  it("carries each kind's details: capacity's retry_after_s, a deploy's failure, a state's reason", () => {
    expect(toHttpError(new CapacityError('full', capacity)).body).toMatchObject({ retry_after_s: 5, lane: 'normal' });
    expect(toWsError(new DeployFailedError(failure)).data).toMatchObject({ reason: 'image_unavailable', failure });
    expect(toRpcError(1, new EpisodeStateError('episode_done', 'ended')).error.data).toEqual({ error: 'episode_done', reason: 'episode_done' });
    expect(toHttpError(new ShuttingDownError()).body).toMatchObject({ reason: 'shutting_down' });
  });

  it('answers anything else without its internals, and RpcFailure with its own code', () => {
    const bug = new Error('secret stack detail');
    expect(toHttpError(bug)).toEqual({ status: 500, body: { error: 'internal_error', message: 'internal error; see the server log' } });
    expect(toWsError(bug)).toEqual({ type: 'error', data: { code: 'EXECUTION_ERROR', message: 'internal error; see the server log' } });
    expect(toRpcError(null, bug)).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32603, message: 'Internal error; see the server log' } });
    expect(isExpected(bug)).toBe(false);
    const refused = new RpcFailure(RpcCode.METHOD_NOT_FOUND, 'no method x', { method: 'x' });
    expect(toRpcError(2, refused)).toEqual({ jsonrpc: '2.0', id: 2, error: { code: -32601, message: 'no method x', data: { method: 'x' } } });
    expect(isExpected(refused)).toBe(true);
  });
});
