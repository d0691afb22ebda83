/**
 * OpenEnv's MCP JSON-RPC dialect (RFC 003) over the same episodes as every other transport:
 * `tools/list`, `tools/call` (with `params.session_id`), `openenv/session/create` (a reset: it
 * waits for a slot and deploys the env) and `openenv/session/close`. Reached by `POST /mcp` (the
 * route classified the message) and by `{"type":"mcp"}` frames on `/ws`, where the session's own
 * episode is the default.
 */
import type { Logger } from 'pino';
import type { LoadedBundle } from '../bundle/index.js';
import { isExpected, RpcFailure, toRpcError } from '../errors.js';
import type { Episode } from '../episodes/episode.js';
import { isPlainObject } from '../util/json.js';
import type { ToolSpec } from '../protocol/bundle.js';
import {
  MCP_METHODS,
  McpMethodSchema,
  readRpcMessage,
  RpcCode,
  rpcError,
  type DialectCallResult,
  type DialectClosed,
  type DialectSession,
  type DialectTool,
  type DialectTools,
  type McpMethod,
  type RpcError,
  type RpcId,
  type RpcMessage,
  type RpcResponse,
} from '../protocol/jsonrpc.js';
import type { StepOutcome } from '../protocol/observations.js';
import { parseResetData } from './client-input.js';
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

function dialectTool(t: ToolSpec): DialectTool {
  return { name: t.name, description: t.description, input_schema: t.input_schema, inputSchema: t.input_schema };
}

/** A step's outcome as tools/call answers it: the tool's result (or the failure's message in its place) plus the episode's fields. */
export function dialectCallResult(out: StepOutcome): DialectCallResult {
  const obs = out.observation;
  if (!('tool_name' in obs)) throw new Error('tools/call answered without a call observation');
  const { tool_name, result, error, ...rest } = obs;
  const base = result ?? {
    content: [{ type: 'text' as const, text: error?.message ?? 'the tool call failed' }],
    structured_content: null,
    data: null,
    is_error: true,
  };
  return { ...base, tool_name, error: error ?? null, ...rest, reward: out.reward, done: out.done };
}

/** The dialect's answer to a message that is not a request it can take. */
function refusal(m: RpcMessage & { kind: 'invalid' | 'response' }): RpcError {
  if (m.kind === 'response') return noMethod(m.id);
  switch (m.problem) {
    case 'unparsable':
      return rpcError(null, RpcCode.PARSE_ERROR, `Parse error: the body is not valid JSON (${m.detail})`);
    case 'batch':
      return rpcError(null, RpcCode.INVALID_REQUEST, 'Invalid request: batch requests are not supported; send one JSON-RPC object per request');
    case 'not_object':
      return rpcError(null, RpcCode.INVALID_REQUEST, 'Invalid request: expected a JSON-RPC 2.0 object like {"jsonrpc":"2.0","method":"tools/list","id":1}');
    case 'bad_id':
      return rpcError(null, RpcCode.INVALID_REQUEST, 'Invalid request: "id" must be a string, a number or null');
    case 'bad_version':
      return badVersion(m.id);
    case 'no_method':
      return noMethod(m.id);
  }
}

const badVersion = (id: RpcId) => rpcError(id, RpcCode.INVALID_REQUEST, 'Invalid request: "jsonrpc" must be "2.0"');
const noMethod = (id: RpcId) => rpcError(id, RpcCode.INVALID_REQUEST, `Invalid request: "method" must be a string, one of ${MCP_METHODS.join(', ')}`);

export class McpService {
  constructor(private readonly deps: McpDeps) {}

  /** A /ws `mcp` frame's data → its response: over /ws every frame is answered (the envelope's rule), a notification too. */
  async handle(value: unknown, ctx: McpContext = {}): Promise<RpcResponse> {
    return this.answer(readRpcMessage(value), ctx);
  }

  /**
   * A POST's message → its response, or null for a notification (a request without an "id"
   * member): JSON-RPC answers those with nothing, as MCP's streamable HTTP does (HTTP 202), but
   * still runs them.
   */
  async handlePost(message: RpcMessage, ctx: McpContext = {}): Promise<RpcResponse | null> {
    const res = await this.answer(message, ctx);
    return message.kind === 'notification' ? null : res;
  }

  private async answer(m: RpcMessage, ctx: McpContext): Promise<RpcResponse> {
    if (m.kind === 'invalid' || m.kind === 'response') return refusal(m);
    if (m.kind === 'notification' && m.problem === 'bad_version') return badVersion(null);
    const id = m.kind === 'request' ? m.id : null;
    const params = m.params ?? {};
    if (!isPlainObject(params)) return rpcError(id, RpcCode.INVALID_PARAMS, 'Invalid params: "params" must be an object');
    const method = McpMethodSchema.safeParse(m.method);
    if (!method.success) {
      return rpcError(id, RpcCode.METHOD_NOT_FOUND, `Method not found: ${m.method}; this server offers ${MCP_METHODS.join(', ')}`);
    }
    // a session nobody could address (its id would be in the answer a notification never gets) is never started
    if (m.kind === 'notification' && method.data === 'openenv/session/create') {
      this.deps.log.info({ event: 'mcp_refused', method: method.data }, 'openenv/session/create sent as a notification: nothing started');
      return rpcError(
        null,
        RpcCode.INVALID_REQUEST,
        'Invalid request: openenv/session/create needs an "id": sent as a notification, its session could never be addressed, so none is started',
      );
    }
    try {
      const result = await this.dispatch(method.data, params, ctx);
      return { jsonrpc: '2.0', result, id };
    } catch (e) {
      if (!isExpected(e)) this.deps.log.error({ err: e, method: method.data }, 'mcp request failed');
      return toRpcError(id, e);
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

  private async toolsList(params: Record<string, unknown>, ctx: McpContext): Promise<DialectTools> {
    const sid = this.sessionIdOf(params);
    if (sid !== undefined || ctx.sessionEpisode?.()) {
      const ep = this.episodeFor(params, ctx);
      const out = await this.deps.requests.run(ep, () => ep.step({ type: 'list_tools' }));
      if (!('tools' in out.observation)) throw new Error('list_tools answered without tools');
      return { tools: out.observation.tools.map(dialectTool) };
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
    return { tools: toolsets[name]!.map(dialectTool) };
  }

  private async toolsCall(params: Record<string, unknown>, ctx: McpContext): Promise<DialectCallResult> {
    const name = params.name;
    if (typeof name !== 'string' || name === '') throw new RpcFailure(RpcCode.INVALID_PARAMS, "Invalid params: missing 'name' (the tool to call) in params");
    const ep = this.episodeFor(params, ctx);
    // a non-object `arguments` is the model's error: the episode answers it (error_type invalid_args)
    const args = params.arguments === undefined ? {} : params.arguments;
    const out = await this.deps.requests.run(ep, () => ep.step({ type: 'call_tool', tool_name: name, arguments: args }));
    return dialectCallResult(out);
  }

  /** null: the HTTP client left while its episode waited for a slot (it was closed; no one reads the answer) */
  private async sessionCreate(params: Record<string, unknown>, ctx: McpContext): Promise<DialectSession | null> {
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

  private async sessionClose(params: Record<string, unknown>, ctx: McpContext): Promise<DialectClosed> {
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
