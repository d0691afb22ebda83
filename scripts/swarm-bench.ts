/**
 * The burst benchmark of the swarm backend on the swarm lab (scripts/swarm-lab.sh), with 1 node and
 * then with 3: per configuration the lab comes up with that many nodes, the server runs as a
 * container on the manager n1 (scripts/lib/swarm-lab.ts, as the swarm tests run it) with
 * --max-concurrent-envs B, B resets are sent at once, every episode is deleted, and the lab goes
 * down. Needs root and the lab's tools (see the script).
 *
 *   npm run bench:swarm                    # B = 64
 *   npm run bench:swarm -- --burst 32 --nodes 1,3
 *
 * The bench bundle is a copy of test/fixtures/fixture-v1 whose env reserves little (memory_mb 64,
 * cpus 0.02), so B envs fit the nodes' reservations, and whose deploy_timeout_s is 600 s, so a
 * slow deploy is measured rather than failed. Writes bench-results/swarm-burst.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  fixtureCopy,
  footprint,
  lab,
  LAB_PROBLEM,
  prepareServerImage,
  removeServers,
  REPO,
  runningContainers,
  startServer,
  type LabServer,
} from './lib/swarm-lab.js';
import { percentile, seconds } from './bench/stats.js';

const { values } = parseArgs({ options: { burst: { type: 'string', default: '64' }, nodes: { type: 'string', default: '1,3' } } });
const BURST = Number(values.burst);
const CONFIGS = values.nodes.split(',').map(Number);
if (!Number.isInteger(BURST) || BURST < 1 || CONFIGS.some((n) => !Number.isInteger(n) || n < 1 || n > 9)) {
  console.error('usage: tsx scripts/swarm-bench.ts [--burst N] [--nodes 1,3]');
  process.exit(2);
}
if (LAB_PROBLEM) {
  console.error(`the swarm lab cannot run here: ${LAB_PROBLEM}`);
  process.exit(1);
}

interface Result {
  nodes: number;
  burst: number;
  started: number;
  failed: Array<string | number>;
  resetP50Ms: number | null;
  resetP95Ms: number | null;
  resetMaxMs: number | null;
  /** from the first request to the last episode started (201) */
  lastStartedS: number | null;
  /** from the first DELETE to nothing of the instance left on any node */
  teardownS: number;
  perNode: Record<string, number>;
  labUpS: number;
  imageS: number;
  serverReadyS: number;
  configS: number;
}

const secs = (ms: number) => seconds(ms, 1);

async function burst(
  server: LabServer,
  n: number,
): Promise<{ results: Array<{ ms: number; status: number; id?: string; reason?: string; at: number }>; t0: number }> {
  const t0 = performance.now();
  const results = await Promise.all(
    Array.from({ length: n }, async () => {
      const started = performance.now();
      const r = await server.call('POST', '/episodes', { task_id: 'fx-echo-0' });
      const at = performance.now();
      return {
        ms: at - started,
        status: r.status,
        id: r.body?.episode_id as string | undefined,
        reason: (r.body?.failure?.reason ?? r.body?.error) as string | undefined,
        at,
      };
    }),
  );
  return { results, t0 };
}

