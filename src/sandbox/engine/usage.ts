/**
 * What a Docker env container has used, read once as its episode ends (the Sandbox's `usage`
 * part). An inspect with its writable layer's size (`GET /containers/{id}/json?size=1`) gives the
 * layer and the container's main process; the cgroup figures come from the first of:
 *
 * 1. the container's cgroup files on this host (`/proc/<its pid>/cgroup` names them), when the
 *    server runs beside the engine and sees them: some microseconds;
 * 2. the engine's stats (`GET /containers/{id}/stats?stream=false&one-shot=true`), asked at once
 *    beside the inspect: the engine's stats collector answers at its next tick, up to about a
 *    second later (Docker 20.10, measured), within the reading's bound (EPISODE_COST_READ_MS).
 *
 * - CPU: the cgroup's total (cgroup v1 `cpuacct.usage`, v2 `cpu.stat` usage_usec, the engine's
 *   `cpu_stats.cpu_usage.total_usage`): every process of the container since its start;
 * - peak memory: the cgroup's high-water mark (v1 `memory.max_usage_in_bytes`, the engine's
 *   `memory_stats.max_usage`, page cache included; v2 `memory.peak`, Linux 5.19 and later). An
 *   engine on cgroup v2 reports no peak in its stats, so where the host's files cannot be read the
 *   container's own `/sys/fs/cgroup/memory.peak` is read by an exec of `cat` in it: null where that
 *   fails too (no `cat` in the image, an older kernel, gVisor);
 * - bytes written: the larger of what the cgroup wrote to block devices (v1 blkio, v2 io.stat
 *   wbytes, the engine's `blkio_stats` write entries) and the writable layer's size (SizeRw):
 *   buffered writes reach the devices late, deleted files leave the layer, so each alone can say
 *   less than was written;
 * - a container that no longer runs (it crashed, the kernel killed it) has no cgroup left: CPU and
 *   memory are null, its layer is still measured.
 *
 * A figure whose source failed, or had not answered when `signal` aborted, is null.
 */
import { readFile } from 'node:fs/promises';
import type Dockerode from 'dockerode';
import type { ContainerExec, ExecProcess } from '../container-exec.js';
import { DockerContainerExec } from '../engine/docker-exec.js';
import type { EnvUsageReading } from '../sandbox.js';

/** the most of memory.peak's answer read (a number and a newline) */
const PEAK_MAX_BYTES = 64;
const CGROUP_ROOT = '/sys/fs/cgroup';

interface ContainerStats {
  cpu_stats?: { cpu_usage?: { total_usage?: number } };
  memory_stats?: { max_usage?: number; usage?: number };
  blkio_stats?: { io_service_bytes_recursive?: { op?: string; value?: number }[] | null };
}

interface Inspected {
  SizeRw?: number;
  State?: { Running?: boolean; Pid?: number };
}

/** the cgroup's own figures (null: not known from there) */
export interface CgroupFigures {
  cpuS: number | null;
  peakMemoryBytes: number | null;
  deviceWrites: number | null;
}

