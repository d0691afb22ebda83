/**
 * Read-only routes: health, metadata, schema, bundle, tasks, toolsets. None of them deploys an
 * env. Each declares its shapes once, in its schema (validation, types, /openapi.json).
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { BaselinesSchema, GroupsSchema, taskRow, TaskRowSchema, ToolSpecSchema } from '../bundle/index.js';
import { NotFoundError } from '../errors.js';
import type { ZodTypeProvider } from '../plugins/zod-schemas.js';
import { ActionSchema } from '../protocol/frames.js';
import { toJsonSchema } from '../protocol/json-schema.js';
import { EpisodeStateSchema, ObservationSchema } from '../protocol/observations.js';
import { PoolStatusSchema } from '../protocol/pool.js';
import type { OpenEnvRuntime } from '../runtime.js';
import { ErrorBodySchema } from './shapes.js';

const TasksQuery = z
  .object({
    split: z.string().min(1).optional().describe('default: the default split'),
    offset: z.coerce.number().int().min(0).default(0),
    limit: z.coerce.number().int().min(1).max(1000).default(100),
  })
  .strict();

/** OpenEnv's EnvironmentMetadata */
const MetadataSchema = z.object({
  name: z.string(),
  description: z.string(),
  readme_content: z.string().nullable(),
  version: z.string().nullable(),
  author: z.string().nullable(),
  documentation_url: z.string().nullable(),
});

export async function infoRoutes(root: FastifyInstance, { runtime }: { runtime: OpenEnvRuntime }): Promise<void> {
  const app = root.withTypeProvider<ZodTypeProvider>();
  const { bundle, options: o } = runtime;
  const m = bundle.manifest;
  // the JSON Schemas /schema serves, made once from the zod schemas
  const schemas = { action: toJsonSchema(ActionSchema), observation: toJsonSchema(ObservationSchema), state: toJsonSchema(EpisodeStateSchema) };

  app.get(
    '/health',
    {
      // Docker's healthcheck polls it: its request lines would drown the episodes' (errors still show)
      logLevel: 'warn',
      schema: {
        summary: 'Health check (no auth)',
        response: {
          200: z.object({ status: z.literal('healthy'), pool: PoolStatusSchema.optional() }).describe('serving (pool: only with --warm-pool above 0)'),
          503: z
            .object({ status: z.literal('unhealthy'), reason: z.string(), pool: PoolStatusSchema.optional() })
            .describe('images still building, the engine unreachable, or draining'),
        },
      },
    },
    async (_req, reply) => {
      const why = await runtime.unhealthy();
      // a pool that stopped refilling leaves the server healthy (resets deploy their own envs): it shows here
      const pool = runtime.pool ? { pool: runtime.pool.status() } : {};
      if (why) return reply.code(503).send({ status: 'unhealthy', reason: why, ...pool });
      return { status: 'healthy' as const, ...pool };
    },
  );

  app.get('/metadata', { schema: { summary: "OpenEnv's EnvironmentMetadata", response: { 200: MetadataSchema.describe('metadata') } } }, async () => ({
    name: m.name,
    description: m.description ?? bundle.description,
    readme_content: bundle.readme || null,
    version: m.version ?? null,
    // OpenEnv's metadata has these; a bundle manifest does not declare them
    author: null,
    documentation_url: null,
  }));

  app.get(
    '/schema',
    {
      schema: {
        summary: 'JSON Schemas of the action, observation and state',
        response: {
          200: z.object({ action: z.object({}).passthrough(), observation: z.object({}).passthrough(), state: z.object({}).passthrough() }).describe('schemas'),
        },
      },
    },
    async () => schemas,
  );

  app.get(
    '/bundle',
    {
      schema: {
        summary: "The bundle: name, splits with their task counts, toolsets and the server's settings",
        response: {
          200: z
            .object({
              name: z.string(),
              version: z.string().optional(),
              description: z.string(),
              default_split: z.string(),
              splits: z.record(z.number().int()),
              toolsets: z.array(z.string()),
              groups: GroupsSchema.describe("bundle.json's task groups: group name → where in a task line its value is ({} when none)"),
              baselines: BaselinesSchema.describe("bundle.json's reference rewards: split → name → reward ({} when none)"),
              settings: z.record(z.unknown()),
            })
            .describe('the bundle'),
        },
      },
    },
    async () => ({
      name: m.name,
      version: m.version,
      description: m.description ?? bundle.description,
      default_split: m.default_split,
      splits: bundle.splitCounts,
      toolsets: Object.keys(m.toolsets),
      groups: m.groups,
      baselines: m.baselines,
      settings: {
        max_concurrent_envs: o.maxConcurrentEnvs,
        max_waiting: o.maxWaiting,
        reset_timeout_s: o.resetTimeout,
        tool_timeout_s: o.toolTimeout,
        idle_timeout_s: o.idleTimeout,
        episode_timeout_s: o.episodeTimeout,
        max_steps: o.maxSteps,
        reward: runtime.rewardName,
      },
    }),
  );

  app.get(
    '/tasks',
    {
      schema: {
        summary: 'A page of the task rows of a split',
        querystring: TasksQuery,
        response: {
          200: z.object({ split: z.string(), total: z.number().int(), offset: z.number().int(), tasks: z.array(TaskRowSchema) }).describe('a page of tasks'),
          400: ErrorBodySchema.describe('a bad query'),
          404: ErrorBodySchema.describe('unknown split'),
        },
      },
    },
    async (req) => {
      const q = req.query;
      const split = q.split ?? m.default_split;
      const tasks = bundle.splits[split];
      if (!tasks) throw new NotFoundError(`unknown split "${split}"; splits: ${Object.keys(bundle.splits).join(', ')}`);
      const page = tasks.slice(q.offset, q.offset + q.limit);
      return { split, total: tasks.length, offset: q.offset, tasks: page.map(taskRow) };
    },
  );

  app.get(
    '/tasks/:task_id',
    {
      schema: {
        summary: 'One task row',
        params: z.object({ task_id: z.string() }),
        response: { 200: TaskRowSchema.describe('the task'), 404: ErrorBodySchema.describe('unknown task') },
      },
    },
    async (req) => {
      const t = bundle.byId.get(req.params.task_id);
      if (!t) throw new NotFoundError(`unknown task_id "${req.params.task_id}"`);
      return taskRow(t);
    },
  );

  app.get(
    '/toolsets',
    {
      schema: {
        summary: 'Every toolset with its tools, end_turn included (no env is deployed)',
        response: { 200: z.object({ toolsets: z.record(z.array(ToolSpecSchema)) }).describe('toolsets') },
      },
    },
    async () => ({ toolsets: bundle.toolsets }),
  );
}
