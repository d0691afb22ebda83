/**
 * Standard MCP sessions (Streamable HTTP, revisions 2025-03-26, 2025-06-18, 2025-11-25) at
 * `/mcp`, beside OpenEnv's dialect (mcp-service.ts): `initialize` starts an episode (the task from
 * the URL's query, the reset waiting in the same queue), its `Mcp-Session-Id` names it, and
 * each later request is a step or a read of it. The episode is request-held (request-episodes.ts),
 * so it idles out, shows in the console and metrics and is recorded like any other, transport `mcp`.
 *
 * Answers are plain JSON: every request is answered by one response, and no server-to-client
 * request or notification is ever sent, so an SSE stream would add nothing a client needs.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { LoadedBundle } from '../bundle/index.js';
import { ENDED_EPISODES_KEPT } from '../defaults.js';
import { isExpected, RpcFailure, toRpcError } from '../errors.js';
import type { Episode } from '../episodes/episode.js';
import { isPlainObject } from '../util/json.js';
import type { ToolSpec } from '../protocol/bundle.js';
import { isInitialize, RpcCode, rpcError, type RpcId, type RpcMessage, type RpcRequest, type RpcResponse } from '../protocol/jsonrpc.js';
import {
  InitializeParamsSchema,
  isSupportedMcpVersion,
  MCP_PROTOCOL_VERSIONS,
  MCP_SERVER_CAPABILITIES,
  MCP_SESSION_HEADER,
  MCP_TASK_QUERY_KEYS,
  MCP_VERSION_HEADER,
  STANDARD_MCP_METHODS,
  SessionMethodSchema,
  TASK_PROMPT_NAME,
  type StandardCallResult,
  type StandardEnding,
  type InitializeResult,
  type SessionMethod,
  type SessionResult,
  type StandardTool,
} from '../protocol/mcp-standard.js';
import type { ResetObservation, StepOutcome } from '../protocol/observations.js';
import { parseResetData } from './client-input.js';
import type { RequestEpisodes } from './request-episodes.js';

/** What the route sends: a status, headers, and a JSON body or none. */
export interface McpHttpAnswer {
  status: number;
  headers?: Record<string, string>;
  body?: RpcResponse;
}

interface Session {
  id: string;
  ep: Episode;
  reset: ResetObservation;
}

export interface StandardMcpDeps {
  requests: RequestEpisodes;
  bundle: LoadedBundle;
  log: Logger;
}

/** `/mcp?split=eval&index=3` → reset data: the query's strings, numbers where reset data wants them. */
export function resetDataOfQuery(query: Record<string, unknown>) {
  const data: Record<string, unknown> = {};
  for (const key of MCP_TASK_QUERY_KEYS) {
    const v = query[key];
    if (v === undefined) continue;
    if (Array.isArray(v)) throw new RpcFailure(RpcCode.INVALID_PARAMS, `Invalid params: the query gives "${key}" more than once`);
    const numeric = key === 'index' || key === 'seed' || key === 'reset_timeout_s';
    data[key] = numeric && typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v)) ? Number(v) : v;
  }
  return parseResetData(data);
}

function standardTool(t: ToolSpec): StandardTool {
  return { name: t.name, description: t.description, inputSchema: t.input_schema };
}

/** A step's outcome as a standard `tools/call` result: tool errors are `isError` results, and the ending call carries the reward. */
export function standardCallResult(out: StepOutcome, episodeId: string): StandardCallResult {
  const obs = out.observation;
  if (!('tool_name' in obs)) throw new Error('tools/call answered without a call observation');
  const content = obs.result?.content ?? [{ type: 'text' as const, text: obs.error?.message ?? 'the tool call failed' }];
  const structured = isPlainObject(obs.result?.structured_content) ? obs.result.structured_content : null;
  const isError = (obs.result?.is_error ?? true) || obs.error !== null;
  if (!out.done) return { content, isError, ...(structured ? { structuredContent: structured } : {}) };
  const ending: StandardEnding = {
    done: true,
    episode_id: episodeId,
    reward: out.reward,
    scores: obs.scores ?? null,
    end_reason: obs.end_reason ?? 'closed',
    timings: obs.timings ?? {},
    ...(obs.failure ? { failure: obs.failure } : {}),
    ...(obs.metadata ? { metadata: obs.metadata } : {}),
  };
  const said =
    ending.reward === null
      ? `The episode ended (${ending.end_reason}) without a reward${ending.failure ? `: ${ending.failure.message}` : ''}.`
      : `The episode ended (${ending.end_reason}) with reward ${ending.reward}.`;
  return { content: [...content, { type: 'text', text: said }], isError, structuredContent: { ...structured, ...ending } };
}

