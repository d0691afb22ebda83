/** What the server says about itself: GET /health (with the warm pool's state) and GET /schema. */
import { z } from 'zod';
import { PoolStatusSchema } from './pool.js';

export const HealthySchema = z
  .object({ status: z.literal('healthy'), pool: PoolStatusSchema.optional() })
  .describe('serving (pool: only with --warm-pool above 0)');

export const UnhealthySchema = z
  .object({ status: z.literal('unhealthy'), reason: z.string(), pool: PoolStatusSchema.optional() })
  .describe('images still building, the engine unreachable, or draining');

export type Health = z.infer<typeof HealthySchema> | z.infer<typeof UnhealthySchema>;

/** GET /schema: the JSON Schemas of the action, the observation and the state (OpenEnv's). */
export const SchemasSchema = z
  .object({ action: z.object({}).passthrough(), observation: z.object({}).passthrough(), state: z.object({}).passthrough() })
  .describe('schemas');
