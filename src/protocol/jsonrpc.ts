/**
 * JSON-RPC 2.0 as both MCP flavours speak it: a message read once into what it is (a request, a
 * notification, a client's response, or not a message), the error codes and answer envelopes; and
 * OpenEnv's dialect on `/mcp` (RFC 003): its methods and the results they answer with.
 */
import { z } from 'zod';
import { isPlainObject } from '../util/json.js';
import { EndingSchema, StepOutcomeSchema, ToolErrorSchema, ToolResultSchema } from './observations.js';
import { ToolSpecSchema } from './bundle.js';

/** The methods this server offers, declared once (dispatch, errors and /openapi.json read it). */
export const McpMethodSchema = z.enum(['tools/list', 'tools/call', 'openenv/session/create', 'openenv/session/close']);
export type McpMethod = z.infer<typeof McpMethodSchema>;
export const MCP_METHODS = McpMethodSchema.options;

/** JSON-RPC 2.0 error codes, as OpenEnv uses them */
export const RpcCode = {
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
  /** capacity, shutting down, a failed deploy, an episode in the wrong state */
  SERVER_ERROR: -32000,
} as const;

export type RpcId = string | number | null;

export const RpcRequestSchema = z
  .object({
    jsonrpc: z.literal('2.0').optional(),
    method: McpMethodSchema,
    params: z
      .record(z.unknown())
      .optional()
      .describe('tools/call: {session_id, name, arguments}; openenv/session/create: reset data; openenv/session/close: {session_id}'),
    id: z.union([z.string(), z.number(), z.null()]).optional(),
  })
  .describe('a JSON-RPC 2.0 request');

export const RpcResponseSchema = z
  .object({
    jsonrpc: z.literal('2.0'),
    result: z.unknown().optional(),
    error: z.object({ code: z.number().int(), message: z.string(), data: z.record(z.unknown()).optional() }).optional(),
    id: z.union([z.string(), z.number(), z.null()]),
  })
  .describe('a JSON-RPC 2.0 response: result or error');

export interface RpcError {
  jsonrpc: '2.0';
  error: { code: number; message: string; data?: Record<string, unknown> };
  id: RpcId;
}

export interface RpcSuccess {
  jsonrpc: '2.0';
  result: unknown;
  id: RpcId;
}

export type RpcResponse = RpcSuccess | RpcError;

export function rpcError(id: RpcId, code: number, message: string, data?: Record<string, unknown>): RpcError {
  return { jsonrpc: '2.0', error: data ? { code, message, data } : { code, message }, id };
}

// ---- a message, read once ------------------------------------------------------------------

export interface RpcRequest {
  kind: 'request';
  id: RpcId;
  method: string;
  params: unknown;
}

/** Why a body is no JSON-RPC message this server takes. */
export type RpcProblem = 'unparsable' | 'batch' | 'not_object' | 'bad_id' | 'bad_version' | 'no_method';

/**
 * One JSON-RPC message as the edge read it (the MCP SDK's inbound classification: once, before
 * any flavour looks at it). A notification is a request without an "id" member: it is never
 * answered, and one that is malformed (`problem`) is not run either.
 */
export type RpcMessage =
  | RpcRequest
  | { kind: 'notification'; method: string; params: unknown; problem?: 'bad_version' }
  | { kind: 'response'; id: RpcId }
  | { kind: 'invalid'; id: RpcId; problem: RpcProblem; detail?: string };

function isRpcId(v: unknown): v is RpcId {
  return v === null || typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v));
}

/** A parsed JSON value → the message it is. */
export function readRpcMessage(value: unknown): RpcMessage {
  if (Array.isArray(value)) return { kind: 'invalid', id: null, problem: 'batch' };
  if (!isPlainObject(value)) return { kind: 'invalid', id: null, problem: 'not_object' };
  const hasId = Object.hasOwn(value, 'id');
  const method = value.method;
  const badVersion = value.jsonrpc !== undefined && value.jsonrpc !== '2.0';
  if (!hasId && typeof method === 'string' && method !== '') {
    return { kind: 'notification', method, params: value.params, ...(badVersion ? { problem: 'bad_version' as const } : {}) };
  }
  if (hasId && !isRpcId(value.id)) return { kind: 'invalid', id: null, problem: 'bad_id' };
  const id = hasId ? (value.id as RpcId) : null;
  if (method === undefined && hasId && (Object.hasOwn(value, 'result') || Object.hasOwn(value, 'error'))) return { kind: 'response', id };
  if (badVersion) return { kind: 'invalid', id, problem: 'bad_version' };
  if (typeof method !== 'string' || method === '') return { kind: 'invalid', id, problem: 'no_method' };
  return { kind: 'request', id, method, params: value.params };
}

/** An HTTP body → the message it holds (text that is not JSON is `unparsable`). */
export function readRpcBody(text: string): RpcMessage {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return { kind: 'invalid', id: null, problem: 'unparsable', detail: (e as Error).message };
  }
  return readRpcMessage(value);
}

/** A request naming `initialize`: what starts a standard MCP session. */
export function isInitialize(m: RpcMessage): m is RpcRequest & { method: 'initialize' } {
  return m.kind === 'request' && m.method === 'initialize';
}

// ---- OpenEnv's dialect: what its methods answer ----------------------------------------------

/** A tool as the dialect's tools/list answers it: OpenEnv's snake_case key and MCP's camelCase one. */
export const DialectToolSchema = ToolSpecSchema.extend({ inputSchema: ToolSpecSchema.shape.input_schema });
export type DialectTool = z.infer<typeof DialectToolSchema>;

/**
 * The dialect's tools/call result: the tool's result (content, structured_content, data,
 * is_error; a message of the failure in place of a result), the call's error, the episode's
 * ending fields when it ended, and the step's reward and done.
 */
export const DialectCallResultSchema = ToolResultSchema.extend({
  tool_name: z.string(),
  error: ToolErrorSchema.nullable(),
  turn: z.number().int().optional(),
})
  .merge(EndingSchema.omit({ done: true, reward: true }).partial())
  .extend({ reward: z.number().nullable(), done: z.boolean() });
export type DialectCallResult = z.infer<typeof DialectCallResultSchema>;

/** The dialect's tools/list result. */
export const DialectToolsSchema = z.object({ tools: z.array(DialectToolSchema) });
export type DialectTools = z.infer<typeof DialectToolsSchema>;

/**
 * The dialect's openenv/session/create result: the session (the episode's id) and, over HTTP, the
 * reset observation (over /ws the session's own episode is the session: its ids only).
 */
export const DialectSessionSchema = StepOutcomeSchema.partial().extend({ session_id: z.string(), episode_id: z.string() });
export type DialectSession = z.infer<typeof DialectSessionSchema>;

/** The dialect's openenv/session/close result. */
export const DialectClosedSchema = z.object({ session_id: z.string(), closed: z.literal(true) });
export type DialectClosed = z.infer<typeof DialectClosedSchema>;
