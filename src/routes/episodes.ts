/**
 * Stateful HTTP (`/episodes`) for clients without WebSockets (curl, the web console): the same
 * episodes as `/ws`, held by request clients (src/sessions/request-episodes.ts).
 */
import type { FastifyInstance } from 'fastify';
import { NotFoundError, OwnedBySessionError } from '../errors.js';
import type { Episode } from '../episodes/episode.js';
import type { ZodTypeProvider } from '../plugins/zod-schemas.js';
import { EPISODE_START_RESPONSES, EPISODE_STEP_RESPONSES, EpisodeIdParamsSchema, EpisodeListSchema } from '../protocol/episodes.js';
import { ActionSchema, ResetDataSchema } from '../protocol/frames.js';
import { ErrorBodySchema } from '../protocol/http.js';
import { EpisodeStateSchema } from '../protocol/observations.js';
import type { OpenEnvRuntime } from '../runtime.js';
import { dropReply, withClientGone } from './client-gone.js';

export async function episodesRoutes(root: FastifyInstance, { runtime }: { runtime: OpenEnvRuntime }): Promise<void> {
  const app = root.withTypeProvider<ZodTypeProvider>();
  const { manager, admission } = runtime;
  const { requests } = runtime.sessions;

  /** a live episode of any transport, or an ended one a request client held */
  const find = (id: string): { ep: Episode; holder: 'request' | 'socket' } => {
    const found = requests.find(id);
    if (!found) throw new NotFoundError(`no episode "${id}": it never existed, or it ended and was torn down; GET /episodes lists the live ones`);
    return found;
  };

  app.post(
    '/episodes',
    {
      schema: {
        summary: 'Start an episode (held while it waits for a slot)',
        body: ResetDataSchema.optional(),
        response: EPISODE_START_RESPONSES,
      },
    },
    async (req, reply) => {
      const started = await withClientGone(reply, (gone) => requests.start(req.body ?? {}, 'http', gone));
      if (!started) return dropReply(reply);
      return reply.code(201).send({ episode_id: started.ep.id, ...started.out });
    },
  );

  app.post(
    '/episodes/:id/step',
    {
      schema: {
        summary: 'One action: list_tools or call_tool',
        params: EpisodeIdParamsSchema,
        body: ActionSchema,
        response: EPISODE_STEP_RESPONSES,
      },
    },
    async (req) => {
      const { ep, holder } = find(req.params.id);
      if (holder !== 'request') throw new OwnedBySessionError(ep.id);
      return requests.run(ep, () => ep.step(req.body));
    },
  );

  app.get(
    '/episodes/:id',
    {
      schema: {
        summary: "An episode's state",
        params: EpisodeIdParamsSchema,
        response: { 200: EpisodeStateSchema.describe('state'), 404: ErrorBodySchema.describe('unknown episode') },
      },
    },
    async (req) => {
      const { ep } = find(req.params.id);
      requests.touch(ep);
      return ep.state();
    },
  );

  app.delete(
    '/episodes/:id',
    {
      schema: {
        summary: 'End an episode and tear it down',
        params: EpisodeIdParamsSchema,
        response: { 204: { description: 'torn down' }, 404: ErrorBodySchema.describe('unknown episode') },
      },
    },
    async (req, reply) => {
      await requests.close(find(req.params.id).ep);
      return reply.code(204).send();
    },
  );

  app.get(
    '/episodes',
    { schema: { summary: 'Live episodes of every transport, the queue and the capacity', response: { 200: EpisodeListSchema } } },
    async () => ({
      // an ended episode stays in the manager until its env is torn down: it is not active
      active: manager
        .list()
        .filter((ep) => ep.phase !== 'done')
        .map((ep) => ({
          episode_id: ep.id,
          task_id: ep.task.task_id,
          phase: ep.phase,
          transport: ep.transport,
          started_at: new Date(ep.createdAt).toISOString(),
          steps: ep.steps,
          reward: ep.reward,
        })),
      waiting: admission.waitingCount,
      capacity: admission.capacity,
    }),
  );
}
