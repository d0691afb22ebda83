/**
 * Standard MCP over Streamable HTTP at `/mcp` (one session, one episode): the protocol revisions
 * offered, the headers, the methods, the results and the names this server answers with, and how
 * a POST to `/mcp` is told apart from OpenEnv's dialect, declared once.
 */
import { z } from 'zod';
import { isInitialize, readRpcBody, type RpcMessage, type RpcRequest } from './jsonrpc.js';
import { EndingMetadataSchema, FailureSchema, ScoresSchema, TimingsSchema } from './observations.js';

/** Revisions a client may negotiate, newest first; the first is offered to a client asking for another. */
export const MCP_PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26'] as const;
export type McpProtocolVersion = (typeof MCP_PROTOCOL_VERSIONS)[number];

export function isSupportedMcpVersion(v: unknown): v is McpProtocolVersion {
  return typeof v === 'string' && (MCP_PROTOCOL_VERSIONS as readonly string[]).includes(v);
}

/** Header names as the spec spells them; Node lowercases incoming ones. */
export const MCP_SESSION_HEADER = 'Mcp-Session-Id';
export const MCP_VERSION_HEADER = 'MCP-Protocol-Version';

/** The methods of a standard session (after `initialize`); notifications are accepted and not answered. */
export const StandardMcpMethodSchema = z.enum(['initialize', 'ping', 'tools/list', 'tools/call', 'prompts/list', 'prompts/get']);
export type StandardMcpMethod = z.infer<typeof StandardMcpMethodSchema>;
export const STANDARD_MCP_METHODS = StandardMcpMethodSchema.options;
/** What a request naming a session may call (initialize starts one instead). */
export const SessionMethodSchema = StandardMcpMethodSchema.exclude(['initialize']);
export type SessionMethod = z.infer<typeof SessionMethodSchema>;

/** The one prompt a session offers: the task's system prompt and first prompt, as in the reset observation. */
export const TASK_PROMPT_NAME = 'task';

/** What `initialize` answers besides the negotiated version, the server's name and the task's instructions. */
export const MCP_SERVER_CAPABILITIES = { tools: { listChanged: false }, prompts: { listChanged: false } } as const;

/** A tool as a standard client reads it. */
export const StandardToolSchema = z.object({ name: z.string(), description: z.string(), inputSchema: z.record(z.unknown()) });
export type StandardTool = z.infer<typeof StandardToolSchema>;

/** The fields the call that ends an episode adds to `structuredContent` (over any tool field of the same name). */
export const StandardEndingSchema = z.object({
  done: z.literal(true),
  episode_id: z.string().describe('the episode in GET /episodes/{id}, the console and --record'),
  reward: z.number().nullable(),
  scores: ScoresSchema.nullable(),
  end_reason: z.string(),
  timings: TimingsSchema.partial(),
  failure: FailureSchema.optional(),
  metadata: EndingMetadataSchema.optional().describe('what the episode cost (as on the ending observation)'),
});
export type StandardEnding = z.infer<typeof StandardEndingSchema>;

/** A `tools/call` result: a tool's or the server's error is an `isError` result; the ending call carries the reward. */
export const StandardCallResultSchema = z.object({
  content: z.array(z.object({ type: z.literal('text'), text: z.string() })),
  isError: z.boolean(),
  structuredContent: z.record(z.unknown()).optional(),
});
export type StandardCallResult = z.infer<typeof StandardCallResultSchema>;

/** The task a session plays, chosen by the `/mcp?…` query of its `initialize`: the same choices as reset data. */
export const MCP_TASK_QUERY_KEYS = ['task_id', 'split', 'index', 'seed', 'episode_id', 'reset_timeout_s', 'priority'] as const;

/**
 * `initialize`'s params as the MCP spec requires them (InitializeRequest): the client's revision,
 * its capabilities and who it is. A request without them is malformed and starts no episode.
 */
export const InitializeParamsSchema = z.object({
  protocolVersion: z.string({ required_error: 'protocolVersion is required', invalid_type_error: 'protocolVersion must be a string' }),
  capabilities: z.record(z.unknown(), { required_error: 'capabilities is required', invalid_type_error: 'capabilities must be an object' }),
  clientInfo: z.object(
    { name: z.string({ required_error: 'clientInfo.name is required' }), version: z.string({ required_error: 'clientInfo.version is required' }) },
    { required_error: 'clientInfo is required', invalid_type_error: 'clientInfo must be an object' },
  ),
});

/** `initialize`'s result: the negotiated revision, what the server offers, and the task as instructions. */
export const InitializeResultSchema = z.object({
  protocolVersion: z.enum(MCP_PROTOCOL_VERSIONS),
  capabilities: z.record(z.unknown()),
  serverInfo: z.object({ name: z.string(), version: z.string() }),
  instructions: z.string().describe('the system prompt, then the first prompt'),
});
export type InitializeResult = z.infer<typeof InitializeResultSchema>;

export const ToolsListResultSchema = z.object({ tools: z.array(StandardToolSchema) });
export type ToolsListResult = z.infer<typeof ToolsListResultSchema>;

export const PromptsListResultSchema = z.object({
  prompts: z.array(z.object({ name: z.string(), description: z.string(), arguments: z.array(z.unknown()) })),
});
export type PromptsListResult = z.infer<typeof PromptsListResultSchema>;

/** MCP prompts hold user and assistant messages only: the system prompt comes first, as the user's. */
export const PromptResultSchema = z.object({
  description: z.string(),
  messages: z.array(z.object({ role: z.literal('user'), content: z.object({ type: z.literal('text'), text: z.string() }) })),
});
export type PromptResult = z.infer<typeof PromptResultSchema>;

/** What a session's methods answer. */
export type SessionResult = Record<string, never> | ToolsListResult | StandardCallResult | PromptsListResult | PromptResult;

/**
 * A POST to `/mcp`, classified once at the edge: a standard session's message (it names a session
 * in Mcp-Session-Id), a standard `initialize` (which starts one), or OpenEnv's dialect (anything else).
 */
export type McpPost =
  | { flavour: 'standard'; sessionId: string; message: RpcMessage }
  | { flavour: 'standard'; sessionId: null; message: RpcRequest }
  | { flavour: 'dialect'; message: RpcMessage };

export function classifyMcpPost(body: string, sessionId: string | undefined): McpPost {
  const message = readRpcBody(body);
  if (sessionId !== undefined) return { flavour: 'standard', sessionId, message };
  if (isInitialize(message)) return { flavour: 'standard', sessionId: null, message };
  return { flavour: 'dialect', message };
}
