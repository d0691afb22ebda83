/** The Sandbox contract (test/sandbox/contract.ts) on the Docker backend, against a real engine. */
import { expect } from 'vitest';
import { DockerSandbox } from '../../../src/sandbox/docker/index.js';
import { LABELS } from '../../../src/sandbox/sandbox.js';
import { describeDocker, labelledContainersAsync, labelledResources, uniqueInstance } from '../../support/docker.js';
import { sandboxContract } from '../contract.js';
import { buildEcho } from './fixture.js';

const instance = uniqueInstance('contract');
const instanceLabel = `${LABELS.instance}=${instance}`;

sandboxContract('docker', {
  describe: describeDocker,
  make: () => new DockerSandbox({ instance, bundleName: 'fixture-v1' }),
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
