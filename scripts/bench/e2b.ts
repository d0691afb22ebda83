/**
 * The bench's e2b phase (--phases e2b): the server as an E2B provider, driven by the real `e2b`
 * SDK, against bare dockerode calls of the same work in the same run on the same engine:
 *
 *   (a) create to first command: `Sandbox.create(template)` then `commands.run('true')`, one at a
 *       time (--e2b-creates), against a bare loop doing what a sandbox's deploy does: an internal
 *       network of its own, the template's image created and started (its command a keep-alive),
 *       an exec until one answers, then the first command's exec (`bash -l -c true`); each
 *       removed after (not timed). Alternating.
 *   (b) `commands.run('echo hello')` latency (--e2b-calls) against a bare exec of the same
 *       command (`/bin/bash -l -c 'echo hello'`: exec create, start, read to the end, inspect) in
 *       the same sandbox's container, alternating.
 *   (c) file throughput: `files.write` of --e2b-file-mb MB (octet-stream) and `files.read` of it
 *       back, and the same requests with a plain fetch (the server's share without the SDK's own
 *       client-side copies), against the engine's archive calls of the same bytes into (putArchive
 *       of a one-file tar) and out of (getArchive, read to the end) the same container;
 *       --e2b-file-rounds each, alternating; MB/s at the median. Beside them, the client's share
 *       alone: the SDK's files.write and files.read and the plain fetch against a local HTTP
 *       server that only drains the upload and serves the bytes from memory (the SDK connected to
 *       it as its E2B_SANDBOX_URL): what the bytes' first hop costs this machine before the server
 *       does anything. And where each kind of transfer spends its CPU: the client (this process),
 *       the server, the engine's daemon with its archive helpers (from /proc, when the engine runs
 *       on this machine; a sandbox's own processes, and the engine's shim, are not counted).
 *
 * The server runs the e2b-v1 test bundle (the local Debian base with git, built at its start).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import type Dockerode from 'dockerode';
import { Sandbox } from 'e2b';
import { singleFileTar } from '../../src/sandbox/container-exec.js';
import { LABELS } from '../../src/sandbox/sandbox.js';
import type { BenchContext } from './context.js';
import { startServer, type BenchServer } from './server.js';
import { bareExec } from './baselines.js';
import { pair, percentile, round, type Pair } from './stats.js';

const BUNDLE = fileURLToPath(new URL('../../test/fixtures/e2b-v1', import.meta.url));
const TEMPLATE = 'debian-git';
const COMMAND = 'echo hello';
/** what the bare containers run: they must stay up, as the server's keeper keeps a sandbox's */
const KEEP_ALIVE = ['sh', '-c', 'exec sleep 2147483647'];

export interface E2bLoad {
  creates: number;
  calls: number;
  fileMb: number;
  fileRounds: number;
}

export interface E2bFigures {
  create: { creates: number; bare: Pair; sdk: Pair; ratio_p50: number; ratio_p95: number };
  command: { command: string; calls: number; bare_exec: Pair; sdk: Pair; ratio_p50: number; ratio_p95: number };
  files: {
    mb: number;
    rounds: number;
    /** sdk: through the SDK; http: the same requests with a plain fetch (the server's own share, without the SDK's client-side copies) */
    write_mb_s: {
      bare_put_archive: number;
      sdk: number;
      http: number;
      time_ratio: number;
      http_time_ratio: number;
      client_only: ClientOnly;
      cpu_ms: CpuOfRounds;
    };
    read_mb_s: {
      bare_get_archive: number;
      sdk: number;
      http: number;
      time_ratio: number;
      http_time_ratio: number;
      client_only: ClientOnly;
      cpu_ms: CpuOfRounds;
    };
  };
}

/** CPU ms per transfer (the mean over the rounds) of the bare archive call, the SDK's and the plain request's: who spent it */
interface CpuOfRounds {
  bare: CpuShare;
  sdk: CpuShare;
  http: CpuShare;
}

/** the client's share alone, against a local server that does nothing with the bytes: MB/s, and its time against the bare archive call's */
interface ClientOnly {
  sdk: number;
  http: number;
  sdk_time_ratio: number;
}

