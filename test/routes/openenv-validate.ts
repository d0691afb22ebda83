/**
 * The criteria of `openenv validate --url` (OpenEnv's validate_running_environment, read from
 * its source): the same requests, without headers, and the same pass rules. PyPI is out of reach
 * here, so the tests run this port instead of the Python CLI.
 */
export interface Criterion {
  id: string;
  passed: boolean;
  actual?: unknown;
}

export interface ValidationReport {
  passed: boolean;
  mode: 'production' | 'simulation' | 'unknown';
  standard_version: string;
  criteria: Criterion[];
}

async function getJson(url: string, init?: RequestInit): Promise<{ status: number; body: unknown }> {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(5000) });
  const text = await res.text();
  try {
    return { status: res.status, body: JSON.parse(text) };
  } catch {
    return { status: res.status, body: undefined };
  }
}

const isDict = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export async function validateRunningEnvironment(baseUrl: string): Promise<ValidationReport> {
  const base = (baseUrl.includes('://') ? baseUrl : `http://${baseUrl}`).replace(/\/+$/, '');
  const criteria: Criterion[] = [];
  let paths: Record<string, unknown> = {};
  let version = 'unknown';

  const openapi = await getJson(`${base}/openapi.json`);
  const info = isDict(openapi.body) ? openapi.body.info : undefined;
  const openapiOk = openapi.status === 200 && isDict(info) && typeof info.version === 'string';
  if (openapiOk) {
    version = String((info as { version: string }).version);
    const p = (openapi.body as { paths?: unknown }).paths;
    paths = isDict(p) ? p : {};
  }
  criteria.push({ id: 'openapi_version_available', passed: openapiOk, actual: { status_code: openapi.status, version } });

  const health = await getJson(`${base}/health`);
  criteria.push({ id: 'health_endpoint', passed: health.status === 200 && isDict(health.body) && health.body.status === 'healthy', actual: health });

  const meta = await getJson(`${base}/metadata`);
  criteria.push({
    id: 'metadata_endpoint',
    passed: meta.status === 200 && isDict(meta.body) && typeof meta.body.name === 'string' && typeof meta.body.description === 'string',
    actual: meta,
  });

  const schema = await getJson(`${base}/schema`);
  criteria.push({
    id: 'schema_endpoint',
    passed: schema.status === 200 && isDict(schema.body) && isDict(schema.body.action) && isDict(schema.body.observation) && isDict(schema.body.state),
    actual: { status_code: schema.status },
  });

  const mcp = await getJson(`${base}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  criteria.push({ id: 'mcp_endpoint', passed: mcp.status === 200 && isDict(mcp.body) && mcp.body.jsonrpc === '2.0', actual: mcp });

  let mode: ValidationReport['mode'] = 'unknown';
  if (Object.keys(paths).length > 0) {
    const has = (p: string) => p in paths;
    if (has('/reset')) {
      mode = 'simulation';
      criteria.push({ id: 'mode_endpoint_consistency', passed: has('/step') && has('/state') });
    } else {
      mode = 'production';
      criteria.push({ id: 'mode_endpoint_consistency', passed: !has('/step') && !has('/state') });
    }
  } else {
    criteria.push({ id: 'mode_endpoint_consistency', passed: false, actual: 'no OpenAPI paths' });
  }
  return { passed: criteria.every((c) => c.passed), mode, standard_version: version, criteria };
}
