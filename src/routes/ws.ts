/** `WS /ws`: each connection becomes a session of the runtime's (src/sessions/ws-session.ts). */
import type { FastifyInstance } from 'fastify';
import { loggedUrl, requestFields } from '../plugins/request-log.js';
import type { OpenEnvRuntime } from '../runtime.js';

export async function wsRoutes(app: FastifyInstance, { runtime }: { runtime: OpenEnvRuntime }): Promise<void> {
  app.get(
    '/ws',
    {
      websocket: true,
      schema: {
        summary: 'WebSocket sessions (OpenEnv envelope: reset, step, state, close, mcp)',
        description: 'Upgrade to a WebSocket; one JSON text frame in, exactly one out. See docs/protocol.md and GET /schema.',
        response: { 101: { description: 'switching protocols' }, 401: { description: 'no or wrong token (before the upgrade)' } },
      },
    },
    (socket, req) => {
      // the request's one log line (plugins/request-log.ts skips upgrades): the session opened
      const url = loggedUrl(req.url);
      req.log.info({ req: requestFields(req, url), status: 101 }, `${req.method} ${url} 101 (WebSocket session opened)`);
      runtime.sessions.openSocket(socket, req.log);
    },
  );
}
