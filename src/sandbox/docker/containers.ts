import type Dockerode from 'dockerode';
import { singleFileTar } from '../container-exec.js';
import { KEEPER_NAME, keeperCommand, toolboxBinary } from '../toolbox.js';
import { ENV_SECRET_VAR } from '../env-identity.js';
import { SandboxError, type EnvSpec } from '../sandbox.js';
import { engineMessage, isConflict, isNotFound, removeOrGone, toSandboxError } from '../engine/errors.js';
import { ownerLabels, resourceName, type Owner } from '../engine/labels.js';
import type { EpisodeNetwork } from './bridge-network.js';
import { LOG_TAIL_LINES } from '../../defaults.js';
import { logTailOf } from '../engine/logs.js';
import { dockerLockdown } from '../engine/hardening.js';

/** the engine's refusal of a storage limit its storage driver cannot keep (overlay2 off xfs with pquota, vfs…) */
export function isStorageOptRefusal(err: unknown): boolean {
  return /storage-opt|storage option/i.test(engineMessage(err));
}

/**
 * gVisor (this runsc) mounts a tmpfs of its own at an empty `/tmp`, inside the sandbox where the
 * engine's archive API cannot see it: the file tools and a verifier's copies would miss every file
 * there, and the storage bound and the bytes-written cost would not count it. A file in `/tmp`
 * before the start keeps it on the container's writable layer, as under runc.
 */
export const GVISOR_TMP_KEEPER = {
  path: 'tmp/.openenv-keep',
  text: 'keeps gVisor from mounting its own /tmp, which the engine cannot see (OpenEnv bundle server)\n',
} as const;

/** Where an env's toolbox comes from (the instance's volume) and where it is mounted in the container. */
export interface ToolboxMount {
  volume: string;
  /** a folder at the container's root, named for this env (toolbox.ts newToolboxDir) */
  dir: string;
}

/**
 * The env's container: on the episode network only, no published port, locked down
 * (engine/hardening.ts: capabilities, no-new-privileges, an init, ulimits, bounded memory, CPU and
 * process count, the root and user its bundle asked for, its runtime). `toolbox`: the toolbox's
 * volume mounted read-only at its folder (src/sandbox/toolbox.ts). A shell env's (EnvSpec.kind)
 * process 1 is the toolbox's keeper instead of the image's command and the engine's init (the
 * image's ENTRYPOINT kept), in its `workdir`, with no PORT: it needs the toolbox. Not
 * auto-removed, so a crashed env can still be inspected and its log read. `storageLimit`: the
 * engine limits the writable layer to the env's storage_mb (StorageOpt; only some storage drivers
 * can).
 */
