/**
 * The bench's shell phase (--phases shell): the built-in shell toolset against bare dockerode
 * calls of the same work, in the same run on the same engine.
 *
 *   (a) `bash` call latency: --shell-calls calls of `echo hello` through the persistent shell
 *       (ShellToolset: one line written, read to the end line, the state file applied) against a
 *       bare exec of the same command (exec create, start, read to the end, inspect for the exit
 *       code: what any exec-based shell pays at least), alternating on one container of the
 *       Debian base, created as the sandbox creates a shell env's (createEnvContainer).
 *   (b) cold shell reset: --shell-resets resets, one at a time, of a task of the shipped Harbor
 *       dataset imported by the built CLI and served by `dist/serve.js` (no pool: the server
 *       deploys its container on a stocked network, waits until an exec answers, prepares the
 *       first turn), against a bare loop on a network made beforehand: create (the task's own
 *       image, its command replaced by the image's own `sh -c 'exec sleep …'`), start, exec until
 *       one answers (timed to here), remove. Alternating too.
 *
 * Everything it makes carries the run's labels (engine.ts counts and removes what is left).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createEnvContainer } from '../../src/sandbox/docker/containers.js';
import { findToolboxBinary, ToolboxVolume } from '../../src/sandbox/engine/toolbox-volume.js';
import { silentLogger } from '../../src/sandbox/engine/logger.js';
import { newToolboxDir, toolboxBinary } from '../../src/sandbox/toolbox.js';
import { DockerContainerExec, ShellToolset } from '../../src/tools/shell/index.js';
import { LABELS } from '../../src/sandbox/sandbox.js';
import { parsePrometheusText, valueOf } from '../lib/prom-text.js';
import { waitFor } from '../lib/wait.js';
import type { BenchContext } from './context.js';
import { startEpisode, startServer, type BenchServer } from './server.js';
import { bareExec } from './baselines.js';
import { pair, percentile, round, type Pair } from './stats.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = path.join(ROOT, 'dist/cli/openenv-bundle.js');
const DATASET = path.join(ROOT, 'datasets/openenv-harbor-v1');
/** the served task whose resets are timed: one of the shipped dataset's */
const RESET_TASK = 'word-frequency';
const COMMAND = 'echo hello';
/** what a bare exec-based server would run to keep a container up: the image's own sh and sleep */
const BARE_KEEP_ALIVE = ['sh', '-c', 'exec sleep 2147483647'];

export interface ShellLoad {
  calls: number;
  resets: number;
  /** the local Debian base the dataset builds FROM (docker/make-local-debian-base.sh) */
  debianImage: string;
}

export interface ShellFigures {
  bash: { command: string; calls: number; bare_exec: Pair; bash_call: Pair; ratio_p50: number; ratio_p95: number };
  reset: { task: string; image: string; resets: number; bare: Pair; server: Pair; ratio_p50: number; ratio_p95: number };
}

/** an internal network of the run's, as the server's episode networks are */
async function runNetwork(ctx: BenchContext, name: string): Promise<string> {
  const full = `${ctx.run}-${name}`;
  await ctx.docker.createNetwork({ Name: full, Driver: 'bridge', Internal: true, Labels: { bench: ctx.run } });
  return full;
}

async function bashCall(shell: ShellToolset): Promise<number> {
  const started = performance.now();
  const r = await shell.call('bash', { command: COMMAND });
  if (r.kind !== 'reply' || r.reply.result.exit_code !== 0) throw new Error(`the bash call failed: ${JSON.stringify(r)}`);
  return performance.now() - started;
}

async function bashLatency(ctx: BenchContext, load: ShellLoad): Promise<ShellFigures['bash']> {
  const network = await runNetwork(ctx, 'shell-calls');
  const instance = `${ctx.run}-shell-calls`;
  const arch = ((await ctx.docker.info()) as { Architecture?: string }).Architecture ?? '';
  const toolbox = new ToolboxVolume(ctx.docker, instance, await findToolboxBinary(undefined, arch), silentLogger);
  const dir = newToolboxDir();
  let id: string | null = null;
  try {
    const container = await createEnvContainer(
      ctx.docker,
      { instance, bundle: 'bench-shell', episode: 'calls', env: 'shell' },
      {
        name: 'shell',
        image: load.debianImage,
        port: 0,
        readyPath: '/',
        deployTimeoutMs: 60_000,
        resources: { memoryMb: 512, cpus: 1, pids: 256 },
        environment: {},
        kind: 'shell',
        workdir: '/app',
      },
      { id: network, name: network, subnet: null as never },
      undefined,
      { toolbox: { volume: await toolbox.ensure(), dir } },
    );
    id = container.id;
    await container.start();
    const shell = new ShellToolset(new DockerContainerExec(ctx.docker, id, toolboxBinary(dir)), { workdir: '/app', user: '0:0' });
    const cmd = ['bash', '-c', COMMAND];
    for (let i = 0; i < 10; i++) {
      await bareExec(container, cmd);
      await bashCall(shell);
    }
    const bare: number[] = [];
    const viaShell: number[] = [];
    for (let i = 0; i < load.calls; i++) {
      // alternate which goes first, so neither always follows the other
      if (i % 2 === 0) {
        bare.push(await bareExec(container, cmd));
        viaShell.push(await bashCall(shell));
      } else {
        viaShell.push(await bashCall(shell));
        bare.push(await bareExec(container, cmd));
      }
    }
    await shell.close();
    return {
      command: COMMAND,
      calls: load.calls,
      bare_exec: pair(bare),
      bash_call: pair(viaShell),
      ratio_p50: round(percentile(viaShell, 50) / percentile(bare, 50)),
      ratio_p95: round(percentile(viaShell, 95) / percentile(bare, 95)),
    };
  } finally {
    if (id) await ctx.docker.getContainer(id).remove({ force: true, v: true });
    await ctx.docker.getNetwork(network).remove();
    await toolbox.remove();
  }
}

