/** Attaching to and removing engine networks, the same for a bridge and a swarm overlay. */
import type Dockerode from 'dockerode';
import { engineMessage, isNotFound, toSandboxError } from './errors.js';

export async function connectToNetwork(docker: Dockerode, networkId: string, containerId: string): Promise<void> {
  try {
    await docker.getNetwork(networkId).connect({ Container: containerId });
  } catch (err) {
    throw toSandboxError(err, `connecting the server's container ${containerId.slice(0, 12)} to an episode network`);
  }
}

/** already disconnected, or container or network gone: all fine */
export async function disconnectFromNetwork(docker: Dockerode, networkId: string, containerId: string): Promise<void> {
  try {
    await docker.getNetwork(networkId).disconnect({ Container: containerId, Force: true });
  } catch (err) {
    if (isNotFound(err) || /is not connected|not found|no such/i.test(engineMessage(err))) return;
    throw err;
  }
}

/** resolves once the network is gone; a 404 means someone else already removed it */
export async function removeNetwork(docker: Dockerode, networkId: string): Promise<void> {
  try {
    await docker.getNetwork(networkId).remove();
  } catch (err) {
    if (isNotFound(err)) return;
    throw err;
  }
}
