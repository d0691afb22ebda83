/**
 * Env lock-down in each backend's words: the policy (src/sandbox/lockdown.ts: what every env gets,
 * what a bundle may ask for) as engine settings. Nothing here talks to the engine:
 * `dockerLockdown` gives the Docker backend's HostConfig (and the container's User),
 * `swarmLockdown` the swarm backend's ContainerSpec and resource limits, with what a swarm cannot
 * enforce. The init process as PID 1 is the engine's docker-init.
 *
 * Where it plugs in: the Docker backend's container spec (docker/containers.ts) spreads
 * `dockerLockdown(...).hostConfig` into its HostConfig and sets `user` as the container's User; the
 * swarm backend's service spec (swarm/services.ts) spreads `swarmLockdown(...).containerSpec` into
 * its ContainerSpec and `.limits` into Resources.Limits; the skeleton (engine-sandbox.ts) offers
 * the policy's `granted` as the sandbox's `lockdown`, with the start check of a runtime.
 */
import type Dockerode from 'dockerode';
import { ENV_LOCKDOWN } from '../../defaults.js';
import { capabilitiesOf, enginePidsLimit, READ_ONLY_ROOT_TMP, tmpMb, type LockdownInput } from '../lockdown.js';
import type { EnvRuntime } from '../sandbox.js';

const ULIMITS = [
  { Name: 'nofile', Soft: ENV_LOCKDOWN.nofile, Hard: ENV_LOCKDOWN.nofile },
  { Name: 'core', Soft: 0, Hard: 0 },
];

/** The Docker backend's settings: spread `hostConfig` into the container's HostConfig, set `user` as its User when given. */
export function dockerLockdown(input: LockdownInput): { hostConfig: Dockerode.HostConfig; user?: string } {
  const { resources: r, security } = input;
  const memory = r.memoryMb * 1024 * 1024;
  const tmp = tmpMb(security);
  const hostConfig: Dockerode.HostConfig = {
    CapDrop: ['ALL'],
    CapAdd: capabilitiesOf(security).all,
    SecurityOpt: ['no-new-privileges:true'],
    Init: true,
    Ulimits: ULIMITS.map((u) => ({ ...u })),
    Memory: memory,
    // equal to Memory: no swap on top of the limit, so "out of memory" means the limit
    MemorySwap: memory,
    NanoCpus: Math.round(r.cpus * 1e9),
    PidsLimit: enginePidsLimit(r.pids, input.runtime),
    ReadonlyRootfs: tmp !== null,
    ...(tmp !== null ? { Tmpfs: { [READ_ONLY_ROOT_TMP]: `rw,nosuid,nodev,mode=1777,size=${tmp}m` } } : {}),
    // said even for runc: an engine whose default-runtime is another must not run envs under it with limits meant for runc
    Runtime: input.runtime ?? 'runc',
  };
  return security?.user ? { hostConfig, user: security.user } : { hostConfig };
}

/** The first engine API version whose swarm services take `no-new-privileges` (Docker 25). */
export const SWARM_NO_NEW_PRIVILEGES_API = '1.44';

/** whether the engine API `version` is `wanted` or newer (`1.44` ≥ `1.41`) */
export function apiAtLeast(version: string, wanted: string): boolean {
  const [a = 0, b = 0] = version.split('.').map(Number);
  const [c = 0, d = 0] = wanted.split('.').map(Number);
  return a > c || (a === c && b >= d);
}

/**
 * What a swarm's manager says of itself: its API version (`docker version`) and default runtime
 * (`docker info`); and whether the engine of every node gives each container no-new-privileges
 * (`dockerd --no-new-privileges`, as each node's `info` says: swarm/node-engines.ts): true, or why
 * not (absent: not asked).
 */
export interface SwarmEngine {
  apiVersion: string;
  defaultRuntime: string;
  nodesNoNewPrivileges?: true | string;
}

/**
 * The swarm backend's settings: spread `containerSpec` into the service's ContainerSpec and
 * `limits` into its Resources.Limits. Older engines silently ignore what they do not know, so what
 * they cannot enforce is said in `not_enforced` instead of being sent (no-new-privileges is kept
 * on an older engine when every node's engine sets it itself). A service cannot choose its
 * runtime: its tasks run under the nodes' default-runtime, which `runtime` says (runsc: the pids
 * limit is scaled as on Docker).
 */
export function swarmLockdown(
  input: LockdownInput,
  engine: SwarmEngine,
): {
  containerSpec: Dockerode.ContainerSpec;
  limits: { MemoryBytes: number; NanoCPUs: number; Pids: number };
  runtime: EnvRuntime;
  not_enforced: string[];
} {
  const { resources: r, security } = input;
  const tmp = tmpMb(security);
  const notEnforced: string[] = [];
  // asked of the service where the engine takes it; else every node's engine must set it for all its containers
  const nnp = apiAtLeast(engine.apiVersion, SWARM_NO_NEW_PRIVILEGES_API);
  if (!nnp && engine.nodesNoNewPrivileges !== true)
    notEnforced.push(
      `no-new-privileges: swarm services take it from engine API ${SWARM_NO_NEW_PRIVILEGES_API} (Docker 25), and this engine speaks ${engine.apiVersion}; ` +
        `nor does every node's engine set it for all its containers (dockerd --no-new-privileges): ${engine.nodesNoNewPrivileges ?? 'the nodes were not asked'}`,
    );
  const runtime: EnvRuntime = engine.defaultRuntime === 'runsc' ? 'runsc' : 'runc';
  if (input.runtime === 'runsc' && runtime !== 'runsc')
    notEnforced.push(`runtime runsc: a swarm service cannot choose its runtime, and the manager's default-runtime is ${engine.defaultRuntime}`);
  const containerSpec: Dockerode.ContainerSpec = {
    CapabilityDrop: ['ALL'],
    CapabilityAdd: capabilitiesOf(security).all.map((c) => `CAP_${c}`),
    Init: true,
    Ulimits: ULIMITS.map((u) => ({ ...u })),
    ReadOnly: tmp !== null,
    ...(tmp !== null
      ? { Mounts: [{ Type: 'tmpfs', Source: '', Target: READ_ONLY_ROOT_TMP, TmpfsOptions: { SizeBytes: tmp * 1024 * 1024, Mode: 0o1777 } }] }
      : {}),
    ...(security?.user ? { User: security.user } : {}),
    ...(nnp ? { Privileges: { NoNewPrivileges: true } as Dockerode.ContainerSpec['Privileges'] } : {}),
  };
  return {
    containerSpec,
    limits: { MemoryBytes: r.memoryMb * 1024 * 1024, NanoCPUs: Math.round(r.cpus * 1e9), Pids: enginePidsLimit(r.pids, runtime) },
    runtime,
    not_enforced: notEnforced,
  };
}
