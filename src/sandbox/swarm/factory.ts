/**
 * Builds the SwarmSandbox the server uses (--sandbox swarm): the engine must be a swarm manager,
 * and the server must run in a container on it, since overlays exist only inside containers.
 */
import Dockerode from 'dockerode';
import { detectOwnContainerId } from '../docker/own-container.js';
import type { SandboxLogger } from '../docker/logger.js';
import { listNodes } from './tasks.js';
import { SwarmSandbox } from './swarm-sandbox.js';

export interface SwarmSandboxFactoryOptions {
  instance: string;
  bundleName: string;
  registry: string | null;
  logger: SandboxLogger;
}

export async function createSwarmSandbox(o: SwarmSandboxFactoryOptions): Promise<{ sandbox: SwarmSandbox; attachedTo: string }> {
  const docker = new Dockerode();
  const own = await detectOwnContainerId(docker).catch(() => null);
  if (!own) {
    throw new Error(
      '--sandbox swarm: this process is not in a container the engine knows. The server reaches each env on its overlay network, ' +
        'which only containers can join: run it as a container on a manager node with the engine socket mounted (deploy/stack.yml)',
    );
  }
  if (!o.registry) {
    const nodes = await listNodes(docker).catch(() => []);
    if (nodes.length > 1) {
      o.logger.warn(
        { nodes: nodes.length },
        'no --registry: the env images exist on this manager only, so a task swarm places on another node fails with image_unavailable; pass --registry HOST:PORT',
      );
    }
  }
  const sandbox = new SwarmSandbox({ docker, instance: o.instance, bundleName: o.bundleName, attachContainer: own, registry: o.registry, logger: o.logger });
  return { sandbox, attachedTo: own };
}
