/** Response shapes several routes share. */
import { z } from 'zod';

/** Every HTTP error body: a stable code, a message a person can act on, and details by kind. */
export const ErrorBodySchema = z.object({ error: z.string(), message: z.string() }).passthrough();
