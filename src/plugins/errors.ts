/**
 * One place where a failure becomes an HTTP answer: our errors by their type (errors.ts), fastify's
 * own 4xx (bad JSON, a body too large...) with their status, anything else a 500 that shows no
 * internals. Client mistakes (and expected refusals: capacity, shutting down) are not the server's
 * faults: they are named on the request's one log line; only the unexpected is logged as an error.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { CapacityError, ServerError, toHttpError } from '../errors.js';
import { noteRefusal } from './request-log.js';

async function httpErrors(app: FastifyInstance): Promise<void> {
  app.setErrorHandler((err, req, reply) => {
    const { status, body } = toHttpError(err);
    const ownStatus = (err as { statusCode?: number }).statusCode;
    if ((err as { code?: string }).code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
      // fastify says only "Unsupported Media Type: <type>": say what to send instead
      noteRefusal(req, 'FST_ERR_CTP_INVALID_MEDIA_TYPE');
      const got = req.headers['content-type'];
      return reply.code(415).send({
        error: 'invalid_request',
        message: `the body must be JSON sent with "content-type: application/json" (got ${got ? `"${got.slice(0, 100)}"` : 'no content-type'})`,
      });
    }
    if (status === 500 && ownStatus !== undefined && ownStatus < 500) {
      // fastify's own 4xx (bad JSON body, payload too large...): keep its status and message
      noteRefusal(req, (err as { code?: string }).code ?? 'invalid_request');
      return reply.code(ownStatus).send({ error: 'invalid_request', message: (err as Error).message });
    }
    // expected refusals (bad input, capacity, a failed deploy the episode logged) are named on the
    // request's line; only the unexpected is the server's fault, logged with its stack
    if (err instanceof ServerError) noteRefusal(req, err.row.error);
    else req.log.error({ err }, 'request failed');
    if (err instanceof CapacityError) reply.header('retry-after', String(err.capacity.retry_after_s));
    return reply.code(status).send(body);
  });
  app.setNotFoundHandler((req, reply) => reply.code(404).send({ error: 'not_found', message: `no route ${req.method} ${req.url.split('?')[0]}` }));
}

export default fp(httpErrors, { name: 'http-errors' });
