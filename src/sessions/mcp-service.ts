/**
 * OpenEnv's MCP JSON-RPC (RFC 003) over the same episodes as every other transport: `tools/list`,
 * `tools/call` (with `params.session_id`), `openenv/session/create` (a reset: it waits for a slot
 * and deploys the env) and `openenv/session/close`. Reached by `POST /mcp` and by `{"type":"mcp"}`
 * frames on `/ws`, where the session's own episode is the default.
 */
import type { Logger } from 'pino';
import type { LoadedBundle, ToolSpec } from '../bundle/index.js';
import { isPlainObject } from '../bundle/schema.js';
import { RpcFailure, toRpcError } from '../errors.js';
import type { Episode } from '../episodes/episode.js';
import type { StepOutcome } from '../protocol/observations.js';
import { parseResetData } from '../protocol/frames.js';
import { MCP_METHODS, McpMethodSchema, RpcCode, rpcError, type McpMethod, type RpcId, type RpcResponse } from '../protocol/jsonrpc.js';
import type { RequestEpisodes } from './request-episodes.js';

/** How a call reaches the service: over HTTP (aborted when the client leaves) or from a /ws session. */
export interface McpContext {
  /** the /ws session's episode, when the request came as a frame */
  sessionEpisode?: () => Episode | null;
  /** aborts when the HTTP client went away */
  clientGone?: AbortSignal;
}

export interface McpDeps {
  requests: RequestEpisodes;
  bundle: LoadedBundle;
  log: Logger;
}

/** A tool as tools/list answers it: OpenEnv's snake_case key and MCP's camelCase one. */
function mcpTool(t: ToolSpec) {
  return { name: t.name, description: t.description, input_schema: t.input_schema, inputSchema: t.input_schema };
}

/** The answer of tools/call: the tool's result (content, structured_content, data, is_error) plus the episode's fields. */
export function callResult(out: StepOutcome): Record<string, unknown> {
  const obs = out.observation;
  if (!('tool_name' in obs)) throw new Error('tools/call answered without a call observation');
  const { tool_name, result, error, ...rest } = obs;
  const base = result ?? {
    content: [{ type: 'text', text: error?.message ?? 'the tool call failed' }],
    structured_content: null,
    data: null,
    is_error: true,
  };
  return { ...base, tool_name, error: error ?? null, ...rest, reward: out.reward, done: out.done };
}

/** A JSON-RPC notification: a request object naming a method, without an "id" member. */
export function isNotification(req: unknown): boolean {
  return isPlainObject(req) && !Object.hasOwn(req, 'id') && typeof req.method === 'string' && req.method !== '';
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

  /**
   * An HTTP body → its response, or null for a notification (a request object with a method and no
   * "id" member): JSON-RPC answers those with nothing, as MCP's streamable HTTP does (HTTP 202), but
   * still runs them. Over /ws every frame gets one reply (the envelope's rule): `handle` answers all.
   */
  async handleHttp(text: string, ctx: McpContext = {}): Promise<RpcResponse | null> {
    let req: unknown;
    try {
      req = JSON.parse(text);
    } catch (e) {
      return rpcError(null, RpcCode.PARSE_ERROR, `Parse error: the body is not valid JSON (${(e as Error).message})`);
    }
    return this.handleParsedHttp(req, ctx);
  }

  /** `handleHttp` for a body the route already parsed (to tell OpenEnv's dialect from a standard session). */
  async handleParsedHttp(req: unknown, ctx: McpContext = {}): Promise<RpcResponse | null> {
    const res = await this.handle(req, ctx);
    return isNotification(req) ? null : res;
  }

  /** One JSON-RPC request, already parsed from JSON → its response. */
  async handle(req: unknown, ctx: McpContext = {}): Promise<RpcResponse> {
    if (Array.isArray(req))
      return rpcError(null, RpcCode.INVALID_REQUEST, 'Invalid request: batch requests are not supported; send one JSON-RPC object per request');
    if (!isPlainObject(req))
      return rpcError(null, RpcCode.INVALID_REQUEST, 'Invalid request: expected a JSON-RPC 2.0 object like {"jsonrpc":"2.0","method":"tools/list","id":1}');
    const rawId = req.id;
    const idOk = rawId === undefined || rawId === null || typeof rawId === 'string' || (typeof rawId === 'number' && Number.isFinite(rawId));
    const id: RpcId = idOk ? ((rawId as RpcId | undefined) ?? null) : null;
    if (!idOk) return rpcError(null, RpcCode.INVALID_REQUEST, 'Invalid request: "id" must be a string, a number or null');
    if (req.jsonrpc !== undefined && req.jsonrpc !== '2.0') return rpcError(id, RpcCode.INVALID_REQUEST, 'Invalid request: "jsonrpc" must be "2.0"');
    if (typeof req.method !== 'string' || req.method === '')
      return rpcError(id, RpcCode.INVALID_REQUEST, `Invalid request: "method" must be a string, one of ${MCP_METHODS.join(', ')}`);
    const params = req.params ?? {};
    if (!isPlainObject(params)) return rpcError(id, RpcCode.INVALID_PARAMS, 'Invalid params: "params" must be an object');
    const method = McpMethodSchema.safeParse(req.method);
    if (!method.success) {
      return rpcError(id, RpcCode.METHOD_NOT_FOUND, `Method not found: ${req.method}; this server offers ${MCP_METHODS.join(', ')}`);
    }
    try {
      const result = await this.dispatch(method.data, params, ctx);
      return { jsonrpc: '2.0', result, id };
    } catch (e) {
      return toRpcError(id, e, method.data, this.deps.log);
    }
  }

  private async dispatch(method: McpMethod, params: Record<string, unknown>, ctx: McpContext): Promise<unknown> {
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
    const found = this.deps.requests.find(sid);
    if (found?.holder === 'request') return found.ep;
    if (found) throw new RpcFailure(RpcCode.INVALID_REQUEST, `Invalid request: session ${sid} belongs to a WebSocket session; drive it over that connection`);
    throw new RpcFailure(RpcCode.INVALID_PARAMS, `Unknown session_id: ${sid} (never created, or closed and torn down)`);
  }

  private async toolsList(params: Record<string, unknown>, ctx: McpContext): Promise<unknown> {
    const sid = this.sessionIdOf(params);
    if (sid !== undefined || ctx.sessionEpisode?.()) {
      const ep = this.episodeFor(params, ctx);
      const out = await this.deps.requests.run(ep, () => ep.step({ type: 'list_tools' }));
      if (!('tools' in out.observation)) throw new Error('list_tools answered without tools');
      return { tools: out.observation.tools.map(mcpTool) };
    }
    // no episode: the tools of a toolset, from the bundle (no env is deployed to answer)
    const { toolsets } = this.deps.bundle;
    const names = Object.keys(toolsets);
    let name = params.toolset;
    if (name === undefined) {
      if (names.length !== 1) {
        throw new RpcFailure(
          RpcCode.INVALID_PARAMS,
          `Invalid params: this bundle has ${names.length} toolsets (${names.join(', ')}); give "session_id" or "toolset"`,
        );
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
    const out = await this.deps.requests.run(ep, () => ep.step({ type: 'call_tool', tool_name: name, arguments: args }));
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
    const started = await this.deps.requests.start(data, 'mcp', ctx.clientGone);
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
    await this.deps.requests.close(ep);
    return { session_id: sid, closed: true };
  }
}