export class StandardMcpSessions {
  private readonly live = new Map<string, Session>();
  /** sessions whose episode was torn down: a DELETE of one still succeeds, any other request is 404 */
  private readonly ended = new Map<string, NodeJS.Timeout>();
  private stopped = false;

  constructor(private readonly deps: StandardMcpDeps) {}

  /**
   * `initialize`: plays the query's task as a new episode (it waits for a slot like any reset) and
   * answers with the session id. Null when the client left while it waited: no one to answer.
   */
  async initialize(msg: RpcRequest, query: Record<string, unknown>, clientGone?: AbortSignal): Promise<McpHttpAnswer | null> {
    const { id } = msg;
    // a malformed initialize deploys nothing: it is refused before the episode is asked for
    const valid = InitializeParamsSchema.safeParse(msg.params);
    if (!valid.success) {
      // the schema's messages name their fields (protocol/mcp-standard.ts): no path before them (cf. describeIssues)
      const why = valid.error.issues.map((i) => i.message).join('; ');
      return {
        status: 200,
        body: rpcError(id, RpcCode.INVALID_PARAMS, `Invalid params: initialize needs protocolVersion, capabilities and clientInfo (${why})`),
      };
    }
    const params = valid.data;
    const asked = params.protocolVersion;
    const version = isSupportedMcpVersion(asked) ? asked : MCP_PROTOCOL_VERSIONS[0];
    let started;
    try {
      started = await this.deps.requests.start(resetDataOfQuery(query), 'mcp', clientGone);
    } catch (e) {
      return { status: 200, body: this.refused(id, e, 'initialize') };
    }
    if (!started) return null;
    const { ep, out } = started;
    const session: Session = { id: randomUUID(), ep, reset: out.observation };
    this.live.set(session.id, session);
    void ep.tornDown.then(() => this.onTornDown(session.id));
    this.deps.log.info({ event: 'mcp_session', episode_id: ep.id, protocol_version: version }, 'standard MCP session started');
    const result: InitializeResult = {
      protocolVersion: version,
      capabilities: MCP_SERVER_CAPABILITIES,
      serverInfo: { name: this.deps.bundle.manifest.name, version: this.deps.bundle.manifest.version },
      instructions: instructionsOf(out.observation),
    };
    return { status: 200, headers: { [MCP_SESSION_HEADER]: session.id }, body: { jsonrpc: '2.0', id, result } };
  }

  /** A POST naming a session: the body read, the version header checked, the session found, the message answered. */
  async handle(sid: string, version: string | undefined, msg: RpcMessage): Promise<McpHttpAnswer> {
    if (msg.kind === 'invalid' && msg.problem === 'unparsable') {
      return { status: 400, body: rpcError(null, RpcCode.PARSE_ERROR, 'Parse error: the body is not valid JSON') };
    }
    if (isInitialize(msg)) {
      return {
        status: 400,
        body: rpcError(null, RpcCode.INVALID_REQUEST, `Bad request: initialize starts a session and must not carry ${MCP_SESSION_HEADER}`),
      };
    }
    if (version !== undefined && !isSupportedMcpVersion(version)) {
      return {
        status: 400,
        body: rpcError(
          null,
          RpcCode.INVALID_REQUEST,
          `Bad request: unsupported ${MCP_VERSION_HEADER} ${version}; this server speaks ${MCP_PROTOCOL_VERSIONS.join(', ')}`,
        ),
      };
    }
    const session = this.live.get(sid);
    if (!session || session.ep.done) return notFound(sid, this.ended.has(sid) || session !== undefined);
    switch (msg.kind) {
      case 'notification':
      case 'response':
        // a notification (a method, no id) or a client's response (a result or an error, no method): taken, not answered
        this.deps.requests.touch(session.ep);
        return { status: 202 };
      case 'invalid':
        return { status: 400, body: invalidRequest(msg) };
      case 'request':
        return this.request(session, msg);
    }
  }

  private async request(session: Session, msg: RpcRequest): Promise<McpHttpAnswer> {
    const { id } = msg;
    // initialize was refused before: this session is initialized
    const method = SessionMethodSchema.safeParse(msg.method);
    if (!method.success) {
      return {
        status: 200,
        body: rpcError(id, RpcCode.METHOD_NOT_FOUND, `Method not found: ${msg.method}; this server offers ${STANDARD_MCP_METHODS.join(', ')}`),
      };
    }
    const params = msg.params ?? {};
    if (!isPlainObject(params)) return { status: 200, body: rpcError(id, RpcCode.INVALID_PARAMS, 'Invalid params: "params" must be an object') };
    try {
      const result = await this.dispatch(session, method.data, params);
      return { status: 200, body: { jsonrpc: '2.0', id, result } };
    } catch (e) {
      return { status: 200, body: this.refused(id, e, method.data) };
    }
  }

