/** GET /openapi.json lists exactly the routes fastify serves, and `openenv validate --url` passes. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Fastify from 'fastify';
import openapi from '../../src/plugins/openapi.js';
import { startProcessServer, type ProcessServer } from '../support/process-server.js';
import { http } from './http.js';
import { validateRunningEnvironment } from './openenv-validate.js';

/** fastify's `/episodes/:id` → OpenAPI's `/episodes/{id}` (a wildcard `*` → `{wildcard}`) */
function openapiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/\*/g, '{wildcard}');
}

/**
 * Every (method, path) in fastify's route table, read from `printRoutes({ commonPrefix: false })`,
 * a tree whose lines are `<indent>├── /segment (GET, HEAD)`; HEAD beside GET left out, as
 * OpenAPI documents the GET.
 */
export function routeTable(printed: string): Set<string> {
  const out = new Set<string>();
  const stack: string[] = [];
  for (const line of printed.split('\n')) {
    const m = /^(.*?)(?:├── |└── )(.*?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (!m) continue;
    const depth = [...m[1]!].length / 4;
    stack.length = depth;
    stack.push(m[2]!);
    const path = stack.join('');
    const methods = m[3] ? m[3].split(',').map((s) => s.trim()) : [];
    for (const method of methods) {
      if (method === 'HEAD' && methods.includes('GET')) continue;
      out.add(`${method} ${openapiPath(path)}`);
    }
  }
  return out;
}

describe('routeTable (the test oracle)', () => {
  it('reads nested routes and methods from a printRoutes tree', () => {
    const printed = [
      '└── /',
      '    ├── health (GET, HEAD)',
      '    ├── episodes (POST, GET, HEAD)',
      '    │   └── /',
      '    │       └── :id (GET, HEAD, DELETE)',
      '    │           └── /step (POST)',
      '    └── mcp (POST)',
    ].join('\n');
    expect([...routeTable(printed)].sort()).toEqual([
      'DELETE /episodes/{id}',
      'GET /episodes',
      'GET /episodes/{id}',
      'GET /health',
      'POST /episodes',
      'POST /episodes/{id}/step',
      'POST /mcp',
    ]);
  });
});

describe('the OpenAPI plugin', () => {
  it('documents a route that declares no schema, with its path parameters, and HEAD-only routes', async () => {
    const app = Fastify();
    await app.register(openapi, { title: 't', description: '', bearer: true });
    app.get('/console/:page', async () => 'page');
    app.route({ method: 'HEAD', url: '/ping', handler: async () => '' });
    await app.ready();
    const doc = (await app.inject({ url: '/openapi.json' })).json() as {
      paths: Record<string, Record<string, { parameters?: unknown[]; security?: unknown }>>;
    };
    await app.close();
    expect(Object.keys(doc.paths).sort()).toEqual(['/console/{page}', '/openapi.json', '/ping']);
    expect(Object.keys(doc.paths['/ping']!)).toEqual(['head']);
    expect(Object.keys(doc.paths['/console/{page}']!)).toEqual(['get']);
    expect(doc.paths['/console/{page}']!.get!.parameters).toEqual([{ name: 'page', in: 'path', required: true, schema: { type: 'string' } }]);
    expect(doc.paths['/console/{page}']!.get!.security).toEqual([{ bearer: [] }]);
  });
});

describe('GET /openapi.json', () => {
  let s: ProcessServer;
  beforeAll(async () => {
    s = await startProcessServer();
  });
  afterAll(async () => {
    // fails if an env process outlived the app
    await s?.stop();
  });

  it('lists exactly the served routes, version 1.0.0, no simulation-mode /reset /step /state', async () => {
    const r = await http(s.url, 'GET', '/openapi.json');
    expect(r.status).toBe(200);
    const doc = r.body;
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info).toMatchObject({ version: '1.0.0', title: 'fixture-v1' });
    const documented = new Set<string>();
    for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, { responses?: unknown; operationId?: string }>>)) {
      for (const [method, op] of Object.entries(ops)) {
        documented.add(`${method.toUpperCase()} ${path}`);
        expect(op.responses, `${method} ${path}`).toBeTypeOf('object');
        expect(op.operationId).toMatch(/^[a-z]+[A-Za-z0-9]*$/);
      }
    }
    const served = routeTable(s.app.printRoutes({ commonPrefix: false }));
    expect([...documented].sort()).toEqual([...served].sort());
    // what docs/protocol.md lists, so neither side can be empty or half
    for (const must of [
      'GET /health',
      'GET /metadata',
      'GET /schema',
      'GET /bundle',
      'GET /tasks',
      'GET /tasks/{task_id}',
      'GET /toolsets',
      'GET /ws',
      'GET /metrics',
      'POST /episodes',
      'GET /episodes',
      'GET /episodes/{id}',
      'DELETE /episodes/{id}',
      'POST /episodes/{id}/step',
      'POST /mcp',
      'GET /openapi.json',
    ]) {
      expect(documented.has(must), must).toBe(true);
    }
    for (const sim of ['/reset', '/step', '/state']) expect(doc.paths).not.toHaveProperty([sim]);
    // every operation id is unique
    const ids = Object.values(doc.paths as Record<string, Record<string, { operationId: string }>>).flatMap((ops) =>
      Object.values(ops).map((o) => o.operationId),
    );
    expect(new Set(ids).size).toBe(ids.length);
    // no token on this server: no security requirement
    expect(JSON.stringify(doc)).not.toContain('"security"');
  });

  it('`openenv validate --url` passes it as a production-mode server', async () => {
    const report = await validateRunningEnvironment(s.url);
    expect(report.criteria.filter((c) => !c.passed)).toEqual([]);
    expect(report).toMatchObject({ passed: true, mode: 'production', standard_version: '1.0.0' });
    expect(report.criteria.map((c) => c.id)).toEqual([
      'openapi_version_available',
      'health_endpoint',
      'metadata_endpoint',
      'schema_endpoint',
      'mcp_endpoint',
      'mode_endpoint_consistency',
    ]);
  });
});
