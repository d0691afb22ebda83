/**
 * One log line per HTTP request, when it is answered: method, path (query values that may carry a
 * token redacted), status and milliseconds, at info (5xx at warn: the error handler logged the
 * error itself). Routes polled by machines (/health, /metrics) set `logLevel: 'warn'` and write none.
 * An accepted WebSocket upgrade is logged by its route (routes/ws.ts), a refused one here.
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

/**
 * Who asked what, for the `req` key of a line (which fastify's request serializer reads: it logs
 * `ip` as remoteAddress): the client's address, from X-Forwarded-For only behind --trust-proxy.
 */
export function requestFields(req: FastifyRequest, url: string): { method: string; url: string; host: string | undefined; ip: string } {
  return { method: req.method, url, host: req.headers.host, ip: req.ip };
}

async function requestLog(app: FastifyInstance): Promise<void> {
  app.addHook('onResponse', async (req: FastifyRequest, reply) => {
    // an accepted WebSocket upgrade is logged by its route when the session opens (a refused one here)
    if (reply.statusCode === 101) return;
    const status = reply.statusCode;
    const ms = Math.round(reply.elapsedTime * 10) / 10;
    const url = loggedUrl(req.url);
    const refusal = (req as FastifyRequest & { [REFUSAL]?: string })[REFUSAL];
    const fields = { req: requestFields(req, url), status, ms, ...(refusal ? { error: refusal } : {}) };
    if (status >= 500) req.log.warn(fields, `${req.method} ${url} ${status} ${ms} ms`);
    else req.log.info(fields, `${req.method} ${url} ${status} ${ms} ms`);
  });
}

export default fp(requestLog, { name: 'request-log' });
