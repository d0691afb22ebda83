/**
 * `POST /mcp`: JSON-RPC 2.0 over HTTP (src/sessions/mcp-service.ts). Every answer is HTTP 200 with
 * a JSON-RPC body; only auth answers 401 before it gets here.
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
  app.setErrorHandler((err, req, reply) => {
    const tooLarge = (err as { code?: string }).code === 'FST_ERR_CTP_BODY_TOO_LARGE';
    if (!tooLarge) req.log.error({ err }, 'mcp request failed');
    return reply.code(200).send(rpcError(null, tooLarge ? RpcCode.INVALID_REQUEST : RpcCode.INTERNAL_ERROR, tooLarge ? `Invalid request: ${(err as Error).message}` : 'Internal error; see the server log'));
  });

  app.post(
    '/mcp',
    {
      schema: {
        summary: 'MCP JSON-RPC 2.0: tools/list, tools/call, openenv/session/create, openenv/session/close',
        description: 'Always HTTP 200 (except auth); errors use JSON-RPC codes -32700, -32600, -32601, -32602, -32603 and -32000 (capacity, deploy, episode state).',
        body: RpcRequestSchema,
        response: { 200: RpcResponseSchema },
      },
      // documented, not validated here: the service answers a malformed request with a JSON-RPC error
      validatorCompiler: () => (data) => ({ value: data }),
    },
    async (req, reply) => {
      const body = typeof req.body === 'string' ? req.body : '';
      const res = await withClientGone(reply, (gone) => mcp.handleText(body, { clientGone: gone }));
      // the client left while its session waited for a slot; the episode was closed
      if (reply.raw.destroyed) return dropReply(reply);
      return reply.code(200).send(res);
    },
  );
}
