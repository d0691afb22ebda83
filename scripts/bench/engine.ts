/**
 * What the bench reads off the Docker engine besides its timings: the memory the engine spends on
 * live envs, and what of this run is still on the engine (counted, then removed, so the engine is
 * left as the run found it, also after a failure halfway).
 *
 * A resource belongs to the run when one of its labels has the run's id as its value or as its
 * prefix: `bench=<run>` on bare containers and networks, the server instances' labels (`<run>-<name>`)
 * on their containers and networks and on their instance-claim volumes.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { LABELS } from '../../src/sandbox/sandbox.js';
import type { BenchContext } from './context.js';

const BENCH_LABEL = 'bench';

function ofRun(ctx: BenchContext, labels: Record<string, string> | null | undefined): boolean {
  return Object.values(labels ?? {}).some((v) => v === ctx.run || v.startsWith(`${ctx.run}-`));
}

interface RunResources {
  containers: string[];
  networks: string[];
  volumes: string[];
}

async function runResources(ctx: BenchContext): Promise<RunResources> {
  const byKey = (key: string) => JSON.stringify({ label: [key] });
  const [cm, cb, nm, nb, vols] = await Promise.all([
    ctx.docker.listContainers({ all: true, filters: byKey(LABELS.managed) }),
    ctx.docker.listContainers({ all: true, filters: byKey(BENCH_LABEL) }),
    ctx.docker.listNetworks({ filters: byKey(LABELS.managed) }),
    ctx.docker.listNetworks({ filters: byKey(BENCH_LABEL) }),
    ctx.docker.listVolumes({ filters: byKey(LABELS.managed) }),
  ]);
  const ids = <T>(xs: T[], id: (x: T) => string, labels: (x: T) => Record<string, string> | undefined) => [
    ...new Set(xs.filter((x) => ofRun(ctx, labels(x))).map(id)),
  ];
  return {
    containers: ids(
      [...cm, ...cb],
      (c) => c.Id,
      (c) => c.Labels,
    ),
    networks: ids(
      [...nm, ...nb],
      (n) => n.Id,
      (n) => n.Labels,
    ),
    volumes: ids(
      vols.Volumes ?? [],
      (v) => v.Name,
      (v) => v.Labels,
    ),
  };
}

export interface Leftovers {
  containers: number;
  networks: number;
  volumes: number;
}

/** how many containers, networks and volumes of this run are on the engine */
export async function countRunLeftovers(ctx: BenchContext): Promise<Leftovers> {
  const r = await runResources(ctx);
  return { containers: r.containers.length, networks: r.networks.length, volumes: r.volumes.length };
}

/** removes whatever container, network or volume of this run is left (containers before their networks) */
export async function removeRunLeftovers(ctx: BenchContext): Promise<void> {
  const r = await runResources(ctx);
  const quietly = (p: Promise<unknown>) => p.catch(() => undefined);
  await Promise.all(r.containers.map((id) => quietly(ctx.docker.getContainer(id).remove({ force: true, v: true }))));
  await Promise.all(r.networks.map((id) => quietly(ctx.docker.getNetwork(id).remove())));
  await Promise.all(r.volumes.map((name) => quietly(ctx.docker.getVolume(name).remove())));
}

/** `docker stats`' memory figure, from one stats sample: usage less the inactive file cache (cgroup v1 or v2) */
export function statsMemoryBytes(s: { memory_stats?: { usage?: number; stats?: Record<string, number> } }): number {
  const m = s.memory_stats ?? {};
  const cache = m.stats?.total_inactive_file ?? m.stats?.inactive_file ?? 0;
  return Math.max(0, (m.usage ?? 0) - cache);
}

/** the memory of the running env containers of `instance`, summed from the engine's stats (one sample each, 16 at a time) */
export async function envContainersMemory(ctx: BenchContext, instance: string): Promise<{ containers: number; mb: number }> {
  const list = await ctx.docker.listContainers({ filters: JSON.stringify({ label: [`${LABELS.instance}=${instance}`], status: ['running'] }) });
  let bytes = 0;
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < list.length) {
        const c = list[next++]!;
        const s = (await ctx.docker.getContainer(c.Id).stats({ stream: false, 'one-shot': true } as { stream: false })) as Parameters<
          typeof statsMemoryBytes
        >[0];
        bytes += statsMemoryBytes(s);
      }
    }),
  );
  return { containers: list.length, mb: bytes / 2 ** 20 };
}

/** the engine's own processes (by the names `ps` shows), their proportional set size in MB */
export interface EngineMemory {
  dockerd_mb: number;
  containerd_mb: number;
  /** one containerd-shim per running container */
  shims: number;
  shims_mb: number;
  total_mb: number;
}

/**
 * The memory of dockerd, containerd and the containerd shims on this machine (the engine runs
 * here), as PSS from /proc/<pid>/smaps_rollup: a page shared by N processes counts 1/N to each, so
 * the shims' common binary is counted once, not once per shim as a sum of RSS would (VmRSS where
 * smaps_rollup cannot be read). It counts every engine process on the machine, so the bench reads
 * it idle and with all envs live and reports the difference.
 */
export function engineMemory(): EngineMemory {
  const r = { dockerd_mb: 0, containerd_mb: 0, shims: 0, shims_mb: 0, total_mb: 0 };
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    let name: string;
    let kb: number;
    try {
      name = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
      if (name !== 'dockerd' && name !== 'containerd' && !name.startsWith('containerd-shim')) continue;
      kb = pssKb(pid);
    } catch {
      continue; // gone meanwhile
    }
    const mb = kb / 1024;
    if (name === 'dockerd') r.dockerd_mb += mb;
    else if (name === 'containerd') r.containerd_mb += mb;
    else {
      r.shims++;
      r.shims_mb += mb;
    }
    r.total_mb += mb;
  }
  return r;
}

function pssKb(pid: string): number {
  try {
    return Number(/^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0);
  } catch {
    return Number(/^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  }
}
