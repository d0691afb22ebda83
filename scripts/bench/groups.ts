/**
 * The groups run (--phases groups): a GRPO trainer's resets over a dataset whose tasks each have
 * their own env. A bundle of `tasks` envs (the fixture's env under as many names, each its own
 * image, a task of each) is served with --warm-pool `pool` at --max-concurrent-envs `cap`; each
 * task gets a group of `size` resets, each arriving at a random moment within `staggerMs` of the
 * group's start, a new group starting every `gapMs` (several groups overlap, as a rollout step's
 * prompts do). Every episode is reset, list_tools, end_turn. Played with --warm-pool-group `size`
 * and again with it off (1), on fresh servers in the same run; before each, `warm` single resets
 * one at a time of a task whose env the full pool holds (the baseline: a warm reset's latency on
 * that server). Figures: reset p50/p95 over every group reset, of the groups' first and later
 * resets, the hit rate, and the warm p95 beside them.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BenchContext } from './context.js';
import { finishEpisode, startEpisode, startServer, waitPool, type BenchServer } from './server.js';
import { percentile } from './stats.js';

const FIXTURE = fileURLToPath(new URL('../../test/fixtures/fixture-v1', import.meta.url));

export interface GroupsLoad {
  tasks: number;
  size: number;
  staggerMs: number;
  gapMs: number;
  pool: number;
  cap: number;
  warm: number;
}

export interface GroupsRun {
  group: number;
  resets: number;
  hits: number;
  reset_p50_s: number;
  reset_p95_s: number;
  first_p95_s: number;
  later_p95_s: number;
  warm_p50_s: number;
  warm_p95_s: number;
  /** group reset p95 over the warm reset p95 of the same server */
  p95_vs_warm: number;
  wall_s: number;
}

/** the fixture bundle with `n` envs g0…g{n-1} (the fixture's env, each its own build) and a task `grp-i` of each as its train split */
export function groupsBundle(n: number): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-groups-'));
  cpSync(FIXTURE, dir, { recursive: true });
  const manifest = JSON.parse(readFileSync(path.join(dir, 'bundle.json'), 'utf8'));
  manifest.name = `fixture-groups-${n}`;
  const row = JSON.parse(readFileSync(path.join(dir, 'tasks/eval.jsonl'), 'utf8').trim().split('\n')[0]!);
  const rows: string[] = [];
  for (let i = 0; i < n; i++) {
    const env = `g${i}`;
    cpSync(path.join(dir, 'envs/echo'), path.join(dir, `envs/${env}`), { recursive: true });
    manifest.envs[env] = { ...manifest.envs.echo, build: `envs/${env}` };
    manifest.toolsets[env] = { ...manifest.toolsets.echo, env };
    rows.push(JSON.stringify({ ...row, task_id: `grp-${i}`, toolset: env }));
  }
  writeFileSync(path.join(dir, 'bundle.json'), JSON.stringify(manifest, null, 2));
  writeFileSync(path.join(dir, 'tasks/train.jsonl'), rows.join('\n') + '\n');
  return dir;
}

const s3 = (ms: number) => Number((ms / 1000).toFixed(3));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** warm single resets, one at a time, each of a task whose env the pool holds ready */
async function warmResets(s: BenchServer, n: number): Promise<number[]> {
  const out: number[] = [];
  while (out.length < n) {
    const h = (await (await fetch(`${s.url}/health`)).json()) as { pool: { by_env: Record<string, { ready: number }> } };
    const env = Object.entries(h.pool.by_env).find(([name, v]) => /^g\d+$/.test(name) && v.ready > 0)?.[0];
    if (!env) {
      await sleep(100);
      continue;
    }
    const e = await startEpisode(s.url, `grp-${env.slice(1)}`);
    await finishEpisode(e.client);
    if (e.timings.pooled === true) out.push(e.resetMs);
  }
  return out;
}

