/** The fixture bundle's echo env as these tests deploy it. */
import { fileURLToPath } from 'node:url';
import type { DockerSandbox } from '../../../src/sandbox/docker/index.js';
import { TEST_BUILD_ARGS } from '../../support/docker.js';

export const FIXTURE_DIR = fileURLToPath(new URL('../../fixtures/fixture-v1/', import.meta.url));
export const ECHO_CONTEXT = `${FIXTURE_DIR}envs/echo`;

export function buildEcho(sandbox: DockerSandbox): Promise<string> {
  return sandbox.images.build({ bundleName: 'fixture-v1', envName: 'echo', contextDir: ECHO_CONTEXT, buildArgs: TEST_BUILD_ARGS });
}

export { echoSpec, post } from '../contract.js';
