/**
 * Builds the DockerSandbox the server uses, deciding whether it must join episode networks from
 * its own container (it runs in one, with the engine's socket mounted).
 */
import Dockerode from 'dockerode';
import { DockerSandbox } from './docker-sandbox.js';
import { detectOwnContainerId } from '../engine/own-container.js';
import type { LayerDefaults } from '../lockdown.js';
import type { SandboxLogger } from '../engine/logger.js';
import type { EnvRuntime } from '../sandbox.js';

export interface DockerSandboxFactoryOptions {
  instance: string;
  bundleName: string;
  subnetPool: string;
  inContainer: 'auto' | 'always' | 'never';
  /** episode networks made ahead of demand */
  networkStock: number;
  /** what runs envs whose bundle names no runtime (--runtime) */
  runtime?: EnvRuntime;
  /** an ended episode's stocked network goes back to the stock (default true) */
  recycleNetworks?: boolean;
  /** the static busybox run inside envs for the server's own steps (--toolbox) */
  toolbox?: string;
  /** the stock's networks are a shell env's (DockerSandboxOptions.stockForShell) */
  stockForShell?: boolean;
  /** the bounds of an env's writable layer where its bundle sets none (--default-storage-mb, --default-max-files) */
  layerDefaults?: LayerDefaults;
  logger: SandboxLogger;
}

export async function createDockerSandbox(o: DockerSandboxFactoryOptions): Promise<{ sandbox: DockerSandbox; attachedTo: string | null }> {
  const docker = new Dockerode();
  let own: string | null = null;
  if (o.inContainer !== 'never') {
    // an unreachable engine is reported by /health and by ping(); here it just means "not attached"
    own = await detectOwnContainerId(docker).catch(() => null);
    if (!own && o.inContainer === 'always') {
      throw new Error('--in-container always, but this process is not in a container the Docker engine knows');
    }
  }
  const sandbox = new DockerSandbox({
    docker,
    instance: o.instance,
    bundleName: o.bundleName,
    subnetPool: o.subnetPool,
    attachContainer: own,
    networkStock: o.networkStock,
    runtime: o.runtime,
    ...(o.layerDefaults ? { layerDefaults: o.layerDefaults } : {}),
    ...(o.recycleNetworks !== undefined ? { recycleNetworks: o.recycleNetworks } : {}),
    ...(o.toolbox !== undefined ? { toolbox: o.toolbox } : {}),
    ...(o.stockForShell ? { stockForShell: true } : {}),
    logger: o.logger,
  });
  return { sandbox, attachedTo: own };
}