  /** A method's failure as its JSON-RPC error; one that is not an expected refusal is logged. */
  private refused(id: RpcId, e: unknown, method: string) {
    if (!isExpected(e)) this.deps.log.error({ err: e, method }, 'mcp request failed');
    return toRpcError(id, e);
  }

  /** DELETE: ends the session's episode and tears its env down. */
  async terminate(sid: string): Promise<McpHttpAnswer> {
    const session = this.live.get(sid);
    if (session) {
      await this.deps.requests.close(session.ep);
      return { status: 204 };
    }
    if (this.ended.has(sid)) return { status: 204 };
    return notFound(sid, false);
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.ended.values()) clearTimeout(t);
    this.ended.clear();
  }

  private async dispatch(session: Session, method: SessionMethod, params: Record<string, unknown>): Promise<SessionResult> {
    const { ep, reset } = session;
    const { requests } = this.deps;
    switch (method) {
      case 'ping':
        requests.touch(ep);
        return {};
      case 'tools/list':
        requests.touch(ep);
        return { tools: reset.tools.map(standardTool) };
      case 'tools/call': {
        const name = params.name;
        if (typeof name !== 'string' || name === '') throw new RpcFailure(RpcCode.INVALID_PARAMS, 'Invalid params: "name" (the tool to call) is required');
        // a non-object `arguments` is the model's error: the episode answers it (isError, invalid_args)
        const args = params.arguments === undefined ? {} : params.arguments;
        const out = await requests.run(ep, () => ep.step({ type: 'call_tool', tool_name: name, arguments: args }));
        return standardCallResult(out, ep.id);
      }
      case 'prompts/list':
        requests.touch(ep);
        return {
          prompts: [{ name: TASK_PROMPT_NAME, description: `task ${reset.task_id}: its system prompt and first prompt`, arguments: [] }],
        };
      case 'prompts/get': {
        requests.touch(ep);
        if (params.name !== TASK_PROMPT_NAME) {
          throw new RpcFailure(
            RpcCode.INVALID_PARAMS,
            `Invalid params: unknown prompt ${JSON.stringify(params.name)}; this session offers "${TASK_PROMPT_NAME}"`,
          );
        }
        return {
          description: `task ${reset.task_id}: its system prompt and first prompt`,
          messages: reset.messages.slice(0, 2).map((m) => ({ role: 'user' as const, content: { type: 'text' as const, text: m.content } })),
        };
      }
    }
  }

  private onTornDown(sid: string): void {
    this.live.delete(sid);
    if (this.stopped) return;
    if (this.ended.size >= ENDED_EPISODES_KEPT) {
      const oldest = this.ended.entries().next().value;
      if (oldest) {
        clearTimeout(oldest[1]);
        this.ended.delete(oldest[0]);
      }
    }
    const timer = setTimeout(() => this.ended.delete(sid), this.deps.requests.idleTimeoutMs);
    timer.unref?.();
    this.ended.set(sid, timer);
  }
}

/** The task as an agent that reads only `instructions` needs it: the system prompt, then the first prompt. */
export function instructionsOf(reset: ResetObservation): string {
  return reset.messages
    .slice(0, 2)
    .map((m) => m.content)
    .join('\n\n');
}

/** A message on a session that is no JSON-RPC message this server takes (HTTP 400). */
function invalidRequest(msg: RpcMessage & { kind: 'invalid' }): RpcResponse {
  if (msg.problem === 'batch') return rpcError(null, RpcCode.INVALID_REQUEST, 'Invalid request: batches are not supported; send one JSON-RPC object');
  if (msg.problem === 'not_object') return rpcError(null, RpcCode.INVALID_REQUEST, 'Invalid request: expected a JSON-RPC 2.0 object');
  return rpcError(msg.id, RpcCode.INVALID_REQUEST, 'Invalid request: expected a request ("method" and "id"), a notification or a response');
}

function notFound(sid: string, ended: boolean): McpHttpAnswer {
  const why = ended ? 'its episode has ended' : 'no such session';
  return { status: 404, body: rpcError(null, RpcCode.INVALID_REQUEST, `Session not found: ${sid} (${why}); POST initialize to start a new one`) };
}
