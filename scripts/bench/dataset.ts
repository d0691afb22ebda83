/**
 * The bench's dataset phase (--phases dataset): a Harbor dataset of --dataset-tasks tasks with an
 * image each (the synthetic dataset, scripts/lib/synthetic-dataset.ts), served from an engine that
 * has none of its images, against the bare work of the same size in the same run:
 *
 *   (a) bare: a second dataset of the same shape (another seed, so the engine's layer cache holds
 *       nothing of the server's), every image built through the engine API at
 *       --image-build-concurrency at once (one built alone first: a single image's bare build
 *       time), then every task run --dataset-concurrency at once as a bare exec-based runner
 *       would: create (its image, kept alive by its own `sleep`) on a network made beforehand,
 *       start, the solution (one exec), the tests copied in and run (one exec), the reward read,
 *       remove. Bare total = build all + run all.
 *   (b) the server: `openenv-bundle import harbor` of the first dataset, `dist/serve.js` on it
 *       (whatever --images mode is its default), timed from spawn to /health ready; at once one
 *       episode of the last task (the last its builds would reach), timed from its reset to its
 *       reward; then one episode of every other task, --dataset-concurrency at once (the golden
 *       solution in one `bash` call, `end_turn`, reward 1 each): the total from spawn to the last
 *       reward. Then --dataset-cold-resets more episodes of tasks whose images are built, one at a
 *       time (a cold episode's time, for the first episode's target).
 *
 * Targets (issue 40): /health within 10 s of start; the first episode within a bare build of one
 * image + 1.2× a cold episode; every task once within 1.2× of bare build + run. Everything it
 * makes carries the run's labels or its bundle's name; the images of both datasets are removed at
 * the end (they are the run's own: nothing else builds them).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type Dockerode from 'dockerode';
import * as tar from 'tar';
import { demuxLog } from '../../src/sandbox/engine/logs.js';
import { LABELS } from '../../src/sandbox/sandbox.js';
import { forEachAtMost } from '../../src/util/work-pool.js';
import { syntheticTaskId, writeSyntheticDataset } from '../lib/synthetic-dataset.js';
import { WsClient } from '../lib/ws-client.js';
import type { BenchContext } from './context.js';
import { bareExec } from './baselines.js';
import { startServer, type BenchServer } from './server.js';
import { percentile, round, seconds } from './stats.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = path.join(ROOT, 'dist/cli/openenv-bundle.js');
/** the golden solution of every synthetic task, as one bash call */
const SOLVE = "awk '{ s += $1 } END { print s }' /app/numbers.txt > /app/answer.txt";

export interface DatasetLoad {
  tasks: number;
  /** episodes (and bare runs) at once */
  concurrency: number;
  /** images built at once, bare and by the server (--image-build-concurrency) */
  buildConcurrency: number;
  coldResets: number;
  /** the local Debian base the synthetic tasks build FROM (docker/make-local-debian-base.sh) */
  debianImage: string;
  /** besides the bench's own: e.g. --images prebuilt is not meant here (nothing is built ahead) */
  serverArgs: string[];
}

export interface DatasetFigures {
  tasks: number;
  concurrency: number;
  build_concurrency: number;
  bare: { one_build_s: number; build_all_s: number; run_all_s: number; total_s: number; run_p50_s: number };
  server: {
    import_s: number;
    health_ready_s: number;
    first_episode_s: number;
    all_episodes_s: number;
    cold_episode_p50_s: number;
    rewards_1: number;
  };
  ratios: { all_over_bare: number; first_over_build_plus_cold: number };
  targets: { health_within_10s: boolean; first_episode: boolean; all_episodes: boolean };
}

/** every image of a dataset folder's tasks, built bare at `limit` at once; the seconds each took */
async function buildBare(ctx: BenchContext, dir: string, ids: string[], limit: number): Promise<{ tags: string[]; seconds: number[] }> {
  const tags = ids.map((id) => `${ctx.run}-bare-${id}:latest`);
  const took: number[] = [];
  await forEachAtMost(ids, limit, async (id, i) => {
    const started = performance.now();
    const stream = await ctx.docker.buildImage(
      { context: path.join(dir, id, 'environment'), src: ['Dockerfile', 'numbers.txt'] },
      { t: tags[i], labels: { bench: ctx.run }, rm: true, forcerm: true, networkmode: 'none' },
    );
    await new Promise<void>((resolve, reject) =>
      ctx.docker.modem.followProgress(stream, (err: Error | null, out: Array<{ error?: string }>) => {
        const failed = err ?? out.find((o) => o.error);
        if (failed) reject(new Error(`bare build of ${id}: ${err?.message ?? (failed as { error: string }).error}`));
        else resolve();
      }),
    );
    took.push(performance.now() - started);
  });
  return { tags, seconds: took.map((ms) => ms / 1000) };
}

