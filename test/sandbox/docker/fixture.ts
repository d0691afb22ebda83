/** The fixture bundle's echo env as these tests deploy it. */
import { fileURLToPath } from 'node:url';
import type { EnvSpec } from '../../../src/sandbox/sandbox.js';
import type { DockerSandbox } from '../../../src/sandbox/docker/index.js';
import { TEST_BUILD_ARGS } from '../../support/docker.js';

export const FIXTURE_DIR = fileURLToPath(new URL('../../fixtures/fixture-v1/', import.meta.url));
export const ECHO_CONTEXT = `${FIXTURE_DIR}envs/echo`;

export function buildEcho(sandbox: DockerSandbox): Promise<string> {
  return sandbox.buildImage({ bundleName: 'fixture-v1', envName: 'echo', contextDir: ECHO_CONTEXT, buildArgs: TEST_BUILD_ARGS });
}

/** bundle.json's `echo` env, with overrides */
export function echoSpec(image: string, overrides: Partial<EnvSpec> = {}): EnvSpec {
  return {
    name: 'echo',
    image,
    port: 8000,
    readyPath: '/health',
    deployTimeoutMs: 30_000,
    resources: { memoryMb: 128, cpus: 0.5, pids: 64 },
    environment: {},
    ...overrides,
  };
}

export async function post(baseUrl: string, path: string, body: unknown): Promise<{ status: number; json: unknown }> {
  const res = await fetch(`${baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.status, json: await res.json() };
}
