/** The Docker backend's episode network: an internal bridge on a subnet of the server's own pool (routed, for an env with an egress allowlist). */
import type Dockerode from 'dockerode';
import { isPoolOverlap, toSandboxError } from '../engine/errors.js';
import { resourceName, type Owner } from '../engine/labels.js';
import { createOwnedNetwork } from '../engine/networks.js';
import type { SandboxLogger } from '../engine/logger.js';
import type { Subnet, SubnetPool } from './subnet-pool.js';

export interface EpisodeNetwork {
  id: string;
  name: string;
  subnet: Subnet;
}

/**
 * An internal bridge (no route out, none to other episodes) on a subnet of our own pool. The
 * subnet stays held by the episode even when creation fails in a way that leaves doubt; whoever
 * cleans up the episode releases it once no network of the episode is left on the engine.
 */
export async function createEpisodeNetwork(
  docker: Dockerode,
  pool: SubnetPool,
  owner: Owner,
  log: SandboxLogger,
  opts: { hostless: boolean; routed?: boolean } = { hostless: false },
): Promise<EpisodeNetwork> {
  // Each refusal sets a subnet aside, so this ends: with a network, or with acquire() saying
  // that no subnet is left.
  for (;;) {
    const subnet = pool.acquire(owner.episode);
    const name = resourceName(owner.bundle, owner.env, owner.episode);
    try {
      const id = await createOwnedNetwork(docker, owner, name, {
        Driver: 'bridge',
        IPAM: { Driver: 'default', Config: [{ Subnet: subnet.cidr, Gateway: subnet.gateway }] },
        // An internal bridge still gives the host the gateway address, and the env a default
        // route to it: the env can reach every service listening on the host's addresses. When
        // the server reaches envs from a container attached to the network, the host needs no
        // address there, and without one the env can reach nothing but its own network.
        ...(opts.hostless ? { Options: { 'com.docker.network.bridge.inhibit_ipv4': 'true' } } : {}),
        // a routed bridge (an env with an egress allowlist): a way out, closed but for the
        // destinations the env's rules open before its container starts (egress-rules.ts)
        ...(opts.routed ? { Internal: false } : {}),
      });
      return { id, name, subnet };
    } catch (err) {
      if (isPoolOverlap(err)) {
        log.debug({ subnet: subnet.cidr, episode: owner.episode }, 'subnet used by another network on the engine; trying the next');
        pool.markForeign(owner.episode);
        continue;
      }
      throw toSandboxError(err, `creating the network of episode ${owner.episode} on ${subnet.cidr}`);
    }
  }
}
