/**
 * Standard MCP over Streamable HTTP at `/mcp` (one session, one episode): the protocol revisions
 * offered, the headers, the methods and the names this server answers with, declared once.
 */
import { z } from 'zod';

/** Revisions a client may negotiate, newest first; the first is offered to a client asking for another. */
export const MCP_PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26'] as const;
export type McpProtocolVersion = (typeof MCP_PROTOCOL_VERSIONS)[number];

/** The revision the spec says to assume when a request carries no MCP-Protocol-Version header. */
export const MCP_ASSUMED_VERSION: McpProtocolVersion = '2025-03-26';

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

/** The one prompt a session offers: the task's system prompt and first prompt, as in the reset observation. */
export const TASK_PROMPT_NAME = 'task';

/** What `initialize` answers besides the negotiated version, the server's name and the task's instructions. */
export const MCP_SERVER_CAPABILITIES = { tools: { listChanged: false }, prompts: { listChanged: false } } as const;

/** A tool as a standard client reads it. */
export interface StandardTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

/** The fields the call that ends an episode adds to `structuredContent` (over any tool field of the same name). */
export interface StandardEnding {
  done: true;
  /** the episode's id in GET /episodes/{id}, the console and --record */
  episode_id: string;
  reward: number | null;
  scores: Record<string, number> | null;
  end_reason: string;
  timings: Record<string, unknown>;
  failure?: Record<string, unknown>;
}

/** The task a session plays, chosen by the `/mcp?…` query of its `initialize`: the same choices as reset data. */
export const MCP_TASK_QUERY_KEYS = ['task_id', 'split', 'index', 'seed', 'episode_id', 'reset_timeout_s'] as const;
