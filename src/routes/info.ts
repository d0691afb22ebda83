/**
 * Read-only routes: health, metadata, schema, bundle, tasks, toolsets. None of them deploys an
 * env. Their shapes are src/protocol's (validation, types, /openapi.json).
 */
import type { FastifyInstance } from 'fastify';
import { taskRow } from '../bundle/index.js';
import { splitLanes } from '../config.js';
import { NotFoundError } from '../errors.js';
import type { ZodTypeProvider } from '../plugins/zod-schemas.js';
import { BundleInfoSchema, MetadataSchema, TaskParamsSchema, TaskRowSchema, TasksPageSchema, TasksQuerySchema, ToolsetsSchema } from '../protocol/bundle.js';
import { ActionSchema } from '../protocol/frames.js';
import { ErrorBodySchema } from '../protocol/http.js';
import { toJsonSchema } from '../protocol/json-schema.js';
import { EpisodeStateSchema, ObservationSchema } from '../protocol/observations.js';
import { HealthySchema, SchemasSchema, UnhealthySchema } from '../protocol/server.js';
import type { OpenEnvRuntime } from '../runtime.js';

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
        response: { 200: HealthySchema, 503: UnhealthySchema },
      },
    },
    async (_req, reply) => {
      const why = await runtime.unhealthy();
      // a pool that stopped refilling leaves the server healthy (resets deploy their own envs): it shows here
      const pool = runtime.pool ? { pool: runtime.pool.status() } : {};
      // "N of M env images ready" while not all are (they build in the background: docs/images.md)
      const imageStatus = runtime.catalog.status();
      const images = imageStatus ? { images: imageStatus } : {};
      if (why) return reply.code(503).send({ status: 'unhealthy', reason: why, ...pool, ...images });
      return { status: 'healthy' as const, ...pool, ...images };
    },
  );

  app.get('/metadata', { schema: { summary: "OpenEnv's EnvironmentMetadata", response: { 200: MetadataSchema } } }, async () => ({
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
        response: { 200: SchemasSchema },
      },
    },
    async () => schemas,
  );

  app.get(
    '/bundle',
    {
      schema: {
        summary: "The bundle: name, splits with their task counts, toolsets and the server's settings",
        response: { 200: BundleInfoSchema },
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
        split_priority: Object.fromEntries(splitLanes(o.splitPriority)),
        tool_timeout_s: o.toolTimeout,
        idle_timeout_s: o.idleTimeout,
        episode_timeout_s: o.episodeTimeout,
        max_steps: o.maxSteps ?? null,
        reward: runtime.rewardName,
        runtime: o.runtime,
      },
      envs: runtime.granted,
    }),
  );

  app.get(
    '/tasks',
    {
      schema: {
        summary: 'A page of the task rows of a split',
        querystring: TasksQuerySchema,
        response: {
          200: TasksPageSchema,
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
      return { split, total: tasks.length, offset: q.offset, tasks: page.map((t) => taskRow(t, m.harness)) };
    },
  );

  app.get(
    '/tasks/:task_id',
    {
      schema: {
        summary: 'One task row',
        params: TaskParamsSchema,
        response: { 200: TaskRowSchema.describe('the task'), 404: ErrorBodySchema.describe('unknown task') },
      },
    },
    async (req) => {
      const t = bundle.byId.get(req.params.task_id);
      if (!t) throw new NotFoundError(`unknown task_id "${req.params.task_id}"`);
      return taskRow(t, m.harness);
    },
  );

  app.get(
    '/toolsets',
    {
      schema: {
        summary: 'Every toolset with its tools, end_turn included (no env is deployed)',
        response: { 200: ToolsetsSchema },
      },
    },
    async () => ({ toolsets: bundle.toolsets }),
  );
}
