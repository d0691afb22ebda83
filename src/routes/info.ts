/**
 * Read-only HTTP routes (PROTOCOL.md §3): health, metadata, schema, bundle, tasks, toolsets.
 * None of them deploys an env.
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { taskRow, type LoadedBundle } from '../bundle/index.js';
import { BadInputError, NotFoundError } from '../errors.js';
import { describeZod } from '../protocol/frames.js';
import { ACTION_SCHEMA, OBSERVATION_SCHEMA, STATE_SCHEMA } from '../protocol/schemas.js';

export interface InfoOptions {
  bundle: LoadedBundle;
  settings: Record<string, unknown>;
  /** null when healthy, else why not */
  unhealthy: () => Promise<string | null>;
}

const TasksQuery = z
  .object({
    split: z.string().min(1).optional(),
    offset: z.coerce.number().int().min(0).default(0),
    limit: z.coerce.number().int().min(1).max(1000).default(100),
  })
  .strict();

export async function infoRoutes(app: FastifyInstance, opts: InfoOptions): Promise<void> {
  const { bundle } = opts;
  const m = bundle.manifest;

  app.get('/health', async (_req, reply) => {
    const why = await opts.unhealthy();
    if (why) return reply.code(503).send({ status: 'unhealthy', reason: why });
    return { status: 'healthy' };
  });

  app.get('/metadata', async () => ({
    name: m.name,
    description: m.description ?? bundle.description,
    readme_content: bundle.readme || null,
    version: m.version ?? null,
    author: (m as { author?: string }).author ?? null,
    documentation_url: (m as { documentation_url?: string }).documentation_url ?? null,
  }));

  app.get('/schema', async () => ({ action: ACTION_SCHEMA, observation: OBSERVATION_SCHEMA, state: STATE_SCHEMA }));

  app.get('/bundle', async () => ({
    name: m.name,
    version: m.version,
    description: m.description ?? bundle.description,
    default_split: m.default_split,
    splits: bundle.splitCounts,
    toolsets: Object.keys(m.toolsets),
    settings: opts.settings,
  }));

  app.get('/tasks', async (req) => {
    const q = TasksQuery.safeParse(req.query);
    if (!q.success) throw new BadInputError('VALIDATION_ERROR', describeZod(q.error, 'query'));
    const split = q.data.split ?? m.default_split;
    const tasks = bundle.splits[split];
    if (!tasks) throw new NotFoundError(`unknown split "${split}"; splits: ${Object.keys(bundle.splits).join(', ')}`);
    const page = tasks.slice(q.data.offset, q.data.offset + q.data.limit);
    return { split, total: tasks.length, offset: q.data.offset, tasks: page.map(taskRow) };
  });

  app.get<{ Params: { task_id: string } }>('/tasks/:task_id', async (req) => {
    const t = bundle.byId.get(req.params.task_id);
    if (!t) throw new NotFoundError(`unknown task_id "${req.params.task_id}"`);
    return taskRow(t);
  });

  app.get('/toolsets', async () => ({ toolsets: bundle.toolsets }));
}