/** one bare run of a task: create on `network`, start, the solution, the tests, the reward read, remove; its ms */
async function runBare(ctx: BenchContext, image: string, taskDir: string, network: string): Promise<number> {
  const started = performance.now();
  const container = await ctx.docker.createContainer({
    Image: image,
    Cmd: ['sh', '-c', 'exec sleep 2147483647'],
    WorkingDir: '/app',
    Labels: { bench: ctx.run },
    HostConfig: { NetworkMode: network },
  });
  try {
    await container.start();
    await bareExec(container, ['bash', '-c', SOLVE]);
    await bareExec(container, ['mkdir', '-p', '/logs/verifier', '/tests']);
    await container.putArchive(tar.c({ cwd: path.join(taskDir, 'tests'), portable: true }, ['.']) as unknown as NodeJS.ReadableStream, { path: '/tests' });
    await bareExec(container, ['bash', '/tests/test.sh']);
    const reward = await readReward(container);
    if (reward !== '1') throw new Error(`the bare run of ${taskDir} scored ${JSON.stringify(reward)}, not 1`);
  } finally {
    await container.remove({ force: true });
  }
  return performance.now() - started;
}

async function readReward(container: Dockerode.Container): Promise<string> {
  const exec = await container.exec({ Cmd: ['cat', '/logs/verifier/reward.txt'], AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  const chunks: Buffer[] = [];
  await new Promise<void>((resolve, reject) => {
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', resolve);
    stream.on('error', reject);
  });
  return demuxLog(Buffer.concat(chunks)).trim();
}

/** one episode of a synthetic task: reset, the golden solution, end_turn; its ms, reward 1 required */
async function playTask(s: BenchServer, taskId: string): Promise<number> {
  const started = performance.now();
  const client = await WsClient.open(s.url);
  try {
    const reset = await client.reset({ task_id: taskId }, 900_000);
    if (reset.type !== 'observation') throw new Error(`reset of ${taskId}: ${JSON.stringify(reset).slice(0, 400)}`);
    const solved = await client.call('bash', { command: SOLVE });
    if (solved.type !== 'observation' || solved.data.done) throw new Error(`the solution of ${taskId}: ${JSON.stringify(solved).slice(0, 400)}`);
    const end = await client.call('end_turn', {});
    if (end.type !== 'observation' || end.data.reward !== 1) throw new Error(`${taskId} ended without reward 1: ${JSON.stringify(end).slice(0, 400)}`);
  } finally {
    await client.close().catch(() => undefined);
  }
  return performance.now() - started;
}

/** removes the images labelled with `label` (the bare ones, or the server's of one bundle) */
async function removeImages(ctx: BenchContext, label: string): Promise<number> {
  const images = await ctx.docker.listImages({ filters: JSON.stringify({ label: [label] }) });
  await forEachAtMost(images, 4, async (img) => {
    await ctx.docker
      .getImage(img.Id)
      .remove({ force: true })
      .catch(() => undefined);
  });
  return images.length;
}

export async function datasetPhase(ctx: BenchContext, load: DatasetLoad): Promise<DatasetFigures> {
  const out = mkdtempSync(path.join(tmpdir(), 'bench-dataset-'));
  const bundleName = `${ctx.run}-dataset`;
  const serverLabel = `${LABELS.bundle}=${bundleName}`;
  const bareLabel = `bench=${ctx.run}`;
  // seeds of this run only: no image of either dataset can be on the engine yet
  const seed = Date.now() % 1_000_000_000;
  const served = path.join(out, 'served');
  const bare = path.join(out, 'bare');
  const single = path.join(out, 'single');
  const bundle = path.join(out, 'bundle');
  let server: BenchServer | null = null;
  let network: string | null = null;
  try {
    ctx.progress(`dataset: writing two datasets of ${load.tasks} task(s)`);
    const ids = await writeSyntheticDataset({ count: load.tasks, out: served, base: load.debianImage, seed });
    await writeSyntheticDataset({ count: load.tasks, out: bare, base: load.debianImage, seed: seed + 1 });
    await writeSyntheticDataset({ count: 1, out: single, base: load.debianImage, seed: seed + 2 });

    // (a) bare
    ctx.progress('dataset: bare, one image alone');
    const one = await buildBare(ctx, single, [syntheticTaskId(0)], 1);
    ctx.progress(`dataset: bare, ${load.tasks} image(s), ${load.buildConcurrency} at once`);
    const buildStarted = performance.now();
    const built = await buildBare(ctx, bare, ids, load.buildConcurrency);
    const buildAllMs = performance.now() - buildStarted;
    network = `${ctx.run}-dataset`;
    await ctx.docker.createNetwork({ Name: network, Driver: 'bridge', Internal: true, Labels: { bench: ctx.run } });
    ctx.progress(`dataset: bare, ${load.tasks} run(s), ${load.concurrency} at once`);
    const runStarted = performance.now();
    const runs: number[] = [];
    await forEachAtMost(ids, load.concurrency, async (id, i) => {
      runs.push(await runBare(ctx, built.tags[i]!, path.join(bare, id), network!));
    });
    const runAllMs = performance.now() - runStarted;

    // (b) the server
    ctx.progress('dataset: importing the served dataset');
    const importStarted = performance.now();
    execFileSync(process.execPath, [CLI, 'import', 'harbor', served, '--out', bundle, '--name', bundleName], { stdio: ['ignore', 'ignore', 'inherit'] });
    const importMs = performance.now() - importStarted;
    ctx.progress('dataset: serving it');
    const spawned = performance.now();
    server = await startServer(
      ctx,
      'dataset',
      [
        '--max-concurrent-envs',
        String(load.concurrency),
        '--image-build-concurrency',
        String(load.buildConcurrency),
        '--max-waiting',
        String(load.tasks + 16),
        ...load.serverArgs,
      ],
      { bundle },
    );
    const healthMs = performance.now() - spawned;
    const last = ids[ids.length - 1]!;
    ctx.progress(`dataset: /health ready after ${seconds(healthMs)} s; first episode (${last})`);
    const firstMs = await playTask(server, last);
    let done = 1;
    const rest = ids.slice(0, -1);
    await forEachAtMost(rest, load.concurrency, async (id) => {
      await playTask(server!, id);
      if (++done % 50 === 0) ctx.progress(`dataset: ${done} of ${ids.length} episodes scored`);
    });
    const allMs = performance.now() - spawned;
    const cold: number[] = [];
    for (let i = 0; i < load.coldResets; i++) cold.push(await playTask(server, ids[i % ids.length]!));

    const bareTotalS = (buildAllMs + runAllMs) / 1000;
    const coldP50S = percentile(cold, 50) / 1000;
    const figures: DatasetFigures = {
      tasks: load.tasks,
      concurrency: load.concurrency,
      build_concurrency: load.buildConcurrency,
      bare: {
        one_build_s: round(one.seconds[0]!),
        build_all_s: seconds(buildAllMs),
        run_all_s: seconds(runAllMs),
        total_s: round(bareTotalS),
        run_p50_s: seconds(percentile(runs, 50)),
      },
      server: {
        import_s: seconds(importMs),
        health_ready_s: seconds(healthMs),
        first_episode_s: seconds(firstMs),
        all_episodes_s: seconds(allMs),
        cold_episode_p50_s: round(coldP50S),
        rewards_1: ids.length + load.coldResets,
      },
      ratios: {
        all_over_bare: round(allMs / 1000 / bareTotalS),
        first_over_build_plus_cold: round(firstMs / 1000 / (one.seconds[0]! + 1.2 * coldP50S)),
      },
      targets: { health_within_10s: healthMs <= 10_000, first_episode: false, all_episodes: false },
    };
    figures.targets.first_episode = figures.ratios.first_over_build_plus_cold <= 1;
    figures.targets.all_episodes = figures.ratios.all_over_bare <= 1.2;
    return figures;
  } finally {
    await server?.stop();
    if (network)
      await ctx.docker
        .getNetwork(network)
        .remove()
        .catch(() => undefined);
    const removed = (await removeImages(ctx, bareLabel)) + (await removeImages(ctx, serverLabel));
    ctx.progress(`dataset: removed ${removed} image(s) of the run`);
    rmSync(out, { recursive: true, force: true });
  }
}

export function printDataset(f: DatasetFigures): void {
  const yes = (b: boolean) => (b ? 'met' : 'missed');
  console.log(`\n## Dataset: ${f.tasks} Harbor tasks, an image each (${f.concurrency} episodes at once, ${f.build_concurrency} builds at once)\n`);
  console.log('| figure | bare | server | ratio | target |');
  console.log('|---|---|---|---|---|');
  console.log(`| start to /health ready | | ${f.server.health_ready_s} s | | ≤ 10 s: ${yes(f.targets.health_within_10s)} |`);
  console.log(
    `| first episode (its image not built) | one build ${f.bare.one_build_s} s + 1.2 × cold episode ${f.server.cold_episode_p50_s} s | ${f.server.first_episode_s} s | ${f.ratios.first_over_build_plus_cold}× | ≤ 1×: ${yes(f.targets.first_episode)} |`,
  );
  console.log(
    `| every task once | build ${f.bare.build_all_s} s + run ${f.bare.run_all_s} s = ${f.bare.total_s} s | ${f.server.all_episodes_s} s | ${f.ratios.all_over_bare}× | ≤ 1.2×: ${yes(f.targets.all_episodes)} |`,
  );
  console.log(`\nimport ${f.server.import_s} s (not in the server's time); a bare run's p50 ${f.bare.run_p50_s} s; rewards of 1: ${f.server.rewards_1}`);
}
