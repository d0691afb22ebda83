/**
 * One log line per HTTP request, when it is answered: method, path (query values that may carry a
 * token redacted), status and milliseconds, at info (5xx at warn: the error handler logged the
 * error itself). Routes polled by machines (/health, /metrics) set `logLevel: 'warn'` and write none.
 * WebSocket upgrades are logged by their session, not here.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

const TOKENISH = /token|auth|key|secret|password/i;
const REFUSAL = Symbol('openenv.refusal');

/** names why a request was refused (an error code), for its log line */
export function noteRefusal(req: FastifyRequest, code: string): void {
  (req as FastifyRequest & { [REFUSAL]?: string })[REFUSAL] = code;
}

/** the request's URL as logged: the path, and its query with token-like values redacted */
export function loggedUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const params = new URLSearchParams(url.slice(q + 1));
  for (const k of new Set(params.keys())) if (TOKENISH.test(k)) params.set(k, '[redacted]');
  const query = params.toString().replace(/%5Bredacted%5D/g, '[redacted]');
  return query ? `${url.slice(0, q)}?${query}` : url.slice(0, q);
}

async function requestLog(app: FastifyInstance): Promise<void> {
  app.addHook('onResponse', async (req: FastifyRequest, reply) => {
    if (reply.statusCode === 101 || (req.raw as { upgrade?: boolean }).upgrade) return;
    const status = reply.statusCode;
    const ms = Math.round(reply.elapsedTime * 10) / 10;
    const url = loggedUrl(req.url);
    const refusal = (req as FastifyRequest & { [REFUSAL]?: string })[REFUSAL];
    const fields = { req: { method: req.method, url }, status, ms, ...(refusal ? { error: refusal } : {}) };
    if (status >= 500) req.log.warn(fields, `${req.method} ${url} ${status} ${ms} ms`);
    else req.log.info(fields, `${req.method} ${url} ${status} ${ms} ms`);
  });
}

export default fp(requestLog, { name: 'request-log' });
