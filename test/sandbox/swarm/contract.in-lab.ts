/**
 * The Sandbox contract (test/sandbox/contract.ts) on the swarm backend, run where a swarm server
 * runs: in a container on the lab's manager n1, its socket mounted, joining each episode's overlay
 * from there (an overlay exists only inside containers). contract.docker.test.ts starts this run
 * (with in-lab.vitest.config.ts) and reads its report; it is not a test file of the outer run.
 */
import { fileURLToPath } from 'node:url';
import Dockerode from 'dockerode';
import { expect } from 'vitest';
import { detectOwnContainerId } from '../../../src/sandbox/engine/own-container.js';
import { LABELS } from '../../../src/sandbox/sandbox.js';
import { SwarmSandbox } from '../../../src/sandbox/swarm/swarm-sandbox.js';
import { sandboxContract } from '../contract.js';

const ECHO_CONTEXT = fileURLToPath(new URL('../../fixtures/fixture-v1/envs/echo', import.meta.url));

const instance = process.env.OPENENV_CONTRACT_INSTANCE;
const registry = process.env.OPENENV_CONTRACT_REGISTRY;
const nodeImage = process.env.OPENENV_CONTRACT_NODE_IMAGE;
if (!instance || !registry || !nodeImage) throw new Error('run by contract.docker.test.ts, which sets OPENENV_CONTRACT_INSTANCE, _REGISTRY and _NODE_IMAGE');

const docker = new Dockerode();
const own = await detectOwnContainerId(docker);
if (!own) throw new Error('not in a container the manager knows: the swarm sandbox reaches envs only from one');
const mine = JSON.stringify({ label: [`${LABELS.instance}=${instance}`] });

sandboxContract('swarm', {
  make: () => new SwarmSandbox({ docker, instance, bundleName: 'fixture-v1', attachContainer: own, registry }),
  image: (sb) => sb.images.build({ bundleName: 'fixture-v1', envName: 'echo', contextDir: ECHO_CONTEXT, buildArgs: { NODE_IMAGE: nodeImage } }),
  nothingLeft: async (sb) => {
    // no service, no overlay, and no env container still running on the node (the removal waits for its task to stop)
    expect((await docker.listServices({ filters: mine })).map((s) => s.ID)).toEqual([]);
    expect((await docker.listNetworks({ filters: mine })).map((n) => n.Name)).toEqual([]);
    expect((await docker.listContainers({ filters: mine })).map((c) => c.Names)).toEqual([]);
    expect(sb.networksInUse()).toBe(0);
  },
  started: async (_sb, id) => {
    const running = await docker.listContainers({ filters: JSON.stringify({ label: [`${LABELS.instance}=${instance}`, `${LABELS.episode}=${id}`] }) });
    return running.length > 0;
  },
  // a task is scheduled, its node prepares and starts it, before the env's process runs
  startMs: 10_000,
  // the manager lists an overlay whose removal it accepted a moment longer (its copy on the node
  // the server's container left): what the reconciler sees for that long
  settleMs: 5_000,
});
