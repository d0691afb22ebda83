/**
 * `GET /openapi.json`: an OpenAPI 3.1 document of exactly the routes the server serves, taken
 * from fastify's own route registrations (an `onRoute` hook on the root instance), so a route
 * added anywhere shows up and a removed one disappears. `openenv validate --url` reads it: it
 * wants `info.version` and, for a production-mode server, no `/reset`, `/step` or `/state`.
 */
import type { FastifyInstance, FastifySchema, RouteOptions } from 'fastify';
import { isOpenPath } from '../plugins/auth.js';
import { ACTION_SCHEMA, OBSERVATION_SCHEMA, STATE_SCHEMA } from '../protocol/schemas.js';

export const OPENAPI_VERSION = '1.0.0';

declare module 'fastify' {
  /** what a route's `schema` may say for the document (the same fields @fastify/swagger reads) */
  interface FastifySchema {
    summary?: string;
    description?: string;
    hide?: boolean;
  }
}

export interface ServedRoute {
  method: string;
  /** fastify's path, e.g. /episodes/:id */
  url: string;
  websocket: boolean;
  /** the route's own schema, when it has one: the document is made from it */
  schema?: FastifySchema;
}

/**
 * Records every route registered from now on. Call it on the root instance before any route is
 * registered; `onRoute` hooks on the root see the routes of every plugin.
 */
export function collectRoutes(app: FastifyInstance): ServedRoute[] {
  const routes: ServedRoute[] = [];
  app.addHook('onRoute', (r: RouteOptions & { websocket?: boolean }) => {
    if (r.schema?.hide) return;
    const methods = Array.isArray(r.method) ? r.method : [r.method];
    for (const m of methods) routes.push({ method: m.toUpperCase(), url: r.url, websocket: Boolean(r.websocket), ...(r.schema ? { schema: r.schema } : {}) });
  });
  return routes;
}

/** fastify's `/episodes/:id` → OpenAPI's `/episodes/{id}` (a wildcard `*` → `{wildcard}`) */
export function openapiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/\*/g, '{wildcard}');
}

const json = (schema: object, description: string) => ({ description, content: { 'application/json': { schema } } });
const errorBody = {
  type: 'object',
  required: ['error', 'message'],
  properties: { error: { type: 'string' }, message: { type: 'string' } },
};
const err = (description: string) => json(errorBody, description);

const toolSpec = {
  type: 'object',
  required: ['name', 'description', 'input_schema'],
  properties: { name: { type: 'string' }, description: { type: 'string' }, input_schema: { type: 'object' } },
};
const taskRow = {
  type: 'object',
  required: ['task_id', 'split', 'index', 'toolset', 'messages', 'turns', 'max_turns'],
  properties: {
    task_id: { type: 'string' },
    split: { type: 'string' },
    index: { type: 'integer' },
    toolset: { type: 'string' },
    messages: { type: 'array', items: { type: 'object', properties: { role: { type: 'string' }, content: { type: 'string' } } } },
    turns: { type: 'integer' },
    max_turns: { type: 'integer' },
  },
};
const resetData = {
  type: 'object',
  description: 'reset data: a task by task_id, or split + index; neither: the default split, by seed or at random. Unknown fields are ignored.',
  properties: {
    task_id: { type: 'string' },
    split: { type: 'string' },
    index: { type: 'integer', minimum: 0 },
    seed: { type: 'integer', minimum: 0 },
    episode_id: { type: 'string', maxLength: 255, description: 'a client label, logged' },
    reset_timeout_s: { type: 'number', exclusiveMinimum: 0, description: 'wait at most this long for a slot (capped by the server)' },
  },
};
const stepReply = {
  type: 'object',
  required: ['observation', 'reward', 'done'],
  properties: { observation: OBSERVATION_SCHEMA, reward: { type: ['number', 'null'] }, done: { type: 'boolean' } },
};
const jsonRpcRequest = {
  type: 'object',
  required: ['method'],
  properties: {
    jsonrpc: { const: '2.0' },
    method: { enum: ['tools/list', 'tools/call', 'openenv/session/create', 'openenv/session/close'] },
    params: { type: 'object', description: 'tools/call: {session_id, name, arguments}; openenv/session/create: reset data; openenv/session/close: {session_id}' },
    id: { type: ['string', 'number', 'null'] },
  },
};
const jsonRpcResponse = {
  type: 'object',
  required: ['jsonrpc', 'id'],
  properties: {
    jsonrpc: { const: '2.0' },
    result: {},
    error: { type: 'object', required: ['code', 'message'], properties: { code: { type: 'integer' }, message: { type: 'string' }, data: { type: 'object' } } },
    id: { type: ['string', 'number', 'null'] },
  },
};
const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string' }, description: 'the episode_id' };

type Operation = Record<string, unknown>;

