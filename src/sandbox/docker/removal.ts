/**
 * Removing what a Docker sandbox owns (engine/owned.ts): one episode's (teardown), or everything
 * of a server instance (sweep at start, reconciler). Containers first (a network with an endpoint
 * cannot go), then networks.
 */
import type Dockerode from 'dockerode';
import { leaveAndRemoveNetwork } from '../engine/networks.js';
import type { ListEnvs, Owned, RemovalSettings, RemoveResult } from '../engine/owned.js';
import { retry } from '../engine/retry.js';
import { removeContainer } from './containers.js';

/** an instance's containers, stopped ones too, by label */
export function listContainers(docker: Dockerode): ListEnvs {
  return async (filters) => (await docker.listContainers({ all: true, filters })).map((c) => ({ id: c.Id, labels: c.Labels }));
}

export interface RemoveOptions extends RemovalSettings {
  /** called between the containers and the networks, when every container was removed (a network runs no env) */
  onEnvRemoved?: () => void;
}

/** Every removal is retried with backoff; one that still fails is reported. */
export async function removeOwned(docker: Dockerode, owned: Owned, opts: RemoveOptions): Promise<RemoveResult> {
  const result: RemoveResult = { removed: { envs: [], networks: [] }, failed: [] };
  const attempt = <T>(what: string, fn: () => Promise<T>) =>
    retry(fn, {
      attempts: opts.attempts,
      baseDelayMs: opts.baseDelayMs,
      onRetry: (err, n) => opts.log.debug({ err, attempt: n }, `retrying removal of ${what}`),
    });
  await Promise.all(
    owned.envs.map(async (c) => {
      try {
        await attempt(`container ${c.id.slice(0, 12)}`, () => removeContainer(docker, c.id));
        result.removed.envs.push(c);
      } catch (error) {
        result.failed.push({ ...c, kind: 'container', error });
      }
    }),
  );
  if (result.failed.length === 0) opts.onEnvRemoved?.();
  await Promise.all(
    owned.networks.map(async (n) => {
      try {
        await attempt(`network ${n.id.slice(0, 12)}`, () => leaveAndRemoveNetwork(docker, n.id, opts.attachContainer));
        result.removed.networks.push(n);
      } catch (error) {
        result.failed.push({ ...n, kind: 'network', error });
      }
    }),
  );
  return result;
}
