/**
 * Builds the SwarmSandbox the server uses (--sandbox swarm): the engine must be a swarm manager,
 * and the server must run in a container on it, since overlays exist only inside containers.
 */
import Dockerode from 'dockerode';
import { detectOwnContainerId } from '../engine/own-container.js';
import type { LayerDefaults } from '../lockdown.js';
import type { SandboxLogger } from '../engine/logger.js';
import type { EnvRuntime } from '../sandbox.js';
import { listNodes } from './tasks.js';
import { SwarmSandbox } from './swarm-sandbox.js';

export interface SwarmSandboxFactoryOptions {
  instance: string;
  bundleName: string;
  registry: string | null;
  /** other nodes' engines the server asks what only a node can tell (--swarm-node-engine) */
  nodeEngines?: readonly string[];
  /** overlays made (and joined) ahead of demand */
  networkStock: number;
  /** what envs run under: on swarm, the nodes' default-runtime (checked at start) */
  runtime?: EnvRuntime;
  /** the bounds of an env's writable layer where its bundle sets none (--default-storage-mb, --default-max-files) */
  layerDefaults?: LayerDefaults;
  /** the static busybox the server runs in env containers (--toolbox) */
  toolbox?: string;
  logger: SandboxLogger;
}

export async function createSwarmSandbox(o: SwarmSandboxFactoryOptions): Promise<{ sandbox: SwarmSandbox; attachedTo: string }> {
  const docker = new Dockerode();
  const own = await detectOwnContainerId(docker).catch(() => null);
  if (!own) {
    throw new Error(
      '--sandbox swarm: this process is not in a container the engine knows. The server reaches each env on its overlay network, ' +
        'which only containers can join: run it as a container on a manager node with the engine socket mounted (deploy/swarm-manager.sh)',
    );
  }
  const labels = await docker
    .getContainer(own)
    .inspect()
    .then((c) => c.Config.Labels ?? {})
    .catch(() => ({}));
  const refusal = swarmTaskRefusal(labels);
  if (refusal) throw new Error(refusal);
  if (!o.registry) {
    const nodes = await listNodes(docker).catch(() => []);
    if (nodes.length > 1) {
      o.logger.warn(
        { nodes: nodes.length },
        'no --registry: the env images exist on this manager only, so a task swarm places on another node fails with image_unavailable; pass --registry HOST:PORT',
      );
    }
  }
  const sandbox = new SwarmSandbox({
    docker,
    instance: o.instance,
    bundleName: o.bundleName,
    attachContainer: own,
    registry: o.registry,
    nodeEngines: o.nodeEngines,
    networkStock: o.networkStock,
    runtime: o.runtime,
    ...(o.layerDefaults ? { layerDefaults: o.layerDefaults } : {}),
    ...(o.toolbox !== undefined ? { toolbox: o.toolbox } : {}),
    logger: o.logger,
  });
  return { sandbox, attachedTo: own };
}

/**
 * The server cannot be a swarm service's task: the engine connects a swarm-managed container only
 * to networks its node already has, and never through the attachment an attachable overlay needs
 * (moby's findAndAttachNetwork: "network … not found", HTTP 404), so every reset would fail. It
 * must be a plain container on a manager. Null when the labels are not a swarm task's.
 */
export function swarmTaskRefusal(labels: Record<string, string>): string | null {
  const task = labels['com.docker.swarm.task.id'];
  if (!task) return null;
  const service = labels['com.docker.swarm.service.name'] ?? labels['com.docker.swarm.service.id'] ?? 'a service';
  return (
    `--sandbox swarm: this server runs as task ${task.slice(0, 12)} of the swarm service ${service}, and Docker never connects ` +
    'a swarm-managed container to an attachable overlay it has not placed itself, so the server could not reach any env. ' +
    'Run it as a plain container on a manager node (docker run, restart policy unless-stopped; deploy/swarm-manager.sh), not as a service or stack'
  );
}
