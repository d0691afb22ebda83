/**
 * The Docker backend's reading of what an env container used, from the engine's answers as cgroup
 * v1 and v2 engines give them (shapes of Docker 20.10 and later), and from a host's cgroup files
 * (v1 and v2 layouts, in a fake tree): CPU from the cgroup's total,
 * peak memory only where the engine reports one, bytes written the larger of the block devices'
 * writes and the writable layer, a stopped container's zeros as unknown, a missing answer as null.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ContainerExec, ExecRequest, OutputHandlers } from '../../../src/sandbox/container-exec.js';
import { cgroupV2Peak, hostCgroup, hostPids, usageOf } from '../../../src/sandbox/engine/usage.js';

describe('usageOf', () => {
  it('cgroup v1: max_usage is the peak; blkio Write entries (not Total) are device writes', () => {
    const stats = {
      cpu_stats: { cpu_usage: { total_usage: 2_500_000_000 } },
      memory_stats: { usage: 50_000_000, max_usage: 90_000_000 },
      blkio_stats: {
        io_service_bytes_recursive: [
          { major: 8, minor: 0, op: 'Read', value: 7 },
          { major: 8, minor: 0, op: 'Write', value: 4_000_000 },
          { major: 8, minor: 16, op: 'Write', value: 1_000_000 },
          { major: 8, minor: 0, op: 'Total', value: 5_000_007 },
        ],
      },
    };
    expect(usageOf(stats, { SizeRw: 3_000_000 })).toEqual({ cpuS: 2.5, peakMemoryBytes: 90_000_000, bytesWritten: 5_000_000 });
    // a layer holding more than reached the devices (writes still buffered) says more
    expect(usageOf(stats, { SizeRw: 9_000_000 }).bytesWritten).toBe(9_000_000);
  });

  it('cgroup v2: no peak reported (the usage now is no peak); lower-case ops', () => {
    const stats = {
      cpu_stats: { cpu_usage: { total_usage: 1_000_000 } },
      memory_stats: { usage: 50_000_000 },
      blkio_stats: { io_service_bytes_recursive: [{ major: 8, minor: 0, op: 'write', value: 123 }] },
    };
    expect(usageOf(stats, { SizeRw: 0 })).toEqual({ cpuS: 0.001, peakMemoryBytes: null, bytesWritten: 123 });
  });

  it('a container that no longer runs: zeros and empty figures are unknown, not zero; its layer still counts', () => {
    const stopped = { cpu_stats: { cpu_usage: { total_usage: 0 } }, memory_stats: {}, blkio_stats: { io_service_bytes_recursive: null } };
    expect(usageOf(stopped, { SizeRw: 4096 })).toEqual({ cpuS: null, peakMemoryBytes: null, bytesWritten: 4096 });
  });

  it('an answer that did not come is null', () => {
    expect(usageOf(null, null)).toEqual({ cpuS: null, peakMemoryBytes: null, bytesWritten: null });
    expect(usageOf(null, { SizeRw: 10 })).toEqual({ cpuS: null, peakMemoryBytes: null, bytesWritten: 10 });
  });
});

describe('cgroupV2Peak', () => {
  /** an exec that answers `out` with exit code `code` (or fails to start) */
  const execOf = (out: string | Error, code = 0): ContainerExec =>
    ({
      id: 'c',
      start: async (_req: ExecRequest, h: OutputHandlers) => {
        if (out instanceof Error) throw out;
        setImmediate(() => {
          h.stdout(Buffer.from(out));
          h.end();
        });
        return { write() {}, pause() {}, resume() {}, close() {}, exitCode: async () => code };
      },
    }) as unknown as ContainerExec;

  it("reads the container's own memory.peak; anything else is null", async () => {
    const signal = new AbortController().signal;
    expect(await cgroupV2Peak(execOf('73400320\n'), signal)).toBe(73400320);
    expect(await cgroupV2Peak(execOf('cat: /sys/fs/cgroup/memory.peak: No such file or directory\n', 1), signal)).toBeNull();
    expect(await cgroupV2Peak(execOf('max\n'), signal)).toBeNull();
    expect(await cgroupV2Peak(execOf(new Error('container not running')), signal)).toBeNull();
    expect(await cgroupV2Peak(execOf('1'), AbortSignal.abort())).toBeNull();
  });
});

