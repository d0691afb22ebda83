/** Response shapes several routes share. */
import { z } from 'zod';
import { StepOutcomeSchema } from '../protocol/observations.js';

/** Every HTTP error body: a stable code, a message a person can act on, and details by kind. */
export const ErrorBodySchema = z.object({ error: z.string(), message: z.string() }).passthrough();

/** The answers of a request that starts an episode (POST /episodes, POST /console/playground). */
export const EPISODE_START_RESPONSES = {
  201: StepOutcomeSchema.extend({ episode_id: z.string() }).describe('the reset observation'),
  400: ErrorBodySchema.describe('bad reset data'),
  404: ErrorBodySchema.describe('unknown task or split'),
  502: ErrorBodySchema.describe('the deploy failed (a failure object says why)'),
  503: ErrorBodySchema.describe('no slot within the reset timeout (Retry-After set), or the server is shutting down'),
};