/** What each route of PROTOCOL.md §3–5 answers; a route not listed here still appears, described generically. */
const OPERATIONS: Record<string, Operation> = {
  'GET /health': {
    summary: 'Health check (no auth)',
    responses: {
      200: json({ type: 'object', properties: { status: { const: 'healthy' } } }, 'serving'),
      503: json({ type: 'object', properties: { status: { const: 'unhealthy' }, reason: { type: 'string' } } }, 'images still building, the engine unreachable, or draining'),
    },
  },
  'GET /metadata': {
    summary: "OpenEnv's EnvironmentMetadata",
    responses: {
      200: json(
        {
          type: 'object',
          required: ['name', 'description', 'readme_content', 'version', 'author', 'documentation_url'],
          properties: {
            name: { type: 'string' },
            description: { type: 'string' },
            readme_content: { type: ['string', 'null'] },
            version: { type: ['string', 'null'] },
            author: { type: ['string', 'null'] },
            documentation_url: { type: ['string', 'null'] },
          },
        },
        'metadata',
      ),
    },
  },
  'GET /schema': {
    summary: 'JSON Schemas of the action, observation and state',
    responses: { 200: json({ type: 'object', required: ['action', 'observation', 'state'], properties: { action: ACTION_SCHEMA, observation: OBSERVATION_SCHEMA, state: STATE_SCHEMA } }, 'schemas') },
  },
  'GET /bundle': {
    summary: "The bundle: name, splits with their task counts, toolsets and the server's settings",
    responses: {
      200: json(
        {
          type: 'object',
          properties: {
            name: { type: 'string' },
            version: { type: 'string' },
            description: { type: 'string' },
            default_split: { type: 'string' },
            splits: { type: 'object', additionalProperties: { type: 'integer' } },
            toolsets: { type: 'array', items: { type: 'string' } },
            settings: { type: 'object' },
          },
        },
        'the bundle',
      ),
    },
  },
  'GET /tasks': {
    summary: 'A page of the task rows of a split',
    parameters: [
      { name: 'split', in: 'query', schema: { type: 'string' }, description: 'default: the default split' },
      { name: 'offset', in: 'query', schema: { type: 'integer', minimum: 0, default: 0 } },
      { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 } },
    ],
    responses: {
      200: json({ type: 'object', properties: { split: { type: 'string' }, total: { type: 'integer' }, offset: { type: 'integer' }, tasks: { type: 'array', items: taskRow } } }, 'a page of tasks'),
      400: err('a bad query'),
      404: err('unknown split'),
    },
  },
  'GET /tasks/{task_id}': {
    summary: 'One task row',
    parameters: [{ name: 'task_id', in: 'path', required: true, schema: { type: 'string' } }],
    responses: { 200: json(taskRow, 'the task'), 404: err('unknown task') },
  },
  'GET /toolsets': {
    summary: 'Every toolset with its tools, end_turn included (no env is deployed)',
    responses: { 200: json({ type: 'object', properties: { toolsets: { type: 'object', additionalProperties: { type: 'array', items: toolSpec } } } }, 'toolsets') },
  },
  'GET /ws': {
    summary: 'WebSocket sessions (OpenEnv envelope: reset, step, state, close, mcp)',
    description: 'Upgrade to a WebSocket; one JSON text frame in, exactly one out. See PROTOCOL.md §4 and GET /schema.',
    responses: { 101: { description: 'switching protocols' }, 401: err('no or wrong token (before the upgrade)') },
  },
  'POST /episodes': {
    summary: 'Start an episode (held while it waits for a slot)',
    requestBody: { required: false, content: { 'application/json': { schema: resetData } } },
    responses: {
      201: json({ ...stepReply, required: ['episode_id', ...stepReply.required], properties: { episode_id: { type: 'string' }, ...stepReply.properties } }, 'the reset observation'),
      400: err('bad reset data'),
      404: err('unknown task or split'),
      502: err('the deploy failed (a failure object says why)'),
      503: { ...err('no slot within the reset timeout (Retry-After set), or the server is shutting down'), headers: { 'Retry-After': { schema: { type: 'integer' } } } },
    },
  },
  'GET /episodes': {
    summary: 'Live episodes of every transport, the queue and the capacity',
    responses: {
      200: json(
        {
          type: 'object',
          required: ['active', 'waiting', 'capacity'],
          properties: {
            active: {
              type: 'array',
              items: {
                type: 'object',
                properties: {
                  episode_id: { type: 'string' },
                  task_id: { type: 'string' },
                  phase: { enum: ['waiting', 'deploying', 'running', 'done'] },
                  transport: { enum: ['ws', 'http', 'mcp'] },
                  started_at: { type: 'string', format: 'date-time' },
                  steps: { type: 'integer' },
                  reward: { type: ['number', 'null'] },
                },
              },
            },
            waiting: { type: 'integer' },
            capacity: { type: 'integer' },
          },
        },
        'episodes',
      ),
    },
  },
  'GET /episodes/{id}': {
    summary: "An episode's state",
    parameters: [idParam],
    responses: { 200: json(STATE_SCHEMA, 'state'), 404: err('unknown episode') },
  },
  'DELETE /episodes/{id}': {
    summary: 'End an episode and tear it down',
    parameters: [idParam],
    responses: { 204: { description: 'torn down' }, 404: err('unknown episode') },
  },
  'POST /episodes/{id}/step': {
    summary: 'One action: list_tools or call_tool',
    parameters: [idParam],
    requestBody: { required: true, content: { 'application/json': { schema: ACTION_SCHEMA } } },
    responses: {
      200: json(stepReply, 'the observation'),
      400: err('a malformed action'),
      404: err('unknown episode'),
      409: err('the episode is not running yet, is done, or belongs to a WebSocket session'),
    },
  },
  'POST /mcp': {
    summary: 'MCP JSON-RPC 2.0: tools/list, tools/call, openenv/session/create, openenv/session/close',
    description: 'Always HTTP 200 (except auth); errors use JSON-RPC codes -32700, -32600, -32601, -32602, -32603 and -32000 (capacity, deploy, episode state).',
    requestBody: { required: true, content: { 'application/json': { schema: jsonRpcRequest } } },
    responses: { 200: json(jsonRpcResponse, 'a JSON-RPC response') },
  },
  'GET /metrics': {
    summary: 'Prometheus metrics',
    responses: { 200: { description: 'Prometheus text format', content: { 'text/plain': { schema: { type: 'string' } } } } },
  },
  'GET /openapi.json': {
    summary: 'This document',
    responses: { 200: json({ type: 'object' }, 'OpenAPI 3.1') },
  },
};