/** a local stand-in for envd's /files that drains an upload and answers a read with `bytes` from memory */
async function fileSink(bytes: Buffer): Promise<{ url: string; close(): void }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.method === 'POST')
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify([{ name: 'sink', type: 'file', path: '/sink' }]));
      else res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(bytes.length) }).end(bytes);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => server.close() };
}

/** a network of its own (internal, no host address: a sandbox's), the image started, an exec answering, the first command; the ms to there */
async function bareCreate(ctx: BenchContext, image: string, i: number): Promise<number> {
  const started = performance.now();
  const name = `${ctx.run}-e2b-bare-${i}`;
  const net = await ctx.docker.createNetwork({
    Name: name,
    Driver: 'bridge',
    Internal: true,
    Labels: { bench: ctx.run },
    Options: { 'com.docker.network.bridge.inhibit_ipv4': 'true' },
  });
  let c: Dockerode.Container | null = null;
  try {
    c = await ctx.docker.createContainer({
      Image: image,
      Cmd: KEEP_ALIVE,
      Labels: { bench: ctx.run },
      HostConfig: { NetworkMode: name, Memory: 1024 * 1024 * 1024, NanoCpus: 1e9, PidsLimit: 1024 },
    });
    await c.start();
    for (;;) {
      const ok = await bareExec(c, ['true']).then(
        () => true,
        () => false,
      );
      if (ok) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    await bareExec(c, ['/bin/bash', '-l', '-c', 'true']);
    return performance.now() - started;
  } finally {
    await c?.remove({ force: true, v: true });
    await net.remove().catch(() => undefined);
  }
}

async function sdkCreate(opts: Record<string, string>): Promise<number> {
  const started = performance.now();
  const sb = await Sandbox.create(TEMPLATE, { ...opts, timeoutMs: 600_000 });
  await sb.commands.run('true', { user: 'root' });
  const ms = performance.now() - started;
  await sb.kill();
  return ms;
}

async function containerOf(ctx: BenchContext, s: BenchServer, sandboxId: string): Promise<Dockerode.Container> {
  const [c] = await ctx.docker.listContainers({ filters: JSON.stringify({ label: [`${LABELS.instance}=${s.instance}`, `${LABELS.episode}=${sandboxId}`] }) });
  if (!c) throw new Error(`no container of sandbox ${sandboxId}`);
  return ctx.docker.getContainer(c.Id);
}

/** a process's CPU time so far (its own and its reaped children's, as the kernel counts it), ms; null where /proc does not say */
function procCpuMs(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // after the command's closing parenthesis: field 3 on; utime, stime, cutime, cstime are fields 14 to 17
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 1000) / 100;
  } catch {
    return null;
  }
}

