/**
 * Finding and removing labelled resources: one episode's (teardown), or everything of a server
 * instance (sweep at start, reconciler). Found by label rather than remembered ids, so a resource
 * whose creation was interrupted, or that a killed process left behind, is found all the same.
 */
import type Dockerode from 'dockerode';
import { LABELS } from '../sandbox.js';
import { removeContainer } from './containers.js';
import { labelFilters } from '../engine/labels.js';
import { disconnectFromNetwork, removeNetwork } from '../engine/networks.js';
import type { SandboxLogger } from '../engine/logger.js';
import { retry } from '../engine/retry.js';

export interface Labelled {
  id: string;
  episode: string;
}

export interface Owned {
  containers: Labelled[];
  networks: Labelled[];
}

export async function listOwned(docker: Dockerode, instance: string, episode?: string): Promise<Owned> {
  const filters = JSON.stringify(labelFilters(instance, episode));
  const [containers, networks] = await Promise.all([docker.listContainers({ all: true, filters }), docker.listNetworks({ filters })]);
  return {
    containers: containers.map((c) => ({ id: c.Id, episode: c.Labels?.[LABELS.episode] ?? '' })),
    networks: networks.map((n) => ({ id: n.Id, episode: n.Labels?.[LABELS.episode] ?? '' })),
  };
}

export interface RemoveOptions {
  /** the server's own container, disconnected from each network before it is removed */
  attachContainer: string | null;
  attempts: number;
  baseDelayMs: number;
  signal?: AbortSignal;
  log: SandboxLogger;
  /** called between the containers and the networks, when every container was removed */
  onContainersRemoved?: () => void;
}

export interface RemoveResult {
  removed: Owned;
  /** what could not be removed after every retry, with the last error */
  failed: Array<Labelled & { kind: 'container' | 'network'; error: unknown }>;
}

/**
 * Containers first (a network with an endpoint cannot go), then networks. Every removal is retried
 * with backoff; one that still fails is reported, never silently dropped.
 */
export async function removeOwned(docker: Dockerode, owned: Owned, opts: RemoveOptions): Promise<RemoveResult> {
  const result: RemoveResult = { removed: { containers: [], networks: [] }, failed: [] };
  const attempt = <T>(what: string, fn: () => Promise<T>) =>
    retry(fn, {
      attempts: opts.attempts,
      baseDelayMs: opts.baseDelayMs,
      signal: opts.signal,
      onRetry: (err, n) => opts.log.debug({ err, attempt: n }, `retrying removal of ${what}`),
    });
  await Promise.all(
    owned.containers.map(async (c) => {
      try {
        await attempt(`container ${c.id.slice(0, 12)}`, () => removeContainer(docker, c.id));
        result.removed.containers.push(c);
      } catch (error) {
        result.failed.push({ ...c, kind: 'container', error });
      }
    }),
  );
  if (result.failed.length === 0) opts.onContainersRemoved?.();
  await Promise.all(
    owned.networks.map(async (n) => {
      try {
        await attempt(`network ${n.id.slice(0, 12)}`, async () => {
          if (opts.attachContainer) await disconnectFromNetwork(docker, n.id, opts.attachContainer);
          await removeNetwork(docker, n.id);
        });
        result.removed.networks.push(n);
      } catch (error) {
        result.failed.push({ ...n, kind: 'network', error });
      }
    }),
  );
  return result;
}