describe('hostCgroup', () => {
  /** a fake /proc and /sys/fs/cgroup under a temporary folder */
  function tree(files: Record<string, string>): string {
    const root = mkdtempSync(path.join(os.tmpdir(), 'openenv-cgroup-'));
    dirs.push(root);
    for (const [f, text] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(root, f)), { recursive: true });
      writeFileSync(path.join(root, f), text);
    }
    return root;
  }
  const dirs: string[] = [];
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('cgroup v1: cpuacct.usage, memory.max_usage_in_bytes, blkio Write lines', async () => {
    const r = tree({
      'proc/42/cgroup': '4:memory:/docker/abc\n7:blkio:/docker/abc\n2:cpuacct:/docker/abc\n1:cpu:/docker/abc\n0::/docker/abc\n',
      'cg/cpuacct/docker/abc/cpuacct.usage': '1500000000\n',
      'cg/memory/docker/abc/memory.max_usage_in_bytes': '73400320\n',
      'cg/blkio/docker/abc/blkio.throttle.io_service_bytes': '8:0 Read 10\n8:0 Write 4096\n8:16 Write 1024\n8:0 Total 5130\nTotal 5130\n',
    });
    expect(await hostCgroup(42, `${r}/cg`, `${r}/proc`)).toEqual({ cpuS: 1.5, peakMemoryBytes: 73400320, deviceWrites: 5120 });
  });

  it('cgroup v2: cpu.stat usage_usec, memory.peak, io.stat wbytes', async () => {
    const r = tree({
      'proc/42/cgroup': '0::/system.slice/docker-abc.scope\n',
      'cg/system.slice/docker-abc.scope/cpu.stat': 'usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n',
      'cg/system.slice/docker-abc.scope/memory.peak': '1048576\n',
      'cg/system.slice/docker-abc.scope/io.stat': '8:0 rbytes=1 wbytes=300 rios=1 wios=2\n8:16 rbytes=0 wbytes=700 rios=0 wios=1\n',
    });
    expect(await hostCgroup(42, `${r}/cg`, `${r}/proc`)).toEqual({ cpuS: 2.5, peakMemoryBytes: 1048576, deviceWrites: 1000 });
  });

  it('files it cannot read are null; a process it cannot see is no answer', async () => {
    const r = tree({ 'proc/42/cgroup': '0::/system.slice/docker-abc.scope\n', 'cg/system.slice/docker-abc.scope/cpu.stat': 'usage_usec 10\n' });
    expect(await hostCgroup(42, `${r}/cg`, `${r}/proc`)).toEqual({ cpuS: 0.00001, peakMemoryBytes: null, deviceWrites: null });
    expect(await hostCgroup(43, `${r}/cg`, `${r}/proc`)).toBeNull();
    // a path outside the reader's cgroup namespace is not followed
    const out = tree({ 'proc/42/cgroup': '0::/../docker-abc.scope\n' });
    expect(await hostCgroup(42, `${out}/cg`, `${out}/proc`)).toBeNull();
  });

  it("hostPids: the container's process count and limit, v1 (pids hierarchy) and v2; no limit or no files is no answer", async () => {
    const v1 = tree({
      'proc/42/cgroup': '8:pids:/docker/abc\n4:memory:/docker/abc\n0::/\n',
      'cg/pids/docker/abc/pids.current': '63\n',
      'cg/pids/docker/abc/pids.max': '64\n',
    });
    expect(await hostPids(42, `${v1}/cg`, `${v1}/proc`)).toEqual({ current: 63, max: 64 });
    const v2 = tree({
      'proc/42/cgroup': '0::/system.slice/docker-abc.scope\n',
      'cg/system.slice/docker-abc.scope/pids.current': '5\n',
      'cg/system.slice/docker-abc.scope/pids.max': '256\n',
    });
    expect(await hostPids(42, `${v2}/cg`, `${v2}/proc`)).toEqual({ current: 5, max: 256 });
    const unlimited = tree({ 'proc/42/cgroup': '0::/a\n', 'cg/a/pids.current': '5\n', 'cg/a/pids.max': 'max\n' });
    expect(await hostPids(42, `${unlimited}/cg`, `${unlimited}/proc`)).toBeNull();
    expect(await hostPids(43, `${v2}/cg`, `${v2}/proc`)).toBeNull();
  });
});