/** the engine's daemon on this machine (its pid), when it runs here */
function dockerdPid(): number | undefined {
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/comm`, 'utf8').trim() === 'dockerd') return Number(d);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

/** CPU ms spent per round by the bench's process (the client), the server and the engine's daemon */
interface CpuShare {
  client: number;
  server: number | null;
  engine: number | null;
}

async function drain(stream: NodeJS.ReadableStream): Promise<number> {
  let n = 0;
  for await (const c of stream as AsyncIterable<Buffer>) n += c.length;
  return n;
}

export async function e2bPhase(ctx: BenchContext, load: E2bLoad): Promise<E2bFigures> {
  const s = await startServer(ctx, 'e2b', ['--max-concurrent-envs', '4'], { bundle: BUNDLE });
  const opts = { apiKey: `e2b_${'0'.repeat(40)}`, apiUrl: `${s.url}/e2b`, sandboxUrl: `${s.url}/e2b/envd` };
  try {
    // the first create (not timed) warms the server and says which image the template runs
    const first = await Sandbox.create(TEMPLATE, { ...opts, timeoutMs: 600_000 });
    const container = await containerOf(ctx, s, first.sandboxId);
    const image = (await container.inspect()).Config.Image;

    ctx.progress(`e2b: ${load.creates} creates to a first command through the SDK against as many bare network/create/start/exec loops, alternating`);
    await bareCreate(ctx, image, -1);
    const bare: number[] = [];
    const viaSdk: number[] = [];
    for (let i = 0; i < load.creates; i++) {
      if (i % 2 === 0) {
        bare.push(await bareCreate(ctx, image, i));
        viaSdk.push(await sdkCreate(opts));
      } else {
        viaSdk.push(await sdkCreate(opts));
        bare.push(await bareCreate(ctx, image, i));
      }
    }
    const create = {
      creates: load.creates,
      bare: pair(bare),
      sdk: pair(viaSdk),
      ratio_p50: round(percentile(viaSdk, 50) / percentile(bare, 50)),
      ratio_p95: round(percentile(viaSdk, 95) / percentile(bare, 95)),
    };
    ctx.progress(`  create to first command p50 ${create.sdk.p50_ms} ms, bare p50 ${create.bare.p50_ms} ms`);

    ctx.progress(`e2b: ${load.calls} commands.run('${COMMAND}') against as many bare execs of bash -l -c, alternating`);
    const bareCmd = ['/bin/bash', '-l', '-c', COMMAND];
    const run = async () => {
      const t = performance.now();
      const r = await first.commands.run(COMMAND, { user: 'root' });
      if (r.stdout !== 'hello\n') throw new Error(`commands.run answered ${JSON.stringify(r.stdout)}`);
      return performance.now() - t;
    };
    for (let i = 0; i < 10; i++) {
      await bareExec(container, bareCmd);
      await run();
    }
    const bareCalls: number[] = [];
    const sdkCalls: number[] = [];
    for (let i = 0; i < load.calls; i++) {
      if (i % 2 === 0) {
        bareCalls.push(await bareExec(container, bareCmd));
        sdkCalls.push(await run());
      } else {
        sdkCalls.push(await run());
        bareCalls.push(await bareExec(container, bareCmd));
      }
    }
    const command = {
      command: COMMAND,
      calls: load.calls,
      bare_exec: pair(bareCalls),
      sdk: pair(sdkCalls),
      ratio_p50: round(percentile(sdkCalls, 50) / percentile(bareCalls, 50)),
      ratio_p95: round(percentile(sdkCalls, 95) / percentile(bareCalls, 95)),
    };
    ctx.progress(`  commands.run p50 ${command.sdk.p50_ms} ms, bare exec p50 ${command.bare_exec.p50_ms} ms`);

    ctx.progress(`e2b: ${load.fileRounds} writes and reads of ${load.fileMb} MB through the SDK against the engine's archive calls, alternating`);
    const bytes = Buffer.alloc(load.fileMb * 1024 * 1024, 7);
    const tarball = singleFileTar('bare.bin', bytes, { mode: 0o644, uid: 0, gid: 0 });
    const buf = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length) as ArrayBuffer;
    const timeIt = async (fn: () => Promise<unknown>) => {
      const t = performance.now();
      await fn();
      return performance.now() - t;
    };
    const w = { bare: [] as number[], sdk: [] as number[], http: [] as number[], sinkSdk: [] as number[], sinkHttp: [] as number[] };
    const r = { bare: [] as number[], sdk: [] as number[], http: [] as number[], sinkSdk: [] as number[], sinkHttp: [] as number[] };
    const sink = await fileSink(bytes);
    const viaSink = await Sandbox.connect(first.sandboxId, { ...opts, sandboxUrl: sink.url });
    const sinkSdkWrite = () => timeIt(() => viaSink.files.write('/tmp/sink.bin', buf, { user: 'root', useOctetStream: true, requestTimeoutMs: 600_000 }));
    const sinkHttpWrite = () => timeIt(async () => (await fetch(`${sink.url}/files`, { method: 'POST', body: bytes })).arrayBuffer());
    const sinkSdkRead = () =>
      timeIt(async () => {
        const got = await viaSink.files.read('/tmp/sink.bin', { format: 'bytes', user: 'root', requestTimeoutMs: 600_000 });
        if (got.length !== bytes.length) throw new Error(`the sink gave ${got.length} bytes`);
      });
    const sinkHttpRead = () => timeIt(async () => (await fetch(`${sink.url}/files`)).arrayBuffer());
    const token = (await (await fetch(`${opts.apiUrl}/sandboxes/${first.sandboxId}`, { headers: { 'x-api-key': opts.apiKey } })).json()) as {
      envdAccessToken: string;
    };
    const envdHeaders = { 'e2b-sandbox-id': first.sandboxId, 'x-access-token': token.envdAccessToken };
    const httpWrite = () =>
      timeIt(async () => {
        const res = await fetch(`${opts.sandboxUrl}/files?path=/tmp/http.bin&username=root`, {
          method: 'POST',
          body: bytes,
          headers: { ...envdHeaders, 'content-type': 'application/octet-stream' },
        });
        if (res.status !== 200) throw new Error(`POST /files answered ${res.status}`);
        await res.arrayBuffer();
      });
    const httpRead = () =>
      timeIt(async () => {
        const res = await fetch(`${opts.sandboxUrl}/files?path=/tmp/http.bin&username=root`, { headers: envdHeaders });
        const n = (await res.arrayBuffer()).byteLength;
        if (n !== bytes.length) throw new Error(`GET /files gave ${n} bytes`);
      });
    const sdkWrite = () => timeIt(() => first.files.write('/tmp/sdk.bin', buf, { user: 'root', useOctetStream: true, requestTimeoutMs: 600_000 }));
    const bareWrite = () => timeIt(() => container.putArchive(tarball, { path: '/tmp' }));
    const sdkRead = () =>
      timeIt(async () => {
        const got = await first.files.read('/tmp/sdk.bin', { format: 'bytes', user: 'root', requestTimeoutMs: 600_000 });
        if (got.length !== bytes.length) throw new Error(`files.read gave ${got.length} bytes of ${bytes.length}`);
      });
    const bareRead = () =>
      timeIt(async () => {
        const n = await drain((await container.getArchive({ path: '/tmp/bare.bin' })) as NodeJS.ReadableStream);
        if (n < bytes.length) throw new Error(`getArchive gave ${n} bytes`);
      });
    await sdkWrite();
    await bareWrite();
    await httpWrite();
    await sinkSdkWrite();
    await sinkHttpWrite();
    const rounds: [number[], () => Promise<number>][] = [
      [w.bare, bareWrite],
      [w.sdk, sdkWrite],
      [w.http, httpWrite],
      [w.sinkSdk, sinkSdkWrite],
      [w.sinkHttp, sinkHttpWrite],
      [r.bare, bareRead],
      [r.sdk, sdkRead],
      [r.http, httpRead],
      [r.sinkSdk, sinkSdkRead],
      [r.sinkHttp, sinkHttpRead],
    ];
    // where each kind of round spends its CPU: the client, the server, the engine's daemon (with its archive helpers)
    const engine = dockerdPid();
    const cpu = new Map<number[], CpuShare>();
    try {
      for (let i = 0; i < load.fileRounds; i++) {
        // writes before reads (a read reads what was written), each group in turn forwards and backwards
        const order = i % 2 === 0 ? rounds : [...rounds.slice(0, 5).reverse(), ...rounds.slice(5).reverse()];
        for (const [into, run] of order) {
          const before = { client: process.cpuUsage(), server: procCpuMs(s.child.pid), engine: procCpuMs(engine) };
          into.push(await run());
          const used = process.cpuUsage(before.client);
          const server = procCpuMs(s.child.pid);
          const eng = procCpuMs(engine);
          const sum = cpu.get(into) ?? { client: 0, server: 0, engine: 0 };
          sum.client += (used.user + used.system) / 1000;
          sum.server = server === null || before.server === null || sum.server === null ? null : sum.server + server - before.server;
          sum.engine = eng === null || before.engine === null || sum.engine === null ? null : sum.engine + eng - before.engine;
          cpu.set(into, sum);
        }
      }
    } finally {
      sink.close();
    }
    const mbS = (ms: number[]) => round(load.fileMb / (percentile(ms, 50) / 1000), 1);
    const cpuMs = (into: number[]): CpuShare => {
      const c = cpu.get(into)!;
      const per = (v: number | null) => (v === null ? null : round(v / load.fileRounds, 0));
      return { client: per(c.client)!, server: per(c.server), engine: per(c.engine) };
    };
    const files = {
      mb: load.fileMb,
      rounds: load.fileRounds,
      write_mb_s: {
        bare_put_archive: mbS(w.bare),
        sdk: mbS(w.sdk),
        http: mbS(w.http),
        time_ratio: round(percentile(w.sdk, 50) / percentile(w.bare, 50)),
        http_time_ratio: round(percentile(w.http, 50) / percentile(w.bare, 50)),
        client_only: { sdk: mbS(w.sinkSdk), http: mbS(w.sinkHttp), sdk_time_ratio: round(percentile(w.sinkSdk, 50) / percentile(w.bare, 50)) },
        cpu_ms: { bare: cpuMs(w.bare), sdk: cpuMs(w.sdk), http: cpuMs(w.http) },
      },
      read_mb_s: {
        bare_get_archive: mbS(r.bare),
        sdk: mbS(r.sdk),
        http: mbS(r.http),
        time_ratio: round(percentile(r.sdk, 50) / percentile(r.bare, 50)),
        http_time_ratio: round(percentile(r.http, 50) / percentile(r.bare, 50)),
        client_only: { sdk: mbS(r.sinkSdk), http: mbS(r.sinkHttp), sdk_time_ratio: round(percentile(r.sinkSdk, 50) / percentile(r.bare, 50)) },
        cpu_ms: { bare: cpuMs(r.bare), sdk: cpuMs(r.sdk), http: cpuMs(r.http) },
      },
    };
    ctx.progress(
      `  write ${files.write_mb_s.sdk} MB/s (plain POST ${files.write_mb_s.http}, bare ${files.write_mb_s.bare_put_archive}), read ${files.read_mb_s.sdk} MB/s (plain GET ${files.read_mb_s.http}, bare ${files.read_mb_s.bare_get_archive})`,
    );
    await first.kill();
    return { create, command, files };
  } finally {
    await s.stop();
  }
}

