/**
 * An env's sidecars on the Docker engine (bundle.json's envs.<env>.sidecars, EnvSpec.sidecars):
 * services beside the env (a database, a cache), each a container on the episode's own network,
 * reached from the env by its name (a network alias), locked down as an env is (engine/hardening.ts:
 * capabilities, no-new-privileges, an init, ulimits, bounded memory, CPU and processes), under the
 * env's runtime, labelled as the episode's (teardown, the start sweep and the reaper remove them
 * with the env: removal.ts finds an episode's containers by its labels). They are deployed before
 * the env and waited for: each until it runs and, when it has a healthcheck (its own or its
 * image's HEALTHCHECK), until the engine says it is healthy. One that exits or does not get healthy
 * ends the deploy, named, with its log's tail.
 */
import type Dockerode from 'dockerode';
import { SandboxError, type EnvRuntime, type EnvUsageReading, type SidecarSpec } from '../sandbox.js';
import { engineMessage, isNotFound, toSandboxError } from '../engine/errors.js';
import { ownerLabels, resourceName, type Owner } from '../engine/labels.js';
import { dockerLockdown } from '../engine/hardening.js';
import type { EpisodeNetwork } from './bridge-network.js';
import { inspectState, logTail } from './containers.js';
import { waitForHealthy } from './health.js';

const NS_PER_S = 1e9;

/** the label value naming a sidecar's container (LABELS.env): `<env>.sidecars.<name>` */
export function sidecarLabel(envName: string, sidecar: string): string {
  return `${envName}.sidecars.${sidecar}`;
}

/** creates one sidecar's container on the episode network, reached there as `sc.name` */
async function createSidecar(
  docker: Dockerode,
  owner: Owner,
  envName: string,
  sc: SidecarSpec,
  network: EpisodeNetwork,
  opts: { runtime: EnvRuntime; noRouteOut: boolean },
): Promise<Dockerode.Container> {
  const lockdown = dockerLockdown({ resources: sc.resources, runtime: opts.runtime });
  const h = sc.healthcheck;
  try {
    return await docker.createContainer({
      name: resourceName(owner.bundle, `${owner.env}-${sc.name}`, owner.episode),
      Image: sc.image,
      Env: Object.entries(sc.environment).map(([k, v]) => `${k}=${v}`),
      Labels: ownerLabels({ ...owner, env: sidecarLabel(envName, sc.name) }),
      ...(h
        ? {
            Healthcheck: {
              Test: typeof h.command === 'string' ? ['CMD-SHELL', h.command] : ['CMD', ...h.command],
              Interval: Math.round(h.intervalS * NS_PER_S),
              Timeout: Math.round(h.timeoutS * NS_PER_S),
              Retries: h.retries,
              StartPeriod: Math.round(h.startPeriodS * NS_PER_S),
            },
          }
        : {}),
      Tty: false,
      AttachStdin: false,
      AttachStdout: false,
      AttachStderr: false,
      HostConfig: {
        NetworkMode: network.name,
        ...lockdown.hostConfig,
        // as the env's: on a network with no route out, a lookup of a name outside fails at once
        ...(opts.noRouteOut ? { DnsOptions: ['timeout:1', 'attempts:1'] } : {}),
        AutoRemove: false,
        RestartPolicy: { Name: 'no' },
        PublishAllPorts: false,
      },
      NetworkingConfig: { EndpointsConfig: { [network.name]: { Aliases: [sc.name] } } },
    });
  } catch (err) {
    if (isNotFound(err) && /no such image/i.test(engineMessage(err)))
      throw new SandboxError('no_image', `the Docker engine has no image ${sc.image} for sidecar \`${sc.name}\` of env \`${envName}\``);
    throw toSandboxError(err, `creating sidecar \`${sc.name}\` of env \`${envName}\` from image ${sc.image}`);
  }
}

/** the message's end: the sidecar's log tail, when it wrote one */
function withTail(tail: string): string {
  return tail.trim() ? `; its log ends:\n${tail.trimEnd()}` : '; it logged nothing';
}

/**
 * Creates, starts and waits for every sidecar of the env (all at once), on `network`; resolves with
 * their container ids once each runs and is healthy (when it has a healthcheck). Whatever it
 * throws, the containers it made carry the episode's labels: the deploy's clean-up removes them.
 */
