/**
 * `POST /mcp`: OpenEnv's JSON-RPC 2.0 route (RFC 003) over the same episodes as `/ws`:
 * `tools/list`, `tools/call` (with `params.session_id`), `openenv/session/create` (a reset: it
 * waits for a slot and deploys the env) and `openenv/session/close`. Every answer is HTTP 200
 * with a JSON-RPC body; only auth answers 401 before it gets here. `{"type":"mcp"}` frames on
 * `/ws` reach the same handler, where the session's own episode is the default.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import type { LoadedBundle, ToolSpec } from '../bundle/index.js';
import { BadInputError, CapacityError, NotFoundError, ServerError } from '../errors.js';
import type { Episode, StepOutcome } from '../episodes/episode.js';
import type { EpisodeManager } from '../episodes/manager.js';
import { parseResetData } from '../protocol/frames.js';
import { RequestEpisodes, startRequestEpisode } from './episodes.js';
import type { McpHandler } from './ws.js';

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

/** An answer as a JSON-RPC error; thrown inside a method, caught once. */
class RpcFailure extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: Record<string, unknown>,
  ) {
    super(message);
  }
}

export function rpcError(id: RpcId, code: number, message: string, data?: Record<string, unknown>): RpcError {
  return { jsonrpc: '2.0', error: data ? { code, message, data } : { code, message }, id };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export const MCP_METHODS = ['tools/list', 'tools/call', 'openenv/session/create', 'openenv/session/close'] as const;

/** How a call reaches the handler: over HTTP (the reply, to notice a client that leaves) or a /ws session. */
export interface McpContext {
  /** the /ws session's episode, when the request came as a frame */
  sessionEpisode?: () => Episode | null;
  reply?: FastifyReply;
}

export interface McpDeps {
  manager: EpisodeManager;
  tracker: RequestEpisodes;
  bundle: LoadedBundle;
  log: Logger;
}

/** A tool as tools/list answers it: OpenEnv's snake_case key and MCP's camelCase one. */
function mcpTool(t: ToolSpec) {
  return { name: t.name, description: t.description, input_schema: t.input_schema, inputSchema: t.input_schema };
}

/** The answer of tools/call: the tool's result (content, structured_content, data, is_error) plus the episode's fields. */
export function callResult(out: StepOutcome): Record<string, unknown> {
  const { tool_name, result, error, ...rest } = out.observation as {
    tool_name?: string;
    result?: Record<string, unknown> | null;
    error?: { error_type: string; message: string } | null;
    [k: string]: unknown;
  };
  const base = result ?? {
    content: [{ type: 'text', text: error?.message ?? 'the tool call failed' }],
    structured_content: null,
    data: null,
    is_error: true,
  };
  return { ...base, tool_name: tool_name ?? null, error: error ?? null, ...rest, reward: out.reward, done: out.done };
}

export class McpService {
  constructor(private readonly deps: McpDeps) {}

  /** The text of an HTTP body → its response (text that is not JSON is a parse error). */
  async handleText(text: string, ctx: McpContext = {}): Promise<RpcResponse> {
    let req: unknown;
    try {
      req = JSON.parse(text);
    } catch (e) {
      return rpcError(null, RpcCode.PARSE_ERROR, `Parse error: the body is not valid JSON (${(e as Error).message})`);
    }
    return this.handle(req, ctx);
  }

  /** One JSON-RPC request, already parsed from JSON → its response. */
  async handle(req: unknown, ctx: McpContext = {}): Promise<RpcResponse> {
    if (Array.isArray(req)) return rpcError(null, RpcCode.INVALID_REQUEST, 'Invalid request: batch requests are not supported; send one JSON-RPC object per request');
    if (!isObject(req)) return rpcError(null, RpcCode.INVALID_REQUEST, 'Invalid request: expected a JSON-RPC 2.0 object like {"jsonrpc":"2.0","method":"tools/list","id":1}');
    const rawId = req.id;
    const idOk = rawId === undefined || rawId === null || typeof rawId === 'string' || (typeof rawId === 'number' && Number.isFinite(rawId));
    const id: RpcId = idOk ? ((rawId as RpcId | undefined) ?? null) : null;
    if (!idOk) return rpcError(null, RpcCode.INVALID_REQUEST, 'Invalid request: "id" must be a string, a number or null');
    if (req.jsonrpc !== undefined && req.jsonrpc !== '2.0') return rpcError(id, RpcCode.INVALID_REQUEST, 'Invalid request: "jsonrpc" must be "2.0"');
    if (typeof req.method !== 'string' || req.method === '') return rpcError(id, RpcCode.INVALID_REQUEST, `Invalid request: "method" must be a string, one of ${MCP_METHODS.join(', ')}`);
    const method = req.method;
    const params = req.params ?? {};
    if (!isObject(params)) return rpcError(id, RpcCode.INVALID_PARAMS, 'Invalid params: "params" must be an object');
    if (!(MCP_METHODS as readonly string[]).includes(method)) {
      return rpcError(id, RpcCode.METHOD_NOT_FOUND, `Method not found: ${method}; this server offers ${MCP_METHODS.join(', ')}`);
    }
    try {
      const result = await this.dispatch(method as (typeof MCP_METHODS)[number], params, ctx);
      return { jsonrpc: '2.0', result, id };
    } catch (e) {
      return this.toRpcError(id, e, method);
    }
  }

  private async dispatch(method: (typeof MCP_METHODS)[number], params: Record<string, unknown>, ctx: McpContext): Promise<unknown> {
    switch (method) {
      case 'tools/list':
        return this.toolsList(params, ctx);
      case 'tools/call':
        return this.toolsCall(params, ctx);
      case 'openenv/session/create':
        return this.sessionCreate(params, ctx);
      case 'openenv/session/close':
        return this.sessionClose(params, ctx);
    }
  }

  private sessionIdOf(params: Record<string, unknown>): string | undefined {
    const sid = params.session_id;
    if (sid === undefined || sid === null) return undefined;
    if (typeof sid !== 'string' || sid === '') throw new RpcFailure(RpcCode.INVALID_PARAMS, 'Invalid params: "session_id" must be a non-empty string');
    return sid;
  }

  /**
   * The episode a call names: `session_id` (an episode started over /mcp or /episodes, or this
   * WebSocket's own), else this WebSocket session's episode.
   */
  private episodeFor(params: Record<string, unknown>, ctx: McpContext): Episode {
    const sid = this.sessionIdOf(params);
    const own = ctx.sessionEpisode?.() ?? null;
    if (sid === undefined) {
      if (own) return own;
      throw new RpcFailure(
        RpcCode.INVALID_PARAMS,
        ctx.sessionEpisode
          ? 'Invalid params: this WebSocket session has no episode; send a reset frame first, or give "session_id"'
          : 'Invalid params: "session_id" is required; openenv/session/create returns one',
      );
    }
    if (own && own.id === sid) return own;
    const ep = this.deps.tracker.get(sid);
    if (ep) return ep;
    if (this.deps.manager.get(sid)) {
      throw new RpcFailure(RpcCode.INVALID_REQUEST, `Invalid request: session ${sid} belongs to a WebSocket session; drive it over that connection`);
    }
    throw new RpcFailure(RpcCode.INVALID_PARAMS, `Unknown session_id: ${sid} (never created, or closed and torn down)`);
  }

  private async toolsList(params: Record<string, unknown>, ctx: McpContext): Promise<unknown> {
    const sid = this.sessionIdOf(params);
    if (sid !== undefined || ctx.sessionEpisode?.()) {
      const ep = this.episodeFor(params, ctx);
      const out = await this.deps.tracker.run(ep, () => ep.step({ type: 'list_tools' }));
      return { tools: (out.observation.tools as ToolSpec[]).map(mcpTool) };
    }
    // no episode: the tools of a toolset, from the bundle (no env is deployed to answer)
    const { toolsets } = this.deps.bundle;
    const names = Object.keys(toolsets);
    let name = params.toolset;
    if (name === undefined) {
      if (names.length !== 1) {
        throw new RpcFailure(RpcCode.INVALID_PARAMS, `Invalid params: this bundle has ${names.length} toolsets (${names.join(', ')}); give "session_id" or "toolset"`);
      }
      name = names[0];
    }
    if (typeof name !== 'string' || !Object.hasOwn(toolsets, name)) {
      throw new RpcFailure(RpcCode.INVALID_PARAMS, `Invalid params: unknown toolset ${JSON.stringify(name)}; toolsets: ${names.join(', ')}`);
    }
    return { tools: toolsets[name]!.map(mcpTool) };
  }

  private async toolsCall(params: Record<string, unknown>, ctx: McpContext): Promise<unknown> {
    const name = params.name;
    if (typeof name !== 'string' || name === '') throw new RpcFailure(RpcCode.INVALID_PARAMS, "Invalid params: missing 'name' (the tool to call) in params");
    const ep = this.episodeFor(params, ctx);
    // a non-object `arguments` is the model's error: the episode answers it (error_type invalid_args)
    const args = params.arguments === undefined ? {} : params.arguments;
    const out = await this.deps.tracker.run(ep, () => ep.step({ type: 'call_tool', tool_name: name, arguments: args }));
    return callResult(out);
  }

  private async sessionCreate(params: Record<string, unknown>, ctx: McpContext): Promise<unknown> {
    const own = ctx.sessionEpisode?.() ?? null;
    if (ctx.sessionEpisode) {
      // over /ws the session's episode is the MCP session (as in OpenEnv); a reset frame starts it
      if (own && !own.done) return { session_id: own.id, episode_id: own.id };
      throw new RpcFailure(RpcCode.INVALID_REQUEST, 'Invalid request: this WebSocket session has no running episode; send {"type":"reset"} to start one');
    }
    const { session_id: _ignored, ...resetData } = params;
    const data = parseResetData(resetData);
    const started = await startRequestEpisode(this.deps.manager, this.deps.tracker, data, 'mcp', ctx.reply ?? null);
    if (!started) return null;
    return { session_id: started.ep.id, episode_id: started.ep.id, ...started.out };
  }

  private async sessionClose(params: Record<string, unknown>, ctx: McpContext): Promise<unknown> {
    const sid = this.sessionIdOf(params);
    if (sid === undefined) throw new RpcFailure(RpcCode.INVALID_PARAMS, "Invalid params - 'session_id' is required");
    const own = ctx.sessionEpisode?.() ?? null;
    if (own && own.id === sid) {
      throw new RpcFailure(RpcCode.INVALID_REQUEST, 'Cannot close the WebSocket session\'s own episode via MCP; send {"type":"close"}');
    }
    const ep = this.episodeFor(params, {});
    await ep.close();
    this.deps.tracker.forget(ep.id);
    return { session_id: sid, closed: true };
  }

  private toRpcError(id: RpcId, e: unknown, method: string): RpcError {
    if (e instanceof RpcFailure) return rpcError(id, e.code, e.message, e.data);
    if (e instanceof BadInputError || e instanceof NotFoundError) {
      return rpcError(id, RpcCode.INVALID_PARAMS, `Invalid params: ${e.message}`, { error: e.httpCode });
    }
    if (e instanceof ServerError) {
      // capacity, shutting down, a failed deploy, a step on an ended episode
      const data = { error: e.httpCode, ...e.details() };
      if (e instanceof CapacityError) Object.assign(data, { retry_after_s: e.capacity.retry_after_s });
      return rpcError(id, RpcCode.SERVER_ERROR, e.message, data);
    }
    this.deps.log.error({ err: e, method }, 'mcp request failed');
    return rpcError(id, RpcCode.INTERNAL_ERROR, 'Internal error; see the server log');
  }
}

export interface McpRouteOptions {
  service: McpService;
}

export async function mcpRoutes(app: FastifyInstance, opts: McpRouteOptions): Promise<void> {
  const { service } = opts;
  // The body is parsed here, not by fastify, so bad JSON is a JSON-RPC parse error (HTTP 200).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => done(null, body));
  // Whatever fastify refuses in this scope (a body too large...) is still a JSON-RPC answer.
  app.setErrorHandler((err, req, reply) => {
    const tooLarge = (err as { code?: string }).code === 'FST_ERR_CTP_BODY_TOO_LARGE';
    if (!tooLarge) req.log.error({ err }, 'mcp request failed');
    return reply.code(200).send(rpcError(null, tooLarge ? RpcCode.INVALID_REQUEST : RpcCode.INTERNAL_ERROR, tooLarge ? `Invalid request: ${(err as Error).message}` : 'Internal error; see the server log'));
  });

  app.post('/mcp', async (req, reply) => {
    const body = typeof req.body === 'string' ? req.body : '';
    const res = await service.handleText(body, { reply });
    if (reply.raw.destroyed) {
      // the client left while its session waited for a slot; the episode was closed
      reply.hijack();
      return;
    }
    return reply.code(200).send(res);
  });
}

/** The handler `{"type":"mcp"}` frames on /ws reach. */
export function wsMcpHandler(service: McpService): McpHandler {
  return (request, session) => service.handle(request, { sessionEpisode: () => session.episodeFor() });
}