/** `hostFiles` false: the engine's figures only, as a server that cannot see the host's cgroup files gets them */
export async function readContainerUsage(
  docker: Dockerode,
  containerId: string,
  signal: AbortSignal,
  opts: { hostFiles?: boolean; toolbox?: string | null } = {},
): Promise<EnvUsageReading> {
  const hostFiles = opts.hostFiles ?? true;
  const c = docker.getContainer(containerId);
  const asking = new AbortController();
  const stop = () => asking.abort();
  signal.addEventListener('abort', stop, { once: true });
  try {
    // dockerode passes both queries on to the engine (its types know neither `one-shot` nor `size`)
    const stats = settle(
      (c.stats as (o: object) => Promise<unknown>).call(c, { stream: false, 'one-shot': true, abortSignal: asking.signal }) as Promise<ContainerStats>,
      asking.signal,
    );
    const info = await settle((c.inspect as (o: object) => Promise<unknown>).call(c, { size: true, abortSignal: signal }) as Promise<Inspected>, signal);
    const layer = typeof info?.SizeRw === 'number' && info.SizeRw >= 0 ? info.SizeRw : null;
    const pid = info?.State?.Running ? info.State.Pid : undefined;
    const host = pid && hostFiles ? await hostCgroup(pid) : null;
    if (host && host.cpuS !== null && host.peakMemoryBytes !== null) return withLayer(host, layer);
    if (info && !info.State?.Running) return { cpuS: null, peakMemoryBytes: null, bytesWritten: layer };
    const usage = usageOf(await stats, info);
    // cgroup v2 with no host files to read: the running container's own peak, from inside
    if (usage.peakMemoryBytes === null && usage.cpuS !== null)
      usage.peakMemoryBytes = await cgroupV2Peak(new DockerContainerExec(docker, containerId, opts.toolbox ?? null), signal);
    return usage;
  } finally {
    signal.removeEventListener('abort', stop);
    stop();
  }
}

function withLayer(f: CgroupFigures, layer: number | null): EnvUsageReading {
  const bytesWritten = f.deviceWrites === null && layer === null ? null : Math.max(f.deviceWrites ?? 0, layer ?? 0);
  return { cpuS: f.cpuS, peakMemoryBytes: f.peakMemoryBytes, bytesWritten };
}

/** the cgroup paths of process `pid` by controller ('' for cgroup v2's unified one), or null when they cannot be read */
async function cgroupPaths(pid: number, proc: string): Promise<Map<string, string> | null> {
  let text: string;
  try {
    text = await readFile(`${proc}/${pid}/cgroup`, 'utf8');
  } catch {
    return null;
  }
  // hierarchy-id:controllers:path
  const paths = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^\d+:([^:]*):(\/.*)$/.exec(line.trim());
    if (!m || m[2]!.includes('..')) continue;
    for (const ctl of m[1]!.split(',')) paths.set(ctl, m[2]!);
  }
  return paths;
}

const read = (file: string) => readFile(file, 'utf8').catch(() => null);
const int = (t: string | null) => (t !== null && /^\d+$/.test(t.trim()) ? Number(t.trim()) : null);

/**
 * The cgroup figures of the process `pid` from this host's cgroup files (v1 or v2), or null when
 * they cannot be read here (the server in a container of its own, another host's engine).
 */
export async function hostCgroup(pid: number, root = CGROUP_ROOT, proc = '/proc'): Promise<CgroupFigures | null> {
  const paths = await cgroupPaths(pid, proc);
  if (paths === null) return null;
  if (paths.has('memory')) {
    // cgroup v1: one hierarchy per controller
    const at = (ctl: string, file: string) => (paths.has(ctl) ? read(`${root}/${ctl}${paths.get(ctl)}/${file}`) : Promise.resolve(null));
    const [cpu, peak, io] = await Promise.all([
      at('cpuacct', 'cpuacct.usage'),
      at('memory', 'memory.max_usage_in_bytes'),
      at('blkio', 'blkio.throttle.io_service_bytes'),
    ]);
    const ns = int(cpu);
    return { cpuS: ns === null ? null : ns / 1e9, peakMemoryBytes: int(peak), deviceWrites: io === null ? null : sumLines(io, /^\S+ Write (\d+)$/) };
  }
  const unified = paths.get('');
  if (unified === undefined) return null;
  const dir = `${root}${unified === '/' ? '' : unified}`;
  const [cpu, peak, io] = await Promise.all([read(`${dir}/cpu.stat`), read(`${dir}/memory.peak`), read(`${dir}/io.stat`)]);
  const usec = cpu === null ? null : /^usage_usec (\d+)$/m.exec(cpu)?.[1];
  return {
    cpuS: usec === null || usec === undefined ? null : Number(usec) / 1e6,
    peakMemoryBytes: int(peak),
    deviceWrites: io === null ? null : sumLines(io, /\bwbytes=(\d+)/),
  };
}

