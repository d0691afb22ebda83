/**
 * The bench's baselines, taken in the same run on the same engine: bare containers of the image
 * the server deploys, through the engine API as the server uses it (create, start, address,
 * readiness, removal), with no server in between. Each carries the label `bench=<run>`.
 */
import type Dockerode from 'dockerode';
import { LABELS } from '../../src/sandbox/sandbox.js';
import { waitFor } from '../lib/wait.js';
import { WsClient } from '../lib/ws-client.js';
import type { BenchContext } from './context.js';
import { DeployLimiter } from '../../src/episodes/capacity/deploy-limiter.js';
import { burst, sustained, type SustainedRate } from './load.js';
import { BENCH_TASK, type BenchServer } from './server.js';
import { seconds, summarizeBurst, type BurstSummary } from './stats.js';

/** exec create + start + read to the end + inspect: what any exec-based call costs; its milliseconds */
export async function bareExec(container: Dockerode.Container, cmd: string[]): Promise<number> {
  const started = performance.now();
  const exec = await container.exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true, Tty: false });
  const stream = await exec.start({ hijack: true, stdin: false });
  await new Promise<void>((resolve, reject) => {
    stream.on('data', () => {});
    stream.on('end', resolve);
    stream.on('error', reject);
  });
  const info = await exec.inspect();
  if (info.ExitCode !== 0) throw new Error(`the bare exec of ${JSON.stringify(cmd)} exited ${info.ExitCode}`);
  return performance.now() - started;
}

/** the image the server itself deploys (its content-hash tag), read off an env container it started */
export async function envImage(ctx: BenchContext, s: BenchServer): Promise<string> {
  const c = await WsClient.open(s.url);
  await c.reset({ task_id: BENCH_TASK });
  const [ctr] = await ctx.docker.listContainers({ filters: JSON.stringify({ label: [`${LABELS.instance}=${s.instance}`] }) });
  await c.close();
  if (!ctr) throw new Error(`no env container of the server ${s.instance}`);
  return ctr.Image;
}

/** a bare start's stages in ms, named as the server's docker sandbox names its deploy's (`ready`: the address, then /health answering) */
export interface BareStages {
  create: number;
  start: number;
  ready: number;
}

/** a bare container of the image: create, start, its address, readiness (the env's /health answering) */
async function bareStart(ctx: BenchContext, image: string, network?: string): Promise<{ id: string; ip: string; stagesMs: BareStages }> {
  const t0 = performance.now();
  const c = await ctx.docker.createContainer({
    Image: image,
    Env: ['PORT=8000'],
    Labels: { bench: ctx.run },
    HostConfig: { Memory: 128 * 1024 * 1024, NanoCpus: 5e8, PidsLimit: 64, ...(network ? { NetworkMode: network } : {}) },
  });
  const created = performance.now();
  await c.start();
  const started = performance.now();
  const info = await c.inspect();
  const ip = Object.values(info.NetworkSettings.Networks)[0]!.IPAddress;
  const health = `http://${ip}:8000/health`;
  await waitFor(
    () =>
      fetch(health, { signal: AbortSignal.timeout(1000) }).then(
        async (r) => {
          await r.arrayBuffer();
          return r.ok;
        },
        () => false,
      ),
    120_000,
    `${health} answering`,
    15,
  );
  return { id: c.id, ip, stagesMs: { create: created - t0, start: started - created, ready: performance.now() - started } };
}

async function bareRemove(ctx: BenchContext, id: string): Promise<void> {
  await ctx.docker.getContainer(id).remove({ force: true, v: true });
}

/**
 * Where a sustained baseline's containers run: `default-bridge`, Docker's own; `premade`, an
 * internal bridge per worker slot made before the clock starts and removed after it stops (so
 * concurrent containers never share a bridge, as the server's episodes never do, but no network
 * is made or removed on the timed path: what a stock of networks made ahead aims at); `fresh`, a
 * new internal bridge per container, made before it starts and removed after it, as the server
 * does without a stock.
 */
export type BareNetworks = 'default-bridge' | 'premade' | 'fresh';

/** `subnet`: its own, where the engine's default pools (about 30 networks) would run out */
function bareNetwork(ctx: BenchContext, name: string, subnet?: string) {
  return ctx.docker.createNetwork({
    Name: `${ctx.run}-${name}`,
    Driver: 'bridge',
    Internal: true,
    Labels: { bench: ctx.run },
    ...(subnet ? { IPAM: { Config: [{ Subnet: subnet }] } } : {}),
  });
}