export async function createEnvContainer(
  docker: Dockerode,
  owner: Owner,
  env: EnvSpec,
  /** null: no network at all (a clean verifier's container) */
  network: EpisodeNetwork | null,
  /** the episode's env-identity secret (env-identity.ts); it overrides a manifest value of the same name */
  secret?: string,
  opts: { storageLimit?: boolean; toolbox?: ToolboxMount; noRouteOut?: boolean } = {},
): Promise<Dockerode.Container> {
  const shell = env.kind === 'shell';
  const toolbox = opts.toolbox;
  if (shell && !toolbox) throw new SandboxError('engine_failed', `env \`${env.name}\` is a shell env, and a shell env's container needs the toolbox`);
  const environment = shell ? env.environment : { ...env.environment, PORT: String(env.port), ...(secret ? { [ENV_SECRET_VAR]: secret } : {}) };
  const lockdown = dockerLockdown({ resources: env.resources, security: env.security, runtime: env.runtime });
  const storageMb = env.resources.storageMb;
  let container: Dockerode.Container;
  try {
    container = await docker.createContainer({
      name: resourceName(owner.bundle, owner.env, owner.episode),
      Image: env.image,
      Env: Object.entries(environment).map(([k, v]) => `${k}=${v}`),
      Labels: ownerLabels(owner),
      ...(shell && toolbox ? { Cmd: keeperCommand(toolboxBinary(toolbox.dir)), ...(env.workdir ? { WorkingDir: env.workdir } : {}) } : {}),
      Tty: false,
      AttachStdin: false,
      AttachStdout: false,
      AttachStderr: false,
      ...(lockdown.user ? { User: lockdown.user } : {}),
      HostConfig: {
        NetworkMode: network?.name ?? 'none',
        ...lockdown.hostConfig,
        // the keeper is a shell env's process 1: it reaps what the engine's init would, and no
        // process in the container can signal it (src/sandbox/toolbox.ts)
        ...(shell ? { Init: false } : {}),
        ...(toolbox ? { Mounts: [{ Type: 'volume' as const, Source: toolbox.volume, Target: toolbox.dir, ReadOnly: true }] } : {}),
        ...(opts.storageLimit && storageMb !== undefined ? { StorageOpt: { size: `${storageMb}M` } } : {}),
        // on a network with no route out no name outside it resolves: the engine's DNS waits ~20 s
        // per lookup before saying so (an apt-get or pip of a verifier's bootstrap then spends
        // about 47 s failing); one try of 1 s fails as surely, within seconds (docs/harbor.md, tests that fetch)
        ...(opts.noRouteOut ? { DnsOptions: ['timeout:1', 'attempts:1'] } : {}),
        ...(env.hosts && Object.keys(env.hosts).length > 0 ? { ExtraHosts: Object.entries(env.hosts).map(([name, ip]) => `${name}:${ip}`) } : {}),
        AutoRemove: false,
        RestartPolicy: { Name: 'no' },
        PublishAllPorts: false,
      },
      ...(network ? { NetworkingConfig: { EndpointsConfig: { [network.name]: {} } } } : { NetworkDisabled: true }),
    });
  } catch (err) {
    if (isNotFound(err) && /no such image/i.test(engineMessage(err))) {
      throw new SandboxError('no_image', `the Docker engine has no image ${env.image} for env \`${env.name}\`: build or pull it first`);
    }
    throw toSandboxError(err, `creating the container of env \`${env.name}\` from image ${env.image}`);
  }
  // a read-only root has the server's own tmpfs at /tmp (and takes no archive)
  if (env.runtime === 'runsc' && env.security?.root !== 'read-only') {
    await container
      .putArchive(singleFileTar(GVISOR_TMP_KEEPER.path, Buffer.from(GVISOR_TMP_KEEPER.text), { mode: 0o444, uid: 0, gid: 0 }), { path: '/' })
      .catch(async (err: unknown) => {
        await removeContainer(docker, container.id).catch(() => undefined);
        throw toSandboxError(err, `preparing /tmp of env \`${env.name}\` for gVisor`);
      });
  }
  return container;
}

/** resolves once the container is gone; 404 (already gone) and 409 (removal in progress) count as done */
export function removeContainer(docker: Dockerode, containerId: string): Promise<void> {
  return removeOrGone(() => docker.getContainer(containerId).remove({ force: true, v: true }), isConflict);
}

/**
 * The last lines of the container's stdout and stderr; '' when it cannot be read. Bounded however
 * much the env wrote: the engine splits log entries at 16 KiB, so `tail` lines are at most
 * 20 × 16 KiB read, and the text returned is cut to LOG_TAIL_BYTES.
 */
export async function logTail(docker: Dockerode, containerId: string, lines = LOG_TAIL_LINES): Promise<string> {
  try {
    return logTailOf(await docker.getContainer(containerId).logs({ stdout: true, stderr: true, follow: false, tail: lines, timestamps: false }), lines);
  } catch {
    return '';
  }
}

export interface ContainerState {
  running: boolean;
  exitCode: number | null;
  oomKilled: boolean;
  ip: string | null;
  /** its main process on the engine's host, while it runs */
  pid: number | null;
  /** its process 1 is the toolbox's keeper (a shell env's) */
  keeper: boolean;
}

export async function inspectState(docker: Dockerode, containerId: string, networkName?: string): Promise<ContainerState> {
  const info = await docker.getContainer(containerId).inspect();
  const s = info.State;
  const started = s.Status !== 'created';
  const networks = info.NetworkSettings?.Networks ?? {};
  const endpoint = networkName !== undefined ? networks[networkName] : Object.values(networks)[0];
  return {
    running: s.Running,
    exitCode: started && !s.Running ? s.ExitCode : null,
    oomKilled: Boolean(s.OOMKilled),
    ip: endpoint?.IPAddress ? endpoint.IPAddress : null,
    pid: s.Running && s.Pid > 0 ? s.Pid : null,
    keeper: (info.Config?.Cmd ?? []).includes(KEEPER_NAME),
  };
}
