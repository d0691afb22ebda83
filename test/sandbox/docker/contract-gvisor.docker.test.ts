/**
 * The Sandbox contract (test/sandbox/contract.ts) on the Docker backend with every env under
 * gVisor (`runtime: 'runsc'`, the server's `--runtime runsc`), against a real engine with runsc
 * registered (deploy/register-runsc.sh, as CI does).
 */
import { expect } from 'vitest';
import { DockerSandbox } from '../../../src/sandbox/docker/index.js';
import { LABELS } from '../../../src/sandbox/sandbox.js';
import { describeDocker, labelledContainersAsync, labelledResources, uniqueInstance } from '../../support/docker.js';
import { sandboxContract } from '../contract.js';
import { buildEcho } from './fixture.js';

const instance = uniqueInstance('contract-gvisor');
const instanceLabel = `${LABELS.instance}=${instance}`;

sandboxContract('docker under gVisor', {
  describe: describeDocker,
  oomMayBeUnseen: true,
  make: () => new DockerSandbox({ instance, bundleName: 'fixture-v1', runtime: 'runsc' }),
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