/**
 * How many processes the container of process `pid` holds against its pids limit, from its
 * cgroup's files on this host (v1 `pids/…/pids.current` and `pids.max`, v2 the unified ones):
 * null when they cannot be read (the server in a container of its own, another host's engine)
 * or there is no limit.
 */
export async function hostPids(pid: number, root = CGROUP_ROOT, proc = '/proc'): Promise<{ current: number; max: number } | null> {
  const paths = await cgroupPaths(pid, proc);
  if (paths === null) return null;
  const v1 = paths.get('pids');
  const unified = paths.get('');
  const dir = v1 !== undefined ? `${root}/pids${v1 === '/' ? '' : v1}` : unified !== undefined ? `${root}${unified === '/' ? '' : unified}` : null;
  if (dir === null) return null;
  const [current, max] = await Promise.all([read(`${dir}/pids.current`), read(`${dir}/pids.max`)]);
  const c = int(current);
  const m = int(max);
  return c === null || m === null ? null : { current: c, max: m };
}

/** the sum of the first group of `re` over the lines of `text` */
function sumLines(text: string, re: RegExp): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = re.exec(line.trim());
    if (m) sum += Number(m[1]);
  }
  return sum;
}

/** The figures from what the engine answered (either answer may be missing). */
export function usageOf(s: ContainerStats | null, info: { SizeRw?: number } | null): EnvUsageReading {
  const cpuNs = s?.cpu_stats?.cpu_usage?.total_usage;
  // a stopped container's stats are all zero: no process ran in it as far as they say
  const cpuS = typeof cpuNs === 'number' && cpuNs > 0 ? cpuNs / 1e9 : null;
  const peak = s?.memory_stats?.max_usage;
  const peakMemoryBytes = typeof peak === 'number' && peak > 0 ? peak : null;
  const blkio = s?.blkio_stats?.io_service_bytes_recursive;
  const deviceWrites = Array.isArray(blkio)
    ? blkio.filter((e) => e.op?.toLowerCase() === 'write' && typeof e.value === 'number').reduce((a, e) => a + e.value!, 0)
    : null;
  const layer = typeof info?.SizeRw === 'number' && info.SizeRw >= 0 ? info.SizeRw : null;
  return withLayer({ cpuS, peakMemoryBytes, deviceWrites }, layer);
}

/** the answer, or null when the call failed or `signal` aborted first */
function settle<T>(p: Promise<T>, signal: AbortSignal): Promise<T | null> {
  const answered = p.catch(() => null);
  if (signal.aborted) return Promise.resolve(null);
  return Promise.race([answered, new Promise<null>((r) => signal.addEventListener('abort', () => r(null), { once: true }))]);
}

/** the container's cgroup v2 memory.peak, read by `cat` in it; null when that fails or `signal` aborts first */
export async function cgroupV2Peak(exec: ContainerExec, signal: AbortSignal): Promise<number | null> {
  // read by the toolbox's cat, never the image's: a process of the env could report anything
  if (signal.aborted || exec.toolbox === null) return null;
  const toolbox = exec.toolbox;
  let proc: ExecProcess | null = null;
  let out = '';
  const ended = new Promise<boolean>((resolve) => {
    signal.addEventListener('abort', () => resolve(false), { once: true });
    exec
      .start(
        { cmd: [toolbox, 'cat', '/sys/fs/cgroup/memory.peak'], user: '0' },
        {
          stdout: (c) => {
            if (out.length < PEAK_MAX_BYTES) out += c.toString('latin1');
          },
          stderr: () => {},
          end: (e) => resolve(e === undefined),
        },
      )
      .then(
        (p) => (proc = p),
        () => resolve(false),
      );
  });
  try {
    if (!(await ended)) return null;
    const code = await (proc as ExecProcess | null)?.exitCode();
    const n = Number(out.trim());
    return code === 0 && /^\d+$/.test(out.trim()) && n > 0 ? n : null;
  } catch {
    return null;
  } finally {
    (proc as ExecProcess | null)?.close();
  }
}
