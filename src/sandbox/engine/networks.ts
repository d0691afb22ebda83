/** Making, joining and removing engine networks, the same for a bridge and a swarm overlay. */
import type Dockerode from 'dockerode';
import { engineMessage, isNotFound, removeOrGone, toSandboxError } from './errors.js';
import { ownerLabels, type Owner } from './labels.js';

/**
 * An internal network (no route out) labelled with its owner from the moment it exists, with the
 * backend's own settings (driver, addresses, options); resolves with its id. Errors as the engine
 * threw them: each backend knows which of them it can act on.
 */
export async function createOwnedNetwork(
  docker: Dockerode,
  owner: Owner,
  name: string,
  settings: Pick<Dockerode.NetworkCreateOptions, 'Driver' | 'Attachable' | 'IPAM' | 'Options'>,
): Promise<string> {
  const network = await docker.createNetwork({ Name: name, Internal: true, CheckDuplicate: true, Labels: ownerLabels(owner), ...settings });
  return network.id;
}

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

/** the server's container leaves the network (when it joined one), then the network goes; gone already is done */
export async function leaveAndRemoveNetwork(docker: Dockerode, networkId: string, attachContainer: string | null): Promise<void> {
  if (attachContainer) await disconnectFromNetwork(docker, networkId, attachContainer);
  await removeOrGone(() => docker.getNetwork(networkId).remove());
}
