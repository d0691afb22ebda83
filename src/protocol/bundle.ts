/**
 * What a bundle is served as: a tool, a task row, and the routes that read the bundle (/bundle,
 * /tasks, /tasks/{task_id}, /toolsets, /metadata). bundle.json's own schema (src/bundle/schema.ts)
 * uses ToolSpecSchema for its toolsets; its task groups and baselines are validated there, more
 * strictly than a reader needs, and read here as plain maps.
 */
import { z } from 'zod';
import { isPlainObject } from '../util/json.js';

/** What model APIs accept as a function name (OpenAI, Anthropic: ^[a-zA-Z0-9_-]{1,64}$). */
const TOOL_NAME_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * A JSON object, kept as the very object JSON.parse made: no copy, and no key-by-key
 * reassignment that would turn an own `__proto__` key into a prototype. `got` lets bundle errors
 * show the value they refused.
 */
const jsonObject = z.custom<Record<string, unknown>>(isPlainObject, { message: 'expected a JSON object', params: { got: true } });

/** A tool as served by /toolsets and in reset observations, and as bundle.json declares it. */
export const ToolSpecSchema = z
  .object({
    name: z.string().refine((n) => TOOL_NAME_PATTERN.test(n), {
      message: `expected a tool name matching ${TOOL_NAME_PATTERN.source}`,
      params: { got: true },
    }),
    description: z.string().min(1, 'expected a non-empty description of what the tool does'),
    input_schema: jsonObject.describe('JSON Schema of the arguments'),
  })
  .strict('unknown field; the fields here are name, description, input_schema');
export type ToolSpec = z.infer<typeof ToolSpecSchema>;

/** A task as served by /tasks: what a trainer needs to write a prompt row, without the env's data. */
export const TaskRowSchema = z
  .object({
    task_id: z.string(),
    split: z.string(),
    index: z.number().int().nonnegative(),
    toolset: z.string(),
    messages: z.tuple([
      z.object({ role: z.literal('system'), content: z.string() }).strict(),
      z.object({ role: z.literal('user'), content: z.string() }).strict(),
    ]),
    turns: z.number().int().min(1),
    max_turns: z.number().int().min(1),
    groups: z.record(z.string()).describe("group name → this task's value (bundle.json's groups; {} when none)"),
    harness: z
      .literal(true)
      .optional()
      .describe(
        "a harness episode (docs/gateway.md): the server runs the task's harness, which gets the first user message as its instruction; the client's one tool is wait. Absent: an ordinary task",
      ),
  })
  .strict();
export type TaskRow = z.infer<typeof TaskRowSchema>;

// ---- GET /bundle ---------------------------------------------------------------------------

/** What an env runs with: the lock-down every env gets plus what its bundle asked for by name (docs/security.md). */
export const EnvGrantSchema = z
  .object({
    capabilities: z.array(z.string()).describe('the Linux capabilities the env keeps (all others dropped)'),
    added: z.array(z.string()).describe('of those, the ones added to the default set because the bundle asked'),
    no_new_privileges: z.boolean(),
    init: z.boolean().describe('an init process as PID 1 reaps zombies'),
    root: z.enum(['writable', 'read-only']),
    tmp_mb: z.number().nullable().describe('the tmpfs at /tmp when the root is read-only'),
    user: z.string().nullable().describe("the user the env runs as (null: the image's)"),
    runtime: z.enum(['runc', 'runsc']),
    memory_mb: z.number(),
    cpus: z.number(),
    pids: z.number(),
    nofile: z.number().describe('open files at most'),
    storage_mb: z.number().nullable().describe('what the env may write to its writable layer, MB (null: unbounded)'),
    max_files: z.number().nullable().describe('entries (files, directories) the env may create, change or delete in its writable layer (null: unbounded)'),
    not_enforced: z.array(z.string()).describe('what this engine cannot enforce, each with why'),
  })
  .describe("an env's lock-down");
export type EnvGrant = z.infer<typeof EnvGrantSchema>;

export const BundleInfoSchema = z
  .object({
    name: z.string(),
    version: z.string().optional(),
    description: z.string(),
    default_split: z.string(),
    splits: z.record(z.number().int().min(0)).describe('split → its task count'),
    toolsets: z.array(z.string()),
    // a server from before task groups and baselines sends neither: a reader takes {}
    groups: z.record(z.string()).default({}).describe("bundle.json's task groups: group name → where in a task line its value is ({} when none)"),
    baselines: z.record(z.record(z.number())).default({}).describe("bundle.json's reference rewards: split → name → reward ({} when none)"),
    settings: z.record(z.unknown()).describe("the server's settings: caps, timeouts, the reward rule"),
    // a server from before the lock-down, or one whose sandbox sets none, sends none
    envs: z.record(EnvGrantSchema).default({}).describe('env name → what it runs with, once the server is ready ({} before)'),
  })
  .describe('the bundle');
export type BundleInfo = z.infer<typeof BundleInfoSchema>;

// ---- GET /tasks, /tasks/{task_id} ----------------------------------------------------------

export const TasksQuerySchema = z
  .object({
    split: z.string().min(1).optional().describe('default: the default split'),
    offset: z.coerce.number().int().min(0).default(0),
    limit: z.coerce.number().int().min(1).max(1000).default(100),
  })
  .strict();

export const TasksPageSchema = z
  .object({ split: z.string(), total: z.number().int().min(0), offset: z.number().int().min(0), tasks: z.array(TaskRowSchema) })
  .describe('a page of tasks');
export type TasksPage = z.infer<typeof TasksPageSchema>;

export const TaskParamsSchema = z.object({ task_id: z.string() });

// ---- GET /toolsets -------------------------------------------------------------------------

export const ToolsetsSchema = z.object({ toolsets: z.record(z.array(ToolSpecSchema)) }).describe('toolsets');
export type Toolsets = z.infer<typeof ToolsetsSchema>;

// ---- GET /metadata -------------------------------------------------------------------------

/** OpenEnv's EnvironmentMetadata */
export const MetadataSchema = z
  .object({
    name: z.string(),
    description: z.string(),
    readme_content: z.string().nullable(),
    version: z.string().nullable(),
    author: z.string().nullable(),
    documentation_url: z.string().nullable(),
  })
  .describe('metadata');
