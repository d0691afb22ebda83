/**
 * An episode's env on swarm: an overlay network of its own (internal: no route out; attachable:
 * the server's container joins it) and a service of one replica of the env's image on it.
 */
import type Dockerode from 'dockerode';
import { networkInterfaces } from 'node:os';
import { ENV_SECRET_VAR } from '../env-identity.js';
import { SandboxError, type EnvSpec } from '../sandbox.js';
import { keeperCommand, toolboxBinary } from '../toolbox.js';
import { logTailOf } from '../engine/logs.js';
import { isNotFound, removeOrGone, toSandboxError } from '../engine/errors.js';
import { ownerLabels, type Owner } from '../engine/labels.js';
import { createOwnedNetwork } from '../engine/networks.js';
import { swarmLockdown, type SwarmEngine } from '../engine/hardening.js';
import { sleep } from '../engine/retry.js';
import { LOG_TAIL_LINES, SWARM } from '../../defaults.js';
import { localAddressIn, parseCidr } from '../../util/cidr.js';

/**
 * Service and network names are DNS labels in swarm (letters, digits, dashes; at most 63):
 * labels carry the real ids, names only help people reading `docker service ls`.
 */
export function swarmName(owner: Owner): string {
  const slug = (s: string, n: number) =>
    s
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, n);
  return ['openenv', slug(owner.env, 12), slug(owner.episode, 24), Math.random().toString(36).slice(2, 8)].filter(Boolean).join('-').replace(/-+/g, '-');
}

export interface EpisodeOverlay {
  id: string;
  name: string;
}

export async function createEpisodeOverlay(docker: Dockerode, owner: Owner, name: string): Promise<EpisodeOverlay> {
  try {
    // no subnet given: swarm allocates one from its own pool (`swarm init --default-addr-pool`),
    // cluster-wide, so no two overlays ever overlap, whichever server created them
    return { id: await createOwnedNetwork(docker, owner, name, { Driver: 'overlay', Attachable: true }), name };
  } catch (err) {
    throw toSandboxError(err, `creating the overlay network of episode ${owner.episode}`);
  }
}

/** the overlay's subnet (CIDR), which swarm allocated from its pool when the overlay was made */
export async function overlaySubnet(docker: Dockerode, networkId: string): Promise<string> {
  let info: { IPAM?: { Config?: Array<{ Subnet?: string }> } };
  try {
    info = (await docker.getNetwork(networkId).inspect()) as typeof info;
  } catch (err) {
    throw toSandboxError(err, `inspecting the overlay network ${networkId.slice(0, 12)}`);
  }
  const subnet = info.IPAM?.Config?.map((c) => c.Subnet).find((c): c is string => c !== undefined && !('problem' in parseCidr(c)));
  if (!subnet) throw new SandboxError('engine_failed', `the overlay network ${networkId.slice(0, 12)} has no IPv4 subnet`);
  return subnet;
}

/**
 * Resolves once an interface of this process's namespace (the server's container) has an IPv4
 * address in `subnet`, up and running: the join of the overlay returned, and the model door binds
 * that address (a bind of an address not yet up fails). Rejects (engine_failed) after
 * SWARM.ownAddressUpMs.
 */
export async function ownAddressUp(
  subnet: string,
  signal: AbortSignal,
  interfaces: () => ReturnType<typeof networkInterfaces> = networkInterfaces,
): Promise<string> {
  const c = parseCidr(subnet);
  if ('problem' in c) throw new SandboxError('engine_failed', `the overlay's subnet ${subnet}: ${c.problem}`);
  const until = Date.now() + SWARM.ownAddressUpMs;
  for (;;) {
    const address = localAddressIn(subnet, interfaces());
    if (address !== null) return address;
    if (Date.now() >= until)
      throw new SandboxError(
        'engine_failed',
        `the server's container has no address up on its episode's overlay (${subnet}) ${SWARM.ownAddressUpMs / 1000}s after joining it: the model door cannot open there`,
      );
    await sleep(100, signal);
  }
}

/** What the server's shell part adds to an env's service (shell.ts): the toolbox's volume and folder, and where it may run. */
export interface ServiceShellParts {
  /** the toolbox volume (on every node it may run on) and the env's own folder for it */
  toolbox?: { volume: string; dir: string };
  /** placement constraints: the nodes whose toolbox and engine the server lacks, left out */
  constraints?: readonly string[];
}

/**
 * One replica, never restarted (a crashed env is a failed episode, not a new env), locked down as
 * every env (engine/hardening.ts: capabilities, an init, ulimits, the root and user its bundle
 * asked for, no-new-privileges where the engine takes it), the manifest's memory and CPU as both
 * reservation (the scheduler places it only where they fit) and limit, the pid limit, the owner's
 * labels on the service and on its container. Endpoint mode dnsrr: no virtual IP is allocated
 * (the server reaches the task's own address; VIPs need IPVS, which not every kernel has) and no
 * port is published anywhere. With the toolbox (`parts.toolbox`) its volume is mounted read-only
 * at the env's folder; a shell env (EnvSpec.kind) then runs the toolbox's keeper as its process 1
 * instead of the image's command and the engine's init (the image's ENTRYPOINT kept), in its
 * `workdir`, with no PORT and no env secret, as on one host (docker/containers.ts).
 */