export async function startSidecars(
  docker: Dockerode,
  owner: Owner,
  env: { name: string; runtime: EnvRuntime; sidecars: readonly SidecarSpec[] },
  network: EpisodeNetwork,
  opts: { noRouteOut: boolean; deadline: number; signal: AbortSignal },
): Promise<string[]> {
  const containers = await Promise.all(
    env.sidecars.map((sc) => createSidecar(docker, owner, env.name, sc, network, { runtime: env.runtime, noRouteOut: opts.noRouteOut })),
  );
  await Promise.all(
    containers.map(async (c, i) => {
      const sc = env.sidecars[i]!;
      try {
        await c.start();
      } catch (err) {
        throw toSandboxError(err, `starting sidecar \`${sc.name}\` of env \`${env.name}\``);
      }
      const health = await waitForHealthy(docker, c.id, { deadline: opts.deadline, signal: opts.signal }).catch((err: unknown) => {
        if (opts.signal.aborted) throw err;
        throw toSandboxError(err, `reading the health of sidecar \`${sc.name}\` of env \`${env.name}\``);
      });
      if (health.kind === 'healthy') return;
      if (health.kind === 'none') {
        await assertRunning(docker, c.id, sc.name, env.name);
        return;
      }
      const tail = await logTail(docker, c.id);
      // the engine marks a container that stopped unhealthy too: its exit is what happened
      const stopped = health.why === 'exited' || (await inspectState(docker, c.id).catch(() => null))?.running === false;
      if (stopped) throw await exitedError(docker, c.id, sc.name, env.name, tail);
      const what = health.why === 'unhealthy' ? 'the engine marked it unhealthy' : 'it was still starting when the deploy timeout passed';
      throw new SandboxError(
        'not_ready_in_time',
        `sidecar \`${sc.name}\` of env \`${env.name}\` was not ready: its healthcheck (${health.check}) did not pass (${what})` +
          `${health.lastOutput ? `; its last run: ${health.lastOutput}` : ''}${withTail(tail)}`,
        { logTail: tail },
      );
    }),
  );
  return containers.map((c) => c.id);
}

/** the sidecar still runs; else the deploy ends naming it, its exit code and its log */
async function assertRunning(docker: Dockerode, id: string, name: string, envName: string): Promise<void> {
  const state = await inspectState(docker, id).catch((err: unknown) => {
    throw toSandboxError(err, `inspecting sidecar \`${name}\` of env \`${envName}\``);
  });
  if (!state.running) throw await exitedError(docker, id, name, envName, await logTail(docker, id));
}

async function exitedError(docker: Dockerode, id: string, name: string, envName: string, tail: string): Promise<SandboxError> {
  const state = await inspectState(docker, id).catch(() => null);
  const code = state?.exitCode ?? null;
  const oom = state?.oomKilled ? ', killed for its memory limit' : '';
  return new SandboxError(
    state?.oomKilled ? 'oom_killed' : 'exited',
    `sidecar \`${name}\` of env \`${envName}\` exited${code !== null ? ` with code ${code}` : ''}${oom} before the env was deployed${withTail(tail)}`,
    { exitCode: code, logTail: tail },
  );
}

/** after the env got ready: every sidecar still runs (one with no healthcheck that exits at once is seen here) */
export async function checkSidecarsRunning(docker: Dockerode, ids: readonly string[], env: { name: string; sidecars: readonly SidecarSpec[] }): Promise<void> {
  await Promise.all(ids.map((id, i) => assertRunning(docker, id, env.sidecars[i]!.name, env.name)));
}

/**
 * The env's usage with its sidecars': CPU seconds and bytes written added up; the peak memory is
 * the sum of each container's own peak (an upper bound of what they held at once). A figure any
 * container cannot say stays the env's own when that is known (a sidecar's unknown is not counted).
 */
export function addSidecarUsage(env: EnvUsageReading, sidecars: readonly EnvUsageReading[]): EnvUsageReading {
  const add = (k: keyof EnvUsageReading) => {
    const own = env[k];
    if (own === null) return null;
    return sidecars.reduce((sum, r) => sum + (r[k] ?? 0), own);
  };
  return { cpuS: add('cpuS'), peakMemoryBytes: add('peakMemoryBytes'), bytesWritten: add('bytesWritten') };
}