async function runConfig(nodes: number, bundleDir: string): Promise<Result> {
  const began = performance.now();
  await lab('down', 9);
  let t = performance.now();
  await lab('up', nodes);
  const labUpS = secs(performance.now() - t);
  t = performance.now();
  await prepareServerImage();
  const imageS = secs(performance.now() - t);
  t = performance.now();
  const server = await startServer({
    instance: `bench-${nodes}n`,
    port: 18600 + nodes,
    bundleDir,
    args: ['--max-concurrent-envs', String(BURST), '--reset-timeout', '900'],
  });
  const serverReadyS = secs(performance.now() - t);
  console.error(`[bench] ${nodes} node(s): lab up ${labUpS} s, server image ${imageS} s, server ready ${serverReadyS} s; ${BURST} resets at once…`);
  try {
    const { results, t0 } = await burst(server, BURST);
    const ok = results.filter((r) => r.status === 201 && r.id);
    const ms = ok.map((r) => r.ms);
    // where the tasks ran, while every episode is still live
    const f = await footprint(server.instance, nodes);
    const perNode = Object.fromEntries(Object.entries(f.containers).map(([k, v]) => [k, v.length]));
    t = performance.now();
    await Promise.all(ok.map((r) => server.call('DELETE', `/episodes/${r.id}`)));
    for (;;) {
      const left = await footprint(server.instance, nodes);
      if (left.services.length + left.networks.length + left.tasks.length + runningContainers(left) === 0) break;
      if (performance.now() - t > 600_000) throw new Error(`teardown not done after 600 s: ${JSON.stringify(left)}`);
      await new Promise((r) => setTimeout(r, 1000));
    }
    const teardownS = secs(performance.now() - t);
    return {
      nodes,
      burst: BURST,
      started: ok.length,
      failed: results.filter((r) => r.status !== 201).map((r) => r.reason ?? r.status),
      resetP50Ms: ms.length ? Math.round(percentile(ms, 50)) : null,
      resetP95Ms: ms.length ? Math.round(percentile(ms, 95)) : null,
      resetMaxMs: ms.length ? Math.round(Math.max(...ms)) : null,
      lastStartedS: ok.length ? secs(Math.max(...ok.map((r) => r.at)) - t0) : null,
      teardownS,
      perNode,
      labUpS,
      imageS,
      serverReadyS,
      configS: secs(performance.now() - began),
    };
  } finally {
    await removeServers().catch(() => {});
    await lab('down', 9);
  }
}

const bundle = fixtureCopy((manifest) => {
  manifest.envs.echo.resources.memory_mb = 64;
  manifest.envs.echo.resources.cpus = 0.02;
  manifest.envs.echo.deploy_timeout_s = 600;
});
const out: Result[] = [];
try {
  for (const nodes of CONFIGS) {
    const r = await runConfig(nodes, bundle.dir);
    console.error(`[bench] ${nodes} node(s): ${JSON.stringify(r)}`);
    out.push(r);
  }
} finally {
  bundle.cleanup();
  await lab('down', 9).catch(() => {});
}

const row = (cells: Array<string | number>) => `| ${cells.join(' | ')} |`;
console.log(
  `\nSwarm burst: ${BURST} resets at once, cap ${BURST}, fixture env (memory_mb 64, cpus 0.02); ${cpus().length} CPUs, ${Math.round(totalmem() / 2 ** 30)} GiB, every node on this one machine\n`,
);
console.log(row(['nodes', 'started', 'failed', 'reset p50', 'reset p95', 'reset max', 'last episode started', 'teardown', 'envs per node', 'whole run']));
console.log(row(Array(10).fill('---')));
for (const r of out) {
  const s = (ms: number | null) => (ms === null ? '-' : `${(ms / 1000).toFixed(1)} s`);
  console.log(
    row([
      r.nodes,
      r.started,
      r.failed.length ? `${r.failed.length} ${JSON.stringify(r.failed)}` : 0,
      s(r.resetP50Ms),
      s(r.resetP95Ms),
      s(r.resetMaxMs),
      r.lastStartedS === null ? '-' : `${r.lastStartedS} s`,
      `${r.teardownS} s`,
      Object.values(r.perNode).join(' / '),
      `${r.configS} s`,
    ]),
  );
}
mkdirSync(join(REPO, 'bench-results'), { recursive: true });
const file = join(REPO, 'bench-results/swarm-burst.json');
writeFileSync(file, JSON.stringify({ date: new Date().toISOString(), cpus: cpus().length, burst: BURST, results: out }, null, 2) + '\n');
console.log(`\nwrote ${file}`);
