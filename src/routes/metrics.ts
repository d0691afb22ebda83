/** `GET /metrics`: Prometheus text format. */
import type { FastifyInstance } from 'fastify';
import type { OpenEnvRuntime } from '../runtime.js';

export async function metricsRoutes(app: FastifyInstance, { runtime }: { runtime: OpenEnvRuntime }): Promise<void> {
  const { registry } = runtime.metrics;
  app.get(
    '/metrics',
    {
      // Prometheus scrapes it: its request lines would drown the episodes' (errors still show)
      logLevel: 'warn',
      schema: {
        summary: 'Prometheus metrics',
        response: { 200: { description: 'Prometheus text format', content: { 'text/plain': { schema: { type: 'string' } } } } },
      },
    },
    async (_req, reply) => {
      reply.header('content-type', registry.contentType);
      return registry.metrics();
    },
  );
}
