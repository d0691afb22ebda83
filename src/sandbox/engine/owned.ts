/**
 * What a sandbox has on the engine, found by label rather than by remembered ids, so a resource
 * whose creation was interrupted, or that a killed process left behind, is found all the same:
 * an instance's (or one episode's) envs (containers on Docker, services on swarm) and networks.
 */
import type Dockerode from 'dockerode';
import { LABELS } from '../sandbox.js';
import { labelFilters } from './labels.js';
import type { SandboxLogger } from './logger.js';

export interface Labelled {
  id: string;
  /** its episode label: an episode id, or a network stock key */
  episode: string;
}

export interface Owned {
  /** what runs the envs: containers (Docker), services (swarm) */
  envs: Labelled[];
  networks: Labelled[];
}

export interface RemovalFailure extends Labelled {
  kind: 'container' | 'service' | 'network';
  /** the last error, after every retry */
  error: unknown;
}

export interface RemoveResult {
  removed: Owned;
  /** what could not be removed after every retry: reported, never silently dropped */
  failed: RemovalFailure[];
}

/** how a backend removes what it owns: every removal retried with a doubling backoff */
export interface RemovalSettings {
  /** the server's own container, disconnected from each network before the network is removed */
  attachContainer: string | null;
  attempts: number;
  /** the first backoff delay */
  baseDelayMs: number;
  log: SandboxLogger;
}

/** an env listing by label: the backend's own call (containers, services), with each one's labels */
export type ListEnvs = (filters: string) => Promise<Array<{ id: string; labels?: Record<string, string> }>>;

export async function listOwned(docker: Dockerode, listEnvs: ListEnvs, instance: string, episode?: string): Promise<Owned> {
  const filters = JSON.stringify(labelFilters(instance, episode));
  const [envs, networks] = await Promise.all([listEnvs(filters), docker.listNetworks({ filters })]);
  return {
    envs: envs.map((e) => ({ id: e.id, episode: e.labels?.[LABELS.episode] ?? '' })),
    // a swarm manager lists swarm-scoped overlays too: only ours carry the labels
    networks: networks.map((n) => ({ id: n.Id, episode: n.Labels?.[LABELS.episode] ?? '' })),
  };
}
