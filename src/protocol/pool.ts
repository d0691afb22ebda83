/** The warm pool as /health reports it (only when --warm-pool is above 0), declared once. */
import { z } from 'zod';

export const PoolStatusSchema = z
  .object({
    target: z.number().int().describe('--warm-pool: envs the pool keeps deployed ahead of demand'),
    ready: z.number().int().describe('pooled envs ready to be handed out'),
    deploying: z.number().int().describe('pooled envs being deployed (refills)'),
    by_env: z.record(z.object({ ready: z.number().int(), deploying: z.number().int() })).describe('the same, per env of the bundle'),
    refilling: z.boolean().describe('false while refills are stopped after repeated failures'),
    consecutive_failures: z.number().int(),
    last_error: z.string().nullable().describe('why the last refill failed'),
    retry_in_s: z.number().nullable().describe('when refilling resumes, while stopped'),
    hits: z.number().int(),
    misses: z.number().int(),
    evictions: z.number().int(),
    refill_failures: z.number().int(),
  })
  .describe('the warm pool');
export type PoolStatus = z.infer<typeof PoolStatusSchema>;
