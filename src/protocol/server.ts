/** What the server says about itself: GET /health (with the warm pool's state) and GET /schema. */
import { z } from 'zod';
import { PoolStatusSchema } from './pool.js';

/** where an env's image is: ready, being built (or looked up), queued, failed, or missing (not on the engine under --images prebuilt) */
export const EnvImageStateSchema = z.enum(['ready', 'building', 'queued', 'failed', 'missing']);
export type EnvImageState = z.infer<typeof EnvImageStateSchema>;

/** the env images while not all are ready: how many are in each state, and the line the console shows */
export const EnvImagesSchema = z
  .object({
    total: z.number().int(),
    counts: z.record(EnvImageStateSchema, z.number().int()),
    summary: z.string().describe('"N of M env images ready (…)"'),
  })
  .describe('the env images, while not all are ready');
export type EnvImages = z.infer<typeof EnvImagesSchema>;

export const HealthySchema = z
  .object({ status: z.literal('healthy'), pool: PoolStatusSchema.optional(), images: EnvImagesSchema.optional() })
  .describe('serving (pool: only with --warm-pool above 0; images: while not every env image is ready)');

export const UnhealthySchema = z
  .object({ status: z.literal('unhealthy'), reason: z.string(), pool: PoolStatusSchema.optional(), images: EnvImagesSchema.optional() })
  .describe('starting, every env image failed, the engine unreachable, or draining');

export type Health = z.infer<typeof HealthySchema> | z.infer<typeof UnhealthySchema>;

/** GET /schema: the JSON Schemas of the action, the observation and the state (OpenEnv's). */
export const SchemasSchema = z
  .object({ action: z.object({}).passthrough(), observation: z.object({}).passthrough(), state: z.object({}).passthrough() })
  .describe('schemas');