export function printE2b(f: E2bFigures): void {
  const { create: c, command: m, files: x } = f;
  console.log('');
  console.log('E2B: the real SDK against bare dockerode calls of the same work, same run (milliseconds; MB/s)');
  console.log('| run | p50 | p95 | ratio p50 | ratio p95 |');
  console.log('|---|---|---|---|---|');
  console.log(`| bare network/create/start/exec-ready/first exec (${c.creates}) | ${c.bare.p50_ms} | ${c.bare.p95_ms} | 1x | 1x |`);
  console.log(`| Sandbox.create + first commands.run (${c.creates}) | ${c.sdk.p50_ms} | ${c.sdk.p95_ms} | ${c.ratio_p50}x | ${c.ratio_p95}x |`);
  console.log(`| bare exec of bash -l -c '${m.command}' (${m.calls}) | ${m.bare_exec.p50_ms} | ${m.bare_exec.p95_ms} | 1x | 1x |`);
  console.log(`| commands.run('${m.command}') (${m.calls}) | ${m.sdk.p50_ms} | ${m.sdk.p95_ms} | ${m.ratio_p50}x | ${m.ratio_p95}x |`);
  console.log(
    `| ${x.mb} MB write: putArchive ${x.write_mb_s.bare_put_archive} MB/s, files.write ${x.write_mb_s.sdk} MB/s, plain POST /files ${x.write_mb_s.http} MB/s | | | ${x.write_mb_s.time_ratio}x time (POST ${x.write_mb_s.http_time_ratio}x) | |`,
  );
  console.log(
    `| ${x.mb} MB read: getArchive ${x.read_mb_s.bare_get_archive} MB/s, files.read ${x.read_mb_s.sdk} MB/s, plain GET /files ${x.read_mb_s.http} MB/s | | | ${x.read_mb_s.time_ratio}x time (GET ${x.read_mb_s.http_time_ratio}x) | |`,
  );
  const cs = (c: CpuShare) => `client ${c.client}, server ${c.server ?? '?'}, engine ${c.engine ?? '?'}`;
  const cr = (c: CpuOfRounds) => `bare: ${cs(c.bare)}; SDK: ${cs(c.sdk)}; plain: ${cs(c.http)}`;
  console.log(`| CPU ms per write (mean): ${cr(x.write_mb_s.cpu_ms)} | | | | |`);
  console.log(`| CPU ms per read (mean): ${cr(x.read_mb_s.cpu_ms)} | | | | |`);
  const co = (d: ClientOnly) => `the SDK ${d.sdk} MB/s (${d.sdk_time_ratio}x the bare call's time), plain fetch ${d.http} MB/s`;
  console.log(
    `| the client alone, against a local server that does nothing with the bytes: write ${co(x.write_mb_s.client_only)}; read ${co(x.read_mb_s.client_only)} | | | | |`,
  );
}
