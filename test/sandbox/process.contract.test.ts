/** The Sandbox contract (test/sandbox/contract.ts) on the ProcessSandbox the fast layer runs on. */
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { ProcessSandbox } from '../support/process-sandbox.js';
import { sandboxContract } from './contract.js';

const ECHO_CONTEXT = fileURLToPath(new URL('../fixtures/fixture-v1/envs/echo', import.meta.url));

sandboxContract('process', {
  make: () => new ProcessSandbox(),
  image: (sb) => sb.images.build({ bundleName: 'fixture-v1', envName: 'echo', contextDir: ECHO_CONTEXT, buildArgs: {} }),
  nothingLeft: (sb) => {
    expect(sb.held()).toEqual([]);
    expect(sb.live()).toEqual([]);
    expect(sb.networksInUse()).toBe(0);
  },
  started: (sb, id) => sb.live().includes(id),
});