/** the subnets of a bare burst's networks made beforehand: k of 10.217.0.0/16 in /28s, apart from the server's pool and the tests' */
const BARE_BURST_SUBNET = (k: number) => `10.217.${k >> 4}.${(k & 15) * 16}/28`;

/**
 * Bare run/rm at the server's parallelism, each container reset once, on `networks`; with
 * `startsAtOnce`, at most that many containers between create and readiness at a time (what the
 * server's --max-concurrent-deploys does to its deploys: on a busy engine fewer starts at once can
 * go faster, so the bench takes both and compares the server with the faster)
 */
export async function sustainedBare(
  ctx: BenchContext,
  image: string,
  load: { episodes: number; concurrency: number },
  networks: BareNetworks,
  startsAtOnce = Infinity,
): Promise<SustainedRate> {
  // the server's own deploy limiter, so the baseline holds its starts as the server holds its deploys
  const starts = new DeployLimiter({ limit: startsAtOnce });
  const premade = networks === 'premade' ? await allOrNone(Array.from({ length: load.concurrency }, (_, slot) => bareNetwork(ctx, `slot${slot}`))) : [];
  try {
    const what = `sustained, bare run/rm (${networks}${startsAtOnce < Infinity ? `, ${startsAtOnce} starts at once` : ''})`;
    return await sustained(ctx, what, load, async (k, slot) => {
      const fresh = networks === 'fresh' ? await bareNetwork(ctx, `n${k}`) : null;
      const { id, ip } = await starts.run(() => bareStart(ctx, image, fresh?.id ?? premade[slot]?.id), { priority: 'reset' });
      await fetch(`http://${ip}:8000/reset`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ task_id: BENCH_TASK, data: {}, seed: null }),
      }).then((r) => r.arrayBuffer());
      await bareRemove(ctx, id);
      if (fresh) await fresh.remove();
    });
  } finally {
    // a failed run may leave a container on its slot's network: the run's leftovers sweep removes
    // both, and the run's own error is the one to see
    await Promise.all(premade.map((n) => n.remove().catch(() => undefined)));
  }
}

/** `size` bare starts + readiness at once (each one's time from the start of the burst), then all removed at once; `stages_s`: each stage's mean */
export async function burstBare(
  ctx: BenchContext,
  image: string,
  size: number,
  networks: 'default-bridge' | 'premade' = 'default-bridge',
): Promise<BurstSummary & { remove_s: number; stages_s: Record<keyof BareStages, number> }> {
  // premade: an internal network per container, made before the clock starts (as the server's network stock)
  const premade = networks === 'premade' ? await allOrNone(Array.from({ length: size }, (_, k) => bareNetwork(ctx, `burst${k}`, BARE_BURST_SUBNET(k)))) : [];
  const { results: runs } = await burst(ctx, `bare burst of ${size} (${networks})`, size, async (t0, k) => {
    const r = await bareStart(ctx, image, premade[k]?.id);
    return { ...r, ms: performance.now() - t0 };
  });
  const r0 = performance.now();
  await Promise.all(runs.map((r) => bareRemove(ctx, r.id)));
  const removeS = seconds(performance.now() - r0);
  await Promise.all(premade.map((n) => n.remove()));
  return {
    ...summarizeBurst(
      runs.map((r) => r.ms),
      Math.max(...runs.map((r) => r.ms)),
      0,
    ),
    remove_s: removeS,
    stages_s: {
      create: meanS(runs.map((r) => r.stagesMs.create)),
      start: meanS(runs.map((r) => r.stagesMs.start)),
      ready: meanS(runs.map((r) => r.stagesMs.ready)),
    },
  };
}

/**
 * every network made, or none left: when one creation fails, waits for the others (a rejection
 * alone would leave those still in flight to land after the run's leftovers sweep) and removes them
 */
async function allOrNone(making: Array<Promise<Dockerode.Network>>): Promise<Dockerode.Network[]> {
  const made = await Promise.allSettled(making);
  const failed = made.find((m): m is PromiseRejectedResult => m.status === 'rejected');
  if (!failed) return made.map((m) => (m as PromiseFulfilledResult<Dockerode.Network>).value);
  await Promise.all(made.map((m) => (m.status === 'fulfilled' ? m.value.remove().catch(() => undefined) : undefined)));
  throw failed.reason;
}

const meanS = (ms: number[]) => seconds(ms.reduce((a, b) => a + b, 0) / Math.max(1, ms.length));
