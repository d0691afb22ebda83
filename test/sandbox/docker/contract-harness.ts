/**
 * The Sandbox contract (test/sandbox/contract.ts) on a Docker sandbox of the fixture bundle,
 * against a real engine: one harness for every runtime its envs may run under.
 */
import { expect } from 'vitest';
import { DockerSandbox } from '../../../src/sandbox/docker/index.js';
import { LABELS, type EnvRuntime } from '../../../src/sandbox/sandbox.js';
import { describeDocker, labelledContainersAsync, labelledResources, uniqueInstance } from '../../support/docker.js';
import { sandboxContract } from '../contract.js';
import { buildEcho } from './fixture.js';

export function dockerSandboxContract(name: string, opts: { runtime?: EnvRuntime; oomMayBeUnseen?: boolean } = {}): void {
  const instance = uniqueInstance(opts.runtime === 'runsc' ? 'contract-gvisor' : 'contract');
  const instanceLabel = `${LABELS.instance}=${instance}`;
  sandboxContract(name, {
    describe: describeDocker,
    ...(opts.oomMayBeUnseen ? { oomMayBeUnseen: true } : {}),
    make: () => new DockerSandbox({ instance, bundleName: 'fixture-v1', ...(opts.runtime ? { runtime: opts.runtime } : {}) }),
    image: (sb) => buildEcho(sb),
    nothingLeft: (sb) => {
      expect(labelledResources(instanceLabel)).toEqual({ containers: [], networks: [] });
      expect(sb.networksInUse()).toBe(0);
    },
    started: async (_sb, id) => {
      const [mine, its] = await Promise.all([labelledContainersAsync(instanceLabel), labelledContainersAsync(`${LABELS.episode}=${id}`)]);
      return its.some((c) => mine.includes(c));
    },
  });
}
