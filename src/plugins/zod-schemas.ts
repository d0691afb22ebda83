/**
 * Route schemas are zod schemas, declared once on the route: fastify validates requests with them
 * (a failure is a BadInputError, answered like every other bad input), handlers get their types,
 * and `/openapi.json` is generated from them. Responses are serialised as they are: their schemas
 * document the wire, they never reshape it.
 */
import type { FastifyInstance, FastifyPluginAsync, FastifyTypeProvider } from 'fastify';
import fp from 'fastify-plugin';
import type { z, ZodTypeAny } from 'zod';
import { BadInputError } from '../errors.js';
import { describeZod } from '../protocol/zod-issues.js';

export interface ZodTypeProvider extends FastifyTypeProvider {
  validator: this['schema'] extends ZodTypeAny ? z.output<this['schema']> : unknown;
  serializer: this['schema'] extends ZodTypeAny ? z.input<this['schema']> : unknown;
}

/** What a request part is called in error messages ("query.limit: ..."). */
const PART_NAMES: Record<string, string> = { body: 'body', querystring: 'query', params: 'path', headers: 'headers' };

const zodSchemas: FastifyPluginAsync = async (app: FastifyInstance) => {
  app.setValidatorCompiler(({ schema, httpPart }) => (data) => {
    const parsed = (schema as unknown as ZodTypeAny).safeParse(data);
    if (parsed.success) return { value: parsed.data };
    return { error: new BadInputError('VALIDATION_ERROR', describeZod(parsed.error, PART_NAMES[httpPart ?? ''] ?? httpPart ?? '')) };
  });
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
};

export default fp(zodSchemas, { name: 'zod-schemas' });