/** one run on a fresh server with --warm-pool-group `group` */
export async function groupsRun(ctx: BenchContext, bundle: string, load: GroupsLoad, group: number): Promise<GroupsRun> {
  const name = `groups-${group}`;
  const s = await startServer(
    ctx,
    name,
    ['--max-concurrent-envs', String(load.cap), '--warm-pool', String(load.pool), '--warm-pool-group', String(group), '--max-waiting', '4096'],
    { bundle },
  );
  try {
    await waitPool(ctx, s, load.pool, `${name}: pool fill`);
    const warm = await warmResets(s, load.warm);
    await waitPool(ctx, s, load.pool, `${name}: pool refill`);
    ctx.progress(`  ${name}: ${load.tasks} groups of ${load.size}, each within ${load.staggerMs} ms, one every ${load.gapMs} ms`);
    const t0 = performance.now();
    const groups = Array.from({ length: load.tasks }, async (_, g) => {
      await sleep(g * load.gapMs);
      const offsets = Array.from({ length: load.size }, () => Math.random() * load.staggerMs).sort((a, b) => a - b);
      return Promise.all(
        offsets.map(async (at, i) => {
          await sleep(at);
          const e = await startEpisode(s.url, `grp-${g}`);
          await finishEpisode(e.client);
          return { ms: e.resetMs, pooled: e.timings.pooled === true, first: i === 0 };
        }),
      );
    });
    const all = (await Promise.all(groups)).flat();
    const ms = all.map((r) => r.ms);
    const p95 = percentile(ms, 95);
    const warmP95 = percentile(warm, 95);
    return {
      group,
      resets: all.length,
      hits: all.filter((r) => r.pooled).length,
      reset_p50_s: s3(percentile(ms, 50)),
      reset_p95_s: s3(p95),
      first_p95_s: s3(
        percentile(
          all.filter((r) => r.first).map((r) => r.ms),
          95,
        ),
      ),
      later_p95_s: s3(
        percentile(
          all.filter((r) => !r.first).map((r) => r.ms),
          95,
        ),
      ),
      warm_p50_s: s3(percentile(warm, 50)),
      warm_p95_s: s3(warmP95),
      p95_vs_warm: Number((p95 / warmP95).toFixed(1)),
      wall_s: Number(((performance.now() - t0) / 1000).toFixed(1)),
    };
  } finally {
    await s.stop();
  }
}

/** both runs (groups on, then off) over one bundle, removed after */
export async function groupsPhase(ctx: BenchContext, load: GroupsLoad): Promise<{ load: GroupsLoad; on: GroupsRun; off: GroupsRun }> {
  const bundle = groupsBundle(load.tasks);
  try {
    const on = await groupsRun(ctx, bundle, load, load.size);
    const off = await groupsRun(ctx, bundle, load, 1);
    return { load, on, off };
  } finally {
    rmSync(bundle, { recursive: true, force: true });
  }
}

export function printGroups(r: { load: GroupsLoad; on: GroupsRun; off: GroupsRun }): void {
  const l = r.load;
  console.log(
    `\n| ${l.tasks} groups of ${l.size} resets of one task (its own env), each within ${l.staggerMs} ms, one group every ${l.gapMs} ms; --warm-pool ${l.pool}, --max-concurrent-envs ${l.cap} | hits | reset p50 | p95 | first of group p95 | later p95 | warm reset p50 / p95 (same server) | p95 / warm p95 |`,
  );
  console.log('|---|---|---|---|---|---|---|---|');
  for (const x of [r.on, r.off]) {
    const label = x.group > 1 ? `--warm-pool-group ${x.group}` : '--warm-pool-group 1 (off)';
    console.log(
      `| ${label} | ${x.hits}/${x.resets} | ${x.reset_p50_s} s | ${x.reset_p95_s} s | ${x.first_p95_s} s | ${x.later_p95_s} s | ${x.warm_p50_s} / ${x.warm_p95_s} s | ${x.p95_vs_warm}× |`,
    );
  }
}
