/**
 * `POST /mcp`: JSON-RPC 2.0 over HTTP (src/sessions/mcp-service.ts). Every answer is HTTP 200 with
 * a JSON-RPC body, but a notification's (no "id" member: run, answered 202 with no body); only auth
 * answers 401 before it gets here.
 */
import type { FastifyInstance } from 'fastify';
import { RpcCode, RpcRequestSchema, RpcResponseSchema, rpcError } from '../protocol/jsonrpc.js';
import type { OpenEnvRuntime } from '../runtime.js';
import { dropReply, withClientGone } from './client-gone.js';

export async function mcpRoutes(app: FastifyInstance, { runtime }: { runtime: OpenEnvRuntime }): Promise<void> {
  const { mcp } = runtime.sessions;
  // The body is parsed by the service, not by fastify, so bad JSON is a JSON-RPC parse error (HTTP 200).
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
        summary: 'MCP JSON-RPC 2.0: tools/list, tools/call, openenv/session/create, openenv/session/close',
        description:
          'HTTP 200 with a JSON-RPC body (a notification, without "id": 202 and no body; auth: 401); errors use JSON-RPC codes -32700, -32600, -32601, -32602, -32603 and -32000 (capacity, deploy, episode state).',
        body: RpcRequestSchema,
        response: { 200: RpcResponseSchema, 202: { description: 'a notification (no "id"): run, not answered' } },
      },
      // documented, not validated here: the service answers a malformed request with a JSON-RPC error
      validatorCompiler: () => (data) => ({ value: data }),
    },
    async (req, reply) => {
      const body = typeof req.body === 'string' ? req.body : '';
      const res = await withClientGone(reply, (gone) => mcp.handleHttp(body, { clientGone: gone }));
      // the client left while its session waited for a slot; the episode was closed
      if (reply.raw.destroyed) return dropReply(reply);
      // a notification (no "id"): run, not answered
      if (res === null) return reply.code(202).send();
      return reply.code(200).send(res);
    },
  );
}
