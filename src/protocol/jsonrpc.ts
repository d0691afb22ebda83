/** JSON-RPC 2.0 as OpenEnv's `/mcp` speaks it (RFC 003): methods, error codes, answer shapes. */
import { z } from 'zod';

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
