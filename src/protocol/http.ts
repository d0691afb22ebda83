/** What every HTTP route may answer besides its own shapes, and the web console's asset path. */
import { z } from 'zod';

/** Every HTTP error body: a stable code, a message a person can act on, and details by kind. */
export const ErrorBodySchema = z.object({ error: z.string(), message: z.string() }).passthrough();
export type ErrorBody = z.infer<typeof ErrorBodySchema>;

/** GET /web/assets/{file} */
export const WebAssetParamsSchema = z.object({ file: z.string().describe('a file of the build, its name hashed') });