/** An operation from a route's fastify schema: summary, params and querystring, JSON responses. */
export function operationFromSchema(schema: FastifySchema, path: string): Operation {
  const parameters: Operation[] = [];
  for (const [where, s] of [['path', schema.params], ['query', schema.querystring]] as const) {
    const props = (s as { properties?: Record<string, { description?: string }>; required?: string[] } | undefined)?.properties ?? {};
    const required = new Set((s as { required?: string[] } | undefined)?.required ?? []);
    for (const [name, p] of Object.entries(props)) {
      const { description, ...rest } = p;
      const n = where === 'path' && name === '*' ? 'wildcard' : name;
      parameters.push({ name: n, in: where, required: where === 'path' || required.has(name), schema: rest, ...(description ? { description } : {}) });
    }
  }
  // path parameters the schema leaves out
  for (const m of path.matchAll(/\{([^}]+)\}/g)) {
    if (!parameters.some((p) => p.in === 'path' && p.name === m[1])) parameters.push({ name: m[1], in: 'path', required: true, schema: { type: 'string' } });
  }
  const responses: Record<string, unknown> = {};
  for (const [code, r] of Object.entries((schema.response ?? {}) as Record<string, Record<string, unknown>>)) {
    if (r.content) {
      responses[code] = { description: (r.description as string) ?? `HTTP ${code}`, content: r.content };
    } else {
      responses[code] = json(r, (r.description as string) ?? `HTTP ${code}`);
    }
  }
  return {
    summary: schema.summary ?? '',
    ...(schema.description ? { description: schema.description } : {}),
    ...(parameters.length ? { parameters } : {}),
    responses: Object.keys(responses).length ? responses : { default: { description: 'see the server documentation' } },
  };
}

export interface OpenApiInfo {
  title: string;
  description: string;
  /** whether requests need `Authorization: Bearer` */
  bearer: boolean;
}

export function openapiDocument(routes: readonly ServedRoute[], info: OpenApiInfo): Record<string, unknown> {
  const paths: Record<string, Record<string, Operation>> = {};
  // fastify serves HEAD beside every GET; OpenAPI documents the GET
  const documented = routes.filter((r) => !(r.method === 'HEAD' && routes.some((g) => g.method === 'GET' && g.url === r.url)));
  const usedIds = new Set<string>();
  const sorted = [...documented].sort((a, b) => a.url.localeCompare(b.url) || a.method.localeCompare(b.method));
  for (const r of sorted) {
    const path = openapiPath(r.url);
    const key = `${r.method} ${path}`;
    const known = OPERATIONS[key] ?? (r.schema ? operationFromSchema(r.schema, path) : undefined);
    const params = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'string' } }));
    const op: Operation = known
      ? { ...known }
      : { summary: `${r.method} ${path}`, ...(params.length ? { parameters: params } : {}), responses: { default: { description: 'see the server documentation' } } };
    const base = `${r.method.toLowerCase()}${path.replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''))}`;
    // `/web` and `/web/` read the same: keep ids unique
    let id = base;
    for (let n = 2; usedIds.has(id); n++) id = `${base}${n}`;
    usedIds.add(id);
    op.operationId = id;
    if (info.bearer && !isOpenPath(r.method, r.url)) op.security = [{ bearer: [] }];
    (paths[path] ??= {})[r.method.toLowerCase()] = op;
  }
  return {
    openapi: '3.1.0',
    info: { title: info.title, description: info.description, version: OPENAPI_VERSION },
    paths,
    components: info.bearer ? { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } } : {},
  };
}

export async function openapiRoutes(app: FastifyInstance, opts: { routes: readonly ServedRoute[]; info: OpenApiInfo }): Promise<void> {
  let doc: Record<string, unknown> | null = null;
  app.get('/openapi.json', async () => (doc ??= openapiDocument(opts.routes, opts.info)));
}
