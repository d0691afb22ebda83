/**
 * What an ended episode cost, on real Docker: the env container's cgroup figures and writable
 * layer, read before its removal. An env that burns a known amount of CPU, allocates a known amount
 * of memory and writes a known number of bytes reports at least each of them (the cgroup counts
 * every process of the container, and the runtime's own, so the figures are floors, not equalities);
 * a plain env reports less of each. The console's transcript carries the same figures. A reading
 * from the engine's stats alone (a server that cannot see the host's cgroup files) tells the same
 * kinds of figure; how long each way takes is printed (it delays the final observation and the
 * removal).
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Dockerode from 'dockerode';
import { afterAll, describe, expect, it } from 'vitest';
import { EpisodeCostSchema } from '../../src/protocol/observations.js';
import { readContainerUsage } from '../../src/sandbox/engine/usage.js';
import { LABELS } from '../../src/sandbox/sandbox.js';
import { waitFor } from '../../scripts/lib/wait.js';
import { http as call } from '../routes/http.js';
import { describeDocker } from '../support/docker.js';
import { FIXTURE_BUNDLE, suiteServer, type TestServer } from '../support/docker-server.js';

const docker = new Dockerode();
const MiB = 1024 * 1024;
/** what the costly env does at start: CPU seconds, MB held, MB written to its layer */
const BURN_S = 1;
const HOLD_MB = 64;
const WRITE_MB = 32;

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** the fixture bundle, its echo env burning, holding and writing at start */
function costlyBundle(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'openenv-cost-'));
  dirs.push(dir);
  cpSync(FIXTURE_BUNDLE, dir, { recursive: true });
  const file = path.join(dir, 'bundle.json');
  const manifest = JSON.parse(readFileSync(file, 'utf8'));
  manifest.envs.echo.resources.memory_mb = 256;
  manifest.envs.echo.environment = { ECHO_BURN_CPU_S: String(BURN_S), ECHO_ALLOCATE_MB: String(HOLD_MB), ECHO_WRITE_MB: String(WRITE_MB) };
  writeFileSync(file, JSON.stringify(manifest, null, 2));
  return dir;
}

/** plays a task to its end; the ending observation's cost, and the env container's id while it ran */
async function play(s: TestServer): Promise<{ id: string; cost: any; containerId: string }> {
  const started = await call(s.url, 'POST', '/episodes', { task_id: 'fx-echo-0' });
  expect(started.status, JSON.stringify(started.body)).toBe(201);
  const id = started.body.episode_id as string;
  const [c] = await docker.listContainers({ filters: { label: [`${LABELS.episode}=${id}`] } });
  const end = await call(s.url, 'POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'finish_now', arguments: { score: 1 } });
  expect(end.body).toMatchObject({ done: true, reward: 1 });
  const cost = end.body.observation.metadata.cost;
  expect(EpisodeCostSchema.parse(cost)).toEqual(cost);
  return { id, cost, containerId: c!.Id };
}

describeDocker('what an episode cost, on Docker', () => {
  const plain = suiteServer({ maxConcurrentEnvs: 1 });
  const costly = suiteServer({ maxConcurrentEnvs: 1 }, { bundle: costlyBundle() });

  it('an env that burns CPU, holds memory and writes reports at least that much of each; a plain one less', async () => {
    const a = await play(costly);
    console.log(`[cost] costly env (burns ${BURN_S} CPU s, holds ${HOLD_MB} MB, writes ${WRITE_MB} MB): ${JSON.stringify(a.cost)}`);
    expect(a.cost.cpu_s).toBeGreaterThanOrEqual(BURN_S);
    expect(a.cost.peak_memory_bytes).toBeGreaterThanOrEqual(HOLD_MB * MiB);
    expect(a.cost.bytes_written).toBeGreaterThanOrEqual(WRITE_MB * MiB);
    // it was deployed at least as long as it took to burn its CPU at its 0.5 CPUs
    expect(a.cost.wall_s).toBeGreaterThanOrEqual(BURN_S / 0.5);

    const b = await play(plain);
    console.log(`[cost] plain env: ${JSON.stringify(b.cost)}`);
    expect(b.cost.cpu_s).toBeGreaterThan(0);
    expect(b.cost.cpu_s).toBeLessThan(a.cost.cpu_s);
    expect(b.cost.peak_memory_bytes).toBeGreaterThan(0);
    expect(b.cost.peak_memory_bytes).toBeLessThan(a.cost.peak_memory_bytes);
    expect(b.cost.bytes_written).toBeLessThan(WRITE_MB * MiB);

    // the console carries the same figures, once the teardown is done
    for (const [s, e] of [
      [costly, a],
      [plain, b],
    ] as const) {
      await waitFor(
        async () => (await call(s.url, 'GET', `/console/episodes/${e.id}`)).body.phase === 'done' && s.app.openenv.manager.list().length === 0,
        30_000,
        'the teardown',
      );
      expect((await call(s.url, 'GET', `/console/episodes/${e.id}`)).body.cost).toEqual(e.cost);
    }
  });

  describe('one reading', () => {
    it("from the host's cgroup files and from the engine's stats alone: both tell CPU and memory (how long each takes is printed)", async () => {
      const started = await call(plain.url, 'POST', '/episodes', { task_id: 'fx-echo-0' });
      const id = started.body.episode_id as string;
      try {
        const [c] = await docker.listContainers({ filters: { label: [`${LABELS.episode}=${id}`] } });
        for (const hostFiles of [true, false]) {
          const ms: number[] = [];
          for (let i = 0; i < 5; i++) {
            const t0 = performance.now();
            const r = await readContainerUsage(docker, c!.Id, new AbortController().signal, { hostFiles });
            ms.push(performance.now() - t0);
            expect(r.cpuS).toBeGreaterThan(0);
            expect(r.peakMemoryBytes).toBeGreaterThan(0);
            expect(r.bytesWritten).toBeGreaterThanOrEqual(0);
          }
          ms.sort((x, y) => x - y);
          const how = hostFiles ? "the host's cgroup files + an inspect with size" : "the engine's stats (one-shot) + an inspect with size";
          console.log(`[cost] one reading from ${how}: median ${ms[2]!.toFixed(1)} ms, max ${ms[4]!.toFixed(1)} ms over 5`);
        }
      } finally {
        await call(plain.url, 'DELETE', `/episodes/${id}`);
      }
    });
  });
});
