/**
 * How a container of a shell env is created: any image serves, because nothing has to run in it
 * but what the shell tools start. So its command is replaced by one that waits forever (an image
 * whose own command would exit at once, `bash` with no input, or one that runs a program, keeps
 * its container up), and Docker's init runs as PID 1 to reap what the model's commands leave
 * behind. The image's ENTRYPOINT is kept, with the waiting command as its arguments, as Harbor
 * does: an entrypoint script that prepares the container and ends in `exec "$@"` still runs.
 * Same isolation as every env: its own network, limits, no new privileges, no restart.
 */
import type Dockerode from 'dockerode';

import { KEEP_ALIVE_CMD } from '../../sandbox/container-exec.js';

export { KEEP_ALIVE_CMD };

export interface ShellEnvContainer {
  image: string;
  /** variables set in the container (the env's `environment`) */
  environment: Record<string, string>;
  memoryMb: number;
  cpus: number;
  pids: number;
  /** a limit on the container's writable layer, applied where the engine's storage driver can (storageLimits) */
  storageMb?: number;
  /** the working directory, overriding the image's WORKDIR (created when missing) */
  workdir?: string;
}

export interface ShellEnvPlacement {
  name: string;
  labels: Record<string, string>;
  /** the episode's network: the container's only one */
  networkName: string;
  /**
   * The engine can limit a container's writable layer (overlay2 on xfs with pquota, btrfs, zfs):
   * then storageMb becomes Docker's StorageOpt size. Elsewhere Docker refuses the option, so it is
   * not sent and the limit is not enforced.
   */
  storageLimits?: boolean;
}

export function shellEnvContainerOptions(env: ShellEnvContainer, place: ShellEnvPlacement): Dockerode.ContainerCreateOptions {
  const memory = env.memoryMb * 1024 * 1024;
  return {
    name: place.name,
    Image: env.image,
    Cmd: [...KEEP_ALIVE_CMD],
    Env: Object.entries(env.environment).map(([k, v]) => `${k}=${v}`),
    Labels: place.labels,
    ...(env.workdir ? { WorkingDir: env.workdir } : {}),
    Tty: false,
    OpenStdin: false,
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
    HostConfig: {
      NetworkMode: place.networkName,
      Memory: memory,
      // no swap beyond the limit
      MemorySwap: memory,
      NanoCpus: Math.round(env.cpus * 1e9),
      PidsLimit: env.pids,
      AutoRemove: false,
      RestartPolicy: { Name: 'no' },
      PublishAllPorts: false,
      // PID 1 reaps the orphans of the model's background jobs
      Init: true,
      SecurityOpt: ['no-new-privileges:true'],
      ...(place.storageLimits && env.storageMb !== undefined ? { StorageOpt: { size: `${env.storageMb}M` } } : {}),
    },
    NetworkingConfig: { EndpointsConfig: { [place.networkName]: {} } },
  };
}