export async function createEnvService(
  docker: Dockerode,
  owner: Owner,
  env: EnvSpec,
  network: EpisodeOverlay,
  image: string,
  secret: string | undefined,
  engine: SwarmEngine,
  parts: ServiceShellParts = {},
): Promise<string> {
  const shell = env.kind === 'shell';
  const toolbox = parts.toolbox;
  if (shell && !toolbox) throw new SandboxError('engine_failed', `env \`${env.name}\` is a shell env, and a shell env's service needs the toolbox`);
  const environment = shell ? env.environment : { ...env.environment, PORT: String(env.port), ...(secret ? { [ENV_SECRET_VAR]: secret } : {}) };
  const lockdown = swarmLockdown({ resources: env.resources, security: env.security, runtime: env.runtime }, engine);
  const labels = ownerLabels(owner);
  const mounts = [
    ...(lockdown.containerSpec.Mounts ?? []),
    ...(toolbox ? [{ Type: 'volume' as const, Source: toolbox.volume, Target: toolbox.dir, ReadOnly: true, VolumeOptions: { NoCopy: true } }] : []),
  ];
  try {
    const service = await docker.createService({
      Name: network.name,
      Labels: labels,
      TaskTemplate: {
        ContainerSpec: {
          Image: image,
          Env: Object.entries(environment).map(([k, v]) => `${k}=${v}`),
          Labels: labels,
          // the names the env resolves to chosen addresses (its model door's, say): "IP name" lines of its hosts file
          ...(env.hosts && Object.keys(env.hosts).length > 0 ? { Hosts: Object.entries(env.hosts).map(([name, ip]) => `${ip} ${name}`) } : {}),
          ...lockdown.containerSpec,
          ...(mounts.length ? { Mounts: mounts } : {}),
          // the keeper is a shell env's process 1: it reaps what the engine's init would, and no
          // process in the container can signal it (src/sandbox/toolbox.ts)
          ...(shell && toolbox ? { Args: keeperCommand(toolboxBinary(toolbox.dir)), Init: false, ...(env.workdir ? { Dir: env.workdir } : {}) } : {}),
          // swarm sends SIGTERM then SIGKILL after this long when the service is removed
          StopGracePeriod: 2_000_000_000,
        },
        Resources: {
          Limits: lockdown.limits,
          Reservations: { MemoryBytes: lockdown.limits.MemoryBytes, NanoCPUs: lockdown.limits.NanoCPUs },
        },
        RestartPolicy: { Condition: 'none', MaxAttempts: 0 },
        ...(parts.constraints?.length ? { Placement: { Constraints: [...parts.constraints] } } : {}),
        Networks: [{ Target: network.id }],
      },
      Mode: { Replicated: { Replicas: 1 } },
      EndpointSpec: { Mode: 'dnsrr' },
    } as Dockerode.CreateServiceOptions);
    return service.id;
  } catch (err) {
    throw toSandboxError(err, `creating the service of env \`${env.name}\` from image ${image}`);
  }
}

/**
 * Scales the service to no replica: its task is shut down on its node, and the node reports the
 * task's end once its container has stopped (a removed service's tasks vanish from the manager's
 * view while their containers may still be stopping). Missing service: nothing to do.
 */
export async function stopService(docker: Dockerode, serviceId: string): Promise<void> {
  try {
    const service = docker.getService(serviceId);
    const info = (await service.inspect()) as { Version: { Index: number }; Spec: Record<string, unknown> };
    if ((info.Spec.Mode as { Replicated?: { Replicas?: number } } | undefined)?.Replicated?.Replicas === 0) return;
    await service.update({ version: info.Version.Index, ...info.Spec, Mode: { Replicated: { Replicas: 0 } } });
  } catch (err) {
    if (isNotFound(err)) return;
    throw err;
  }
}

/** resolves once swarm accepted the removal; gone already is done */
export function removeService(docker: Dockerode, serviceId: string): Promise<void> {
  return removeOrGone(() => docker.getService(serviceId).remove());
}

/** the last lines of the service's log, from whichever node its task ran on; '' when they cannot be had in time */
export async function serviceLogTail(docker: Dockerode, serviceId: string, timeoutMs = 3000, lines = LOG_TAIL_LINES): Promise<string> {
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    return logTailOf(
      await docker.getService(serviceId).logs({ stdout: true, stderr: true, follow: false, tail: lines, timestamps: false, abortSignal: signal } as object),
      lines,
    );
  } catch {
    return '';
  }
}

/** a rejected task whose node could not get the image */
export function isImageRejection(err: string): boolean {
  return /no such image|manifest unknown|pull access denied|not found|repository does not exist|failed to resolve reference|unauthorized/i.test(err);
}

export function imageRejection(env: EnvSpec, image: string, err: string): SandboxError {
  return new SandboxError(
    'no_image',
    `the node chosen for env \`${env.name}\` could not get image ${image}: ${err}` +
      (image.includes('@') ? '' : ' (without --registry, only the manager has the env images: pass --registry HOST:PORT so every node can pull them)'),
  );
}