/** create, start, exec until one answers (the milliseconds to here), remove */
async function bareShellReset(ctx: BenchContext, image: string, network: string): Promise<number> {
  const started = performance.now();
  const c = await ctx.docker.createContainer({
    Image: image,
    Cmd: BARE_KEEP_ALIVE,
    Labels: { bench: ctx.run },
    HostConfig: { NetworkMode: network, Init: true, Memory: 512 * 1024 * 1024, NanoCpus: 1e9, PidsLimit: 256 },
  });
  try {
    await c.start();
    await waitFor(
      () =>
        bareExec(c, ['true']).then(
          () => true,
          () => false,
        ),
      60_000,
      'a bare shell container answering an exec',
      10,
    );
    return performance.now() - started;
  } finally {
    await c.remove({ force: true, v: true });
  }
}

async function teardowns(s: BenchServer): Promise<number> {
  return valueOf(parsePrometheusText(await s.metrics()), 'openenv_teardown_seconds_count', { outcome: 'ok' }) ?? 0;
}

/** one reset of RESET_TASK through the server (connect → first observation), then its teardown awaited */
async function servedShellReset(s: BenchServer): Promise<number> {
  const before = await teardowns(s);
  const e = await startEpisode(s.url, RESET_TASK);
  await e.client.close();
  await waitFor(async () => (await teardowns(s)) > before, 120_000, 'the shell episode torn down', 20);
  return e.resetMs;
}

async function coldReset(ctx: BenchContext, load: ShellLoad): Promise<ShellFigures['reset']> {
  const out = mkdtempSync(path.join(tmpdir(), 'bench-harbor-'));
  let server: BenchServer | null = null;
  const network = await runNetwork(ctx, 'shell-resets');
  try {
    const bundle = path.join(out, 'harbor-v1');
    execFileSync(process.execPath, [CLI, 'import', 'harbor', DATASET, '--out', bundle, '--base-image', `debian:bookworm=${load.debianImage}`], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    ctx.progress('shell: serving the imported dataset (its twelve images built or found)');
    server = await startServer(ctx, 'shell', ['--max-concurrent-envs', '2'], { bundle });
    // the first reset (not timed) also says which image the server deploys
    const first = await startEpisode(server.url, RESET_TASK);
    const [ctr] = await ctx.docker.listContainers({ filters: JSON.stringify({ label: [`${LABELS.instance}=${server.instance}`] }) });
    await first.client.close();
    if (!ctr) throw new Error(`no env container of the server ${server.instance}`);
    const image = ctr.Image;
    await bareShellReset(ctx, image, network);
    const bare: number[] = [];
    const served: number[] = [];
    for (let i = 0; i < load.resets; i++) {
      if (i % 2 === 0) {
        bare.push(await bareShellReset(ctx, image, network));
        served.push(await servedShellReset(server));
      } else {
        served.push(await servedShellReset(server));
        bare.push(await bareShellReset(ctx, image, network));
      }
    }
    return {
      task: RESET_TASK,
      image,
      resets: load.resets,
      bare: pair(bare),
      server: pair(served),
      ratio_p50: round(percentile(served, 50) / percentile(bare, 50)),
      ratio_p95: round(percentile(served, 95) / percentile(bare, 95)),
    };
  } finally {
    await server?.stop();
    await ctx.docker
      .getNetwork(network)
      .remove()
      .catch(() => undefined);
    rmSync(out, { recursive: true, force: true });
  }
}

export async function shellPhase(ctx: BenchContext, load: ShellLoad): Promise<ShellFigures> {
  ctx.progress(`shell: ${load.calls} bash calls against as many bare execs of \`${COMMAND}\`, alternating`);
  const bash = await bashLatency(ctx, load);
  ctx.progress(`  bash call p50 ${bash.bash_call.p50_ms} ms, bare exec p50 ${bash.bare_exec.p50_ms} ms`);
  ctx.progress(`shell: ${load.resets} cold resets of ${RESET_TASK} through the server against as many bare create/start/exec-ready/remove`);
  const reset = await coldReset(ctx, load);
  ctx.progress(`  served reset p50 ${reset.server.p50_ms} ms, bare p50 ${reset.bare.p50_ms} ms`);
  return { bash, reset };
}

export function printShell(f: ShellFigures): void {
  const { bash: b, reset: r } = f;
  console.log('');
  console.log(`Shell: built-in shell toolset against bare dockerode calls, same run (milliseconds)`);
  console.log('| run | p50 | p95 | ratio p50 | ratio p95 |');
  console.log('|---|---|---|---|---|');
  console.log(`| bare exec of \`${b.command}\` (${b.calls} calls) | ${b.bare_exec.p50_ms} | ${b.bare_exec.p95_ms} | 1x | 1x |`);
  console.log(`| \`bash\` call, persistent shell (${b.calls} calls) | ${b.bash_call.p50_ms} | ${b.bash_call.p95_ms} | ${b.ratio_p50}x | ${b.ratio_p95}x |`);
  console.log(`| bare create/start/exec-ready (${r.resets}, then removed) | ${r.bare.p50_ms} | ${r.bare.p95_ms} | 1x | 1x |`);
  console.log(`| cold shell reset, served ${r.task} (${r.resets}) | ${r.server.p50_ms} | ${r.server.p95_ms} | ${r.ratio_p50}x | ${r.ratio_p95}x |`);
}
