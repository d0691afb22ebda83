/**
 * `/mcp`: two flavours of MCP on one path, each POST classified once, here (classifyMcpPost).
 *
 * - Standard MCP over Streamable HTTP (src/sessions/mcp-standard-sessions.ts): a POST of
 *   `initialize` (without `Mcp-Session-Id`) starts a session, one episode; every request carrying
 *   `Mcp-Session-Id` belongs to one. `GET` answers 405 (no server stream), `DELETE` ends a session.
 * - OpenEnv's JSON-RPC dialect (src/sessions/mcp-service.ts): everything else. Every answer is
 *   HTTP 200 with a JSON-RPC body, but a notification's (202, no body).
 *
 * A browser page from an origin that is not allowed gets 403 on either, as on every route
 * (plugins/site-guard.ts): the DNS-rebinding rule of the MCP spec.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { RpcCode, RpcRequestSchema, RpcResponseSchema, rpcError } from '../protocol/jsonrpc.js';
import { classifyMcpPost, MCP_SESSION_HEADER, MCP_VERSION_HEADER } from '../protocol/mcp-standard.js';
import type { OpenEnvRuntime } from '../runtime.js';
import type { McpHttpAnswer } from '../sessions/mcp-standard-sessions.js';
import { dropReply, withClientGone } from './client-gone.js';

function header(req: FastifyRequest, name: string): string | undefined {
  const v = req.headers[name.toLowerCase()];
  return Array.isArray(v) ? v[0] : v;
}

function send(reply: FastifyReply, ans: McpHttpAnswer) {
  reply.code(ans.status);
  for (const [k, v] of Object.entries(ans.headers ?? {})) reply.header(k, v);
  return ans.body === undefined ? reply.send() : reply.send(ans.body);
}

export async function mcpRoutes(app: FastifyInstance, { runtime }: { runtime: OpenEnvRuntime }): Promise<void> {
  const { mcp, mcpStandard } = runtime.sessions;
  // The body is parsed here, not by fastify, so bad JSON is a JSON-RPC parse error (HTTP 200).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => done(null, body));
  // Whatever fastify refuses in this scope (a body too large...) is still a JSON-RPC answer.
  // A client's mistake fastify found (4xx: too large, a malformed content type...) is an invalid
  // request, logged at info; only the server's own faults are errors.
  app.setErrorHandler((err, req, reply) => {
    const status = (err as { statusCode?: number }).statusCode;
    const clients = status !== undefined && status >= 400 && status < 500;
    if (clients) req.log.info({ code: (err as { code?: string }).code, message: (err as Error).message }, 'mcp request refused');
    else req.log.error({ err }, 'mcp request failed');
    return reply
      .code(200)
      .send(
        rpcError(
          null,
          clients ? RpcCode.INVALID_REQUEST : RpcCode.INTERNAL_ERROR,
          clients ? `Invalid request: ${(err as Error).message}` : 'Internal error; see the server log',
        ),
      );
  });

  app.post(
    '/mcp',
    {
      schema: {
        summary: "MCP: standard Streamable HTTP sessions (initialize, Mcp-Session-Id) and OpenEnv's JSON-RPC dialect",
        description: [
          'Standard MCP: POST initialize (the task from the query: task_id, or split and index, or seed) answers with an Mcp-Session-Id header; requests with it are',
          'ping, tools/list, tools/call, prompts/list, prompts/get (404 once the session ended, 400 for an unsupported MCP-Protocol-Version).',
          "OpenEnv's dialect (no initialize, no session header): tools/list, tools/call, openenv/session/create, openenv/session/close, HTTP 200 with a",
          'JSON-RPC body; errors use codes -32700, -32600, -32601, -32602, -32603 and -32000. A notification (no "id"): 202 and no body. Auth: 401; an Origin not allowed: 403.',
        ].join(' '),
        body: RpcRequestSchema,
        response: { 200: RpcResponseSchema, 202: { description: 'a notification (no "id"): run, not answered' } },
      },
      // documented, not validated here: the services answer a malformed request with a JSON-RPC error
      validatorCompiler: () => (data) => ({ value: data }),
    },
    async (req, reply) => {
      const post = classifyMcpPost(typeof req.body === 'string' ? req.body : '', header(req, MCP_SESSION_HEADER));
      if (post.flavour === 'standard' && post.sessionId !== null) {
        return send(reply, await mcpStandard.handle(post.sessionId, header(req, MCP_VERSION_HEADER), post.message));
      }
      if (post.flavour === 'standard') {
        const query = (req.query ?? {}) as Record<string, unknown>;
        const ans = await withClientGone(reply, (gone) => mcpStandard.initialize(post.message, query, gone));
        if (ans === null || reply.raw.destroyed) return dropReply(reply);
        return send(reply, ans);
      }
      const res = await withClientGone(reply, (gone) => mcp.handlePost(post.message, { clientGone: gone }));
      // the client left while its session waited for a slot; the episode was closed
      if (reply.raw.destroyed) return dropReply(reply);
      // a notification (no "id"): run, not answered
      if (res === null) return reply.code(202).send();
      return reply.code(200).send(res);
    },
  );

  app.get(
    '/mcp',
    { schema: { summary: 'MCP server-to-client stream: not offered (405), every answer comes in its POST reply', response: { 405: RpcResponseSchema } } },
    async (_req, reply) =>
      reply
        .code(405)
        .header('allow', 'POST, DELETE')
        .send(rpcError(null, RpcCode.INVALID_REQUEST, 'Method not allowed: this server sends no server-to-client stream; POST requests to /mcp')),
  );

  app.delete(
    '/mcp',
    {
      schema: {
        summary: 'ends a standard MCP session (Mcp-Session-Id): its episode is closed and its env torn down',
        response: { 204: { description: 'ended' }, 400: RpcResponseSchema, 404: RpcResponseSchema },
      },
    },
    async (req, reply) => {
      const sid = header(req, MCP_SESSION_HEADER);
      if (sid === undefined) {
        return send(reply, { status: 400, body: rpcError(null, RpcCode.INVALID_REQUEST, `Bad request: DELETE /mcp needs the ${MCP_SESSION_HEADER} header`) });
      }
      return send(reply, await mcpStandard.terminate(sid));
    },
  );
}
