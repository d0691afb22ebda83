/**
 * The stateful HTTP episodes (`/episodes`, and the console's playground, which starts one): the
 * path, the start's answers, the list of live episodes.
 */
import { z } from 'zod';
import { ErrorBodySchema } from './http.js';
import { PhaseSchema, StepOutcomeSchema, TransportSchema } from './observations.js';

export const EpisodeIdParamsSchema = z.object({ id: z.string().describe('the episode_id') });

/** The reset observation of an episode started over HTTP, and the id its later requests name. */
export const EpisodeStartedSchema = StepOutcomeSchema.extend({ episode_id: z.string() }).describe('the reset observation');
export type EpisodeStarted = z.infer<typeof EpisodeStartedSchema>;

/** The answers of a request that starts an episode (POST /episodes, POST /console/playground). */
export const EPISODE_START_RESPONSES = {
  201: EpisodeStartedSchema,
  400: ErrorBodySchema.describe('bad reset data'),
  404: ErrorBodySchema.describe('unknown task or split'),
  502: ErrorBodySchema.describe('the deploy failed (a failure object says why)'),
  503: ErrorBodySchema.describe('no slot within the reset timeout (Retry-After set), or the server is shutting down'),
};

/** The answers of POST /episodes/{id}/step. */
export const EPISODE_STEP_RESPONSES = {
  200: StepOutcomeSchema.describe('the observation'),
  400: ErrorBodySchema.describe('a malformed action'),
  404: ErrorBodySchema.describe('unknown episode'),
  409: ErrorBodySchema.describe('the episode is not running yet, is done, or belongs to a WebSocket session'),
};

/** GET /episodes: live episodes of every transport, the queue and the capacity. */
export const EpisodeListSchema = z
  .object({
    active: z.array(
      z.object({
        episode_id: z.string(),
        task_id: z.string(),
        phase: PhaseSchema,
        transport: TransportSchema,
        started_at: z.string().datetime(),
        steps: z.number().int(),
        reward: z.number().nullable(),
      }),
    ),
    waiting: z.number().int(),
    capacity: z.number().int(),
  })
  .describe('episodes');
export type EpisodeList = z.infer<typeof EpisodeListSchema>;
