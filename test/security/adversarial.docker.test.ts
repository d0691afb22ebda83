/**
 * The adversarial suite: a real server process serving a shell bundle (the local Debian base as it
 * is, small limits: 128 MB, 128 processes, 32 MB of writable layer), each attack a model's `bash`
 * calls in an episode of its own while a neighbour episode keeps playing (a `bash` call after
 * another, its step latency kept). Every attack must end with a named reason or the model's own
 * error (each says which), leave the neighbour's calls succeeding, keep the server's memory (its
 * RSS, read from /proc) bounded, and leave nothing of its episode on the engine.
 *
 * At the end it prints a table (attack | what stopped it | time to stop | neighbour p50/max step
 * latency during it) and writes it to $OPENENV_ADVERSARIAL_TABLE when set.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { LABELS } from '../../src/sandbox/sandbox.js';
import { ENV_SECRET_VAR } from '../../src/sandbox/env-identity.js';
import { WsClient } from '../../scripts/lib/ws-client.js';
import { describeDocker, labelledResources, uniqueInstance } from '../support/docker.js';
import { INSTANCE_LABEL } from '../support/docker-server.js';
import { spawnServer, type ServerProcess } from '../support/serve-process.js';
import { LOCAL_DEBIAN_IMAGE, ensureDebianBase } from '../harbor/helpers.js';

/** subnets of this file's server (no other test file uses them) */
const SUBNET_POOL = '10.241.0.0/20';
const TOKEN = 'adversarial-suite-token-9c41e7';
const LIMITS = { memory_mb: 128, pids: 128, storage_mb: 32, cpus: 1 };
/** how much the server's RSS may grow over the whole suite */
const RSS_GROWTH_BOUND_MB = 200;
/** the time budget of the `budget` task */
const BUDGET_S = 6;

function writeBundle(dir: string): void {
  const task = (id: string, extra: Record<string, unknown> = {}) => ({
    task_id: id,
    toolset: 'shell',
    env: 'box',
    system_prompt: 'You are tested.',
    turns: ['Do it.'],
    verifier: { tests: 'verifiers/zero', timeout_s: 30 },
    ...extra,
  });
  const files: Record<string, string> = {
    'bundle.json': JSON.stringify({
      name: 'adversarial',
      version: '1.0.0',
      description: 'A shell env for attacks from inside.',
      default_split: 'train',
      splits: { train: 'tasks/train.jsonl' },
      envs: { box: { kind: 'shell', image: LOCAL_DEBIAN_IMAGE, workdir: '/app', resources: LIMITS } },
      toolsets: { shell: { builtin: ['shell'] } },
      reward: 'mean',
      scores: { reward: { min: 0, max: 1 } },
    }),
    'tasks/train.jsonl': [task('attack'), task('neighbour'), task('budget', { time_budget_s: BUDGET_S })].map((r) => JSON.stringify(r)).join('\n') + '\n',
    'verifiers/zero/test.sh': 'echo 0 > /logs/verifier/reward.txt\n',
  };
  for (const [rel, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    writeFileSync(path.join(dir, rel), content);
  }
}

/** replies as the wire has them */

type Obs = any;

/** the server's resident memory, from the kernel */
function rssMb(pid: number): number {
  const kb = Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
  return kb / 1024;
}

interface Tick {
  at: number;
  ms: number;
  ok: boolean;
  what: string;
}

/** A neighbour episode that keeps playing: a cheap bash call after another, each timed. */
class Neighbour {
  readonly ticks: Tick[] = [];
  private stopped = false;
  private loop: Promise<void> | null = null;
  episodeId = '';
  ip = '';

  constructor(private readonly client: WsClient) {}

  static async start(url: string): Promise<Neighbour> {
    const client = await WsClient.open(url, TOKEN);
    const n = new Neighbour(client);
    const reset = await client.reset({ task_id: 'neighbour' }, 120_000);
    expect(reset, JSON.stringify(reset)).toMatchObject({ type: 'observation', data: { done: false } });
    n.episodeId = reset.data.observation.episode_id;
    // a service of its own, for the scans of another episode's env
    const serve = await client.call('bash', {
      command:
        "cd /tmp && (python3 -m http.server 8080 >/dev/null 2>&1 &); hostname -i; for i in $(seq 100); do timeout 1 bash -c 'exec 3<>/dev/tcp/127.0.0.1/8080' 2>/dev/null && { echo serving; break; }; sleep 0.2; done",
    });
    const [ip, serving] = String(serve.data.observation.result.content[0].text).split('\n');
    n.ip = ip!.trim();
    expect(n.ip).toMatch(/^10\.241\./);
    expect(serving).toBe('serving');
    n.loop = n.run();
    return n;
  }

  private async run(): Promise<void> {
    for (let i = 0; !this.stopped; i++) {
      const t0 = Date.now();
      let ok = false;
      let what: string;
      try {
        const r = await this.client.call('bash', { command: `echo tick-${i}`, timeout_s: 60 });
        const text = r.data?.observation?.result?.content?.[0]?.text;
        ok = r.type === 'observation' && r.data.done === false && text === `tick-${i}\n[exit code 0]`;
        what = ok ? '' : JSON.stringify(r).slice(0, 500);
      } catch (e) {
        what = (e as Error).message;
      }
      this.ticks.push({ at: t0, ms: Date.now() - t0, ok, what });
      if (!ok) return;
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  during(from: number, to: number): Tick[] {
    return this.ticks.filter((t) => t.at >= from && t.at <= to);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
    await this.client.close().catch(() => undefined);
  }
}

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor(q * s.length))]! : NaN;
};

interface Row {
  attack: string;
  stoppedBy: string;
  stopMs: number;
  p50: number;
  max: number;
  ticks: number;
}

describeDocker('adversarial: attacks from inside a shell env, a neighbour episode playing', () => {
  let dir: string;
  let srv: ServerProcess;
  let instance: string;
  let neighbour: Neighbour;
  let rss0 = 0;
  let rssPeak = 0;
  let sampler: NodeJS.Timeout | undefined;
  const rows: Row[] = [];

  beforeAll(async () => {
    ensureDebianBase();
    dir = mkdtempSync(path.join(os.tmpdir(), 'adversarial-'));
    writeBundle(dir);
    instance = uniqueInstance('adversarial');
    // listening on every host address (with a token, as a non-loopback server must): the scans
    // below try every address the host has
    srv = await spawnServer(
      [
        dir,
        '--host',
        '0.0.0.0',
        '--port',
        '0',
        '--instance',
        instance,
        '--subnet-pool',
        SUBNET_POOL,
        '--max-concurrent-envs',
        '4',
        '--network-stock',
        '0',
        '--max-steps',
        '100000',
      ],
      { AGENTENV_TOKEN: TOKEN },
    );
    neighbour = await Neighbour.start(srv.url);
    rss0 = rssMb(srv.child.pid!);
    rssPeak = rss0;
    sampler = setInterval(() => {
      try {
        rssPeak = Math.max(rssPeak, rssMb(srv.child.pid!));
      } catch {
        // the server has exited
      }
    }, 100);
  }, 180_000);

  afterAll(async () => {
    clearInterval(sampler);
    await neighbour?.stop();
    if (srv) {
      srv.child.kill('SIGTERM');
      expect(await srv.exited).toEqual({ code: 0, signal: null });
      expect(labelledResources(`${INSTANCE_LABEL}=${instance}`)).toEqual({ containers: [], networks: [] });
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
    if (rows.length) {
      const table = [
        '| attack | what stopped it | time to stop | neighbour step latency during it (p50 / max, calls) |',
        '|---|---|---|---|',
        ...rows.map((r) => `| ${r.attack} | ${r.stoppedBy} | ${(r.stopMs / 1000).toFixed(1)} s | ${r.p50} / ${r.max} ms (${r.ticks}) |`),
        '',
        `server RSS: ${rss0.toFixed(0)} MB before the attacks, ${rssPeak.toFixed(0)} MB at most during them (bound: +${RSS_GROWTH_BOUND_MB} MB)`,
      ].join('\n');
      console.log(`\n${table}\n`);
      if (process.env.OPENENV_ADVERSARIAL_TABLE) writeFileSync(process.env.OPENENV_ADVERSARIAL_TABLE, `${table}\n`);
    }
  }, 120_000);

  /** an episode of the attacker: its calls, timed; its end; its leftovers checked */
  async function episode(taskId = 'attack') {
    const client = await WsClient.open(srv.url, TOKEN);
    const reset = await client.reset({ task_id: taskId }, 120_000);
    expect(reset, JSON.stringify(reset)).toMatchObject({ type: 'observation', data: { done: false } });
    const episodeId = reset.data.observation.episode_id as string;
    const bash = async (command: string, timeout_s?: number): Promise<{ done: boolean; obs: Obs; text: string; result: any }> => {
      const r = await client.request(
        { type: 'step', data: { type: 'call_tool', tool_name: 'bash', arguments: { command, ...(timeout_s ? { timeout_s } : {}) } } },
        600_000,
      );
      expect(r.type, JSON.stringify(r).slice(0, 2000)).toBe('observation');
      const obs = r.data.observation;
      return { done: r.data.done, obs, text: obs.result?.content?.[0]?.text ?? '', result: obs.result?.structured_content ?? {} };
    };
    const end = async () => {
      const r = await client.request({ type: 'step', data: { type: 'call_tool', tool_name: 'end_turn', arguments: {} } }, 600_000);
      return r.data;
    };
    /** the episode's containers and networks are gone; how long that took */
    const gone = async () => {
      const t0 = Date.now();
      await client.close().catch(() => undefined);
      await expect
        .poll(() => labelledResources(`${LABELS.episode}=${episodeId}`), { timeout: 60_000, interval: 200 })
        .toEqual({ containers: [], networks: [] });
      return Date.now() - t0;
    };
    return { client, episodeId, bash, end, gone };
  }
  type Episode = Awaited<ReturnType<typeof episode>>;

  /** runs one attack between two marks of the neighbour's clock; records its row */
  async function attack(name: string, run: (ep: Episode) => Promise<{ stoppedBy: string; stopMs: number }>, taskId = 'attack'): Promise<void> {
    const from = Date.now();
    const ep = await episode(taskId);
    let outcome;
    try {
      outcome = await run(ep);
    } finally {
      await ep.client.close().catch(() => undefined);
    }
    const { stoppedBy, stopMs } = outcome;
    const to = Date.now();
    const during = neighbour.during(from, to);
    const failed = neighbour.ticks.filter((t) => !t.ok);
    expect(failed, 'the neighbour kept playing').toEqual([]);
    expect(during.length, 'the neighbour played during the attack').toBeGreaterThan(0);
    const ms = during.map((t) => t.ms);
    rows.push({ attack: name, stoppedBy, stopMs, p50: quantile(ms, 0.5), max: Math.max(...ms), ticks: during.length });
    const rss = rssMb(srv.child.pid!);
    expect(rss - rss0, `server RSS ${rss.toFixed(0)} MB against ${rss0.toFixed(0)} MB at the start`).toBeLessThan(RSS_GROWTH_BOUND_MB);
    expect(rssPeak - rss0, `server RSS peaked at ${rssPeak.toFixed(0)} MB`).toBeLessThan(RSS_GROWTH_BOUND_MB);
  }

  it("a fork bomb: held at the pids limit; the model reads the failed forks, the episode goes on or ends env_pids_exhausted (the model's doing)", async () => {
    await attack('fork bomb `:(){ :|:& };:`', async (ep) => {
      const t0 = Date.now();
      const r = await ep.bash(':(){ :|:& };:', 10);
      // the bomb goes to the background at once: the call ends, the forks failing at the limit
      expect(r.done).toBe(false);
      // the env serves the model again (its shell may have died under the bomb and be replaced),
      // or, when no new shell can start at the limit, the episode ends with the bomb's own reason: not retryable
      // On a loaded engine the forks may not reach the limit before a call or two have come back:
      // the calls go on (a second apart, up to 10) until the model has read a failed fork too
      const FORK_FAILED = 'fork: retry: Resource temporarily unavailable';
      let after = await ep.bash('echo alive', 30);
      const read = [r.text, after.text];
      const settled = () => after.done || (/alive\n\[exit code 0\]$/.test(after.text) && read.join('\n').includes(FORK_FAILED));
      for (let i = 0; i < 10 && !settled(); i++) {
        await new Promise((res) => setTimeout(res, 1000));
        after = await ep.bash('echo alive', 30);
        read.push(after.text);
      }
      // the model reads the failed forks: with the call, or with the next one when the call ended
      // before the first fork failed (what runs in the background between calls is shown next)
      if (!after.done) expect(read.join('\n')).toContain(FORK_FAILED);
      if (after.done) {
        console.log('[fork bomb] ended the episode:', JSON.stringify(after.obs.failure));
        expect(after.obs).toMatchObject({ end_reason: 'env_failed', failure: { phase: 'tool', reason: 'env_pids_exhausted', retryable: false } });
        await ep.gone();
        return {
          stoppedBy: `pids limit (${LIMITS.pids}); no new shell could start: env_pids_exhausted (${after.obs.failure.message})`,
          stopMs: Date.now() - t0,
        };
      }
      expect(after.text).toMatch(/alive\n\[exit code 0\]$/);
      // the bomb is still there, held at the limit: the episode's end stops it
      const count = /^(\d+)$/m.exec((await ep.bash('ls -d /proc/[0-9]* | wc -l')).text)?.[1];
      const left = count ? `${count} processes` : 'its forks still failing';
      expect((await ep.end()).observation.end_reason).toBe('turns_ended');
      await ep.gone();
      return {
        stoppedBy: `pids limit (${LIMITS.pids}): held there (${left}), the model reads the failed forks${after.result.shell_restarted ? ' and gets a new shell' : ''}; the episode's end killed it`,
        stopMs: Date.now() - t0,
      };
    });
  }, 300_000);

  it('every process slot held and the shell killed: no new shell can start, the episode ends env_pids_exhausted, not retryable', async () => {
    await attack('process slots held by a respawner that never backs off, then the shell killed', async (ep) => {
      const t0 = Date.now();
      // a respawner keeps every slot of the pids limit taken, whatever exits; then the shell is killed.
      // It forks again the moment a fork fails (perl, Debian's essential one): a bash loop of `sleep &`
      // backs off for seconds after each failed fork (bash's own retry), and a new shell started in such
      // a gap gets the slots, so the attack held every slot only as long as the server happened to be slow
      const respawner = 'while (1) { my $c = fork(); if (defined $c && $c == 0) { sleep 1000; exit 0 } }';
      const died = await ep.bash(`perl -e 'if (fork() == 0) { ${respawner} } sleep 3; kill 9, $ARGV[0]' $$ >/dev/null 2>&1`, 20);
      expect(died.done).toBe(false);
      expect(died.result).toMatchObject({ shell_died: true });
      const after = await ep.bash('echo alive', 30);
      expect(after.done, after.text).toBe(true);
      expect(after.obs).toMatchObject({ end_reason: 'env_failed', failure: { phase: 'tool', reason: 'env_pids_exhausted', retryable: false } });
      expect(after.obs.failure.message).toMatch(/its processes held \d+ of its pids limit of \d+/);
      // the new shell's own words say why (bash's fork retries while it started), where no count could be read too
      expect(after.obs.failure.message).toContain('(it said: bash: fork: retry: Resource temporarily unavailable)');
      await ep.gone();
      return { stoppedBy: `pids limit (${LIMITS.pids}); no new shell could start: env_pids_exhausted (${after.obs.failure.message})`, stopMs: Date.now() - t0 };
    });
  }, 300_000);

  it('a memory bomb: the kernel kills it at the memory limit (the model reads exit code 137), the env goes on', async () => {
    await attack('memory bomb `tail /dev/zero`', async (ep) => {
      const t0 = Date.now();
      const r = await ep.bash('tail /dev/zero', 60);
      const stopMs = Date.now() - t0;
      console.log('[memory bomb]', JSON.stringify(r.result), r.text.slice(0, 300));
      expect(r.done).toBe(false);
      expect(r.result.exit_code).toBe(137);
      expect(r.result.timed_out).toBe(false);
      expect((await ep.bash('echo alive')).text).toMatch(/alive\n\[exit code 0\]$/);
      expect((await ep.end()).observation.end_reason).toBe('turns_ended');
      await ep.gone();
      return { stoppedBy: `memory limit (${LIMITS.memory_mb} MB): the OOM killer (model's error: exit code 137)`, stopMs };
    });
  }, 300_000);

  it('a disk filler: the storage watch ends the episode storage_exceeded', async () => {
    await attack('disk filler (1 MB writes without end)', async (ep) => {
      const t0 = Date.now();
      const r = await ep.bash('while true; do head -c 1048576 /dev/urandom >> /app/fill; done', 600);
      const stopMs = Date.now() - t0;
      expect(r.done).toBe(true);
      expect(r.obs).toMatchObject({ end_reason: 'env_failed', failure: { reason: 'storage_exceeded', retryable: false } });
      await ep.gone();
      const wrote = /wrote (\d+) MB/.exec(r.obs.failure.message)?.[1];
      return { stoppedBy: `storage watch (storage_mb ${LIMITS.storage_mb}, stopped at ${wrote} MB): storage_exceeded`, stopMs };
    });
  }, 300_000);

  it('64 long commands in the background: the call returns, the episode ends, teardown removes them all', async () => {
    await attack('64 parallel `sleep 3600` in one episode', async (ep) => {
      const r = await ep.bash(
        "for i in $(seq 64); do sleep 3600 & done; sleep 0.5; cat /proc/[0-9]*/cmdline | tr '\\0' ' ' | grep -o 'slee[p] 3600' | wc -l",
        30,
      );
      expect(r.text).toBe('64\n[exit code 0]');
      const t0 = Date.now();
      expect((await ep.end()).observation.end_reason).toBe('turns_ended');
      await ep.gone();
      return { stoppedBy: "the episode's end: agent processes killed, container removed", stopMs: Date.now() - t0 };
    });
  }, 300_000);

  it('a command that never returns: killed at its timeout_s (the model reads a timeout)', async () => {
    await attack('`sleep infinity` (timeout_s 3)', async (ep) => {
      const t0 = Date.now();
      const r = await ep.bash('sleep infinity', 3);
      const stopMs = Date.now() - t0;
      expect(r.obs.result.is_error).toBe(true);
      expect(r.result).toMatchObject({ timed_out: true, exit_code: 137 });
      expect((await ep.end()).observation.end_reason).toBe('turns_ended');
      await ep.gone();
      return { stoppedBy: "timeout_s: its process group killed (model's error: timed_out)", stopMs };
    });
  }, 300_000);

  it("a command that never returns, past the task's time budget: the budget ends the episode", async () => {
    await attack(
      `\`sleep infinity\` (timeout_s 3600, time budget ${BUDGET_S} s)`,
      async (ep) => {
        const t0 = Date.now();
        const r = await ep.bash('sleep infinity', 3600);
        // the command in flight is stopped when the budget passes; the episode is then scored as it is
        expect(r.obs.result.is_error).toBe(true);
        expect(r.text).toBe("[stopped: the task's time budget passed while it ran; the command was killed, with every process it started]");
        expect(r.result).toMatchObject({ interrupted: true, timed_out: false });
        const next = await ep.bash('echo late');
        const stopMs = Date.now() - t0;
        expect(next.done).toBe(true);
        expect(next.obs.end_reason).toBe('turns_ended');
        await ep.gone();
        return { stoppedBy: `the task's time budget (${BUDGET_S} s): scored as it is`, stopMs };
      },
      'budget',
    );
  }, 300_000);

  it('a process that ignores SIGTERM: the teardown still ends in bounded time', async () => {
    await attack("a SIGTERM-ignoring process at teardown (`trap '' TERM`)", async (ep) => {
      const r = await ep.bash(
        "setsid bash -c \"trap '' TERM; while :; do sleep 1; done\" >/dev/null 2>&1 & (trap '' TERM; exec sleep infinity) & sleep 0.3; kill -TERM $!; sleep 0.3; kill -0 $! && echo still-there",
        30,
      );
      expect(r.text).toBe('still-there\n[exit code 0]');
      const t0 = Date.now();
      expect((await ep.end()).observation.end_reason).toBe('turns_ended');
      await ep.gone();
      return { stoppedBy: "the episode's end: SIGKILL to the agent's processes, the container removed", stopMs: Date.now() - t0 };
    });
  }, 300_000);

  it('100 MB of output: bounded to its head and tail, the server unmoved', async () => {
    await attack('100 MB of output', async (ep) => {
      const t0 = Date.now();
      const r = await ep.bash('head -c 100000000 /dev/zero | tr "\\0" a; echo; echo THE-END', 300);
      const stopMs = Date.now() - t0;
      expect(r.result).toMatchObject({ exit_code: 0, output_bytes: 100_000_009 });
      expect(r.result.dropped_bytes).toBe(100_000_009 - 32 * 1024);
      expect(r.text.length).toBeLessThan(34 * 1024);
      expect(r.text.endsWith('a\nTHE-END\n[exit code 0]')).toBe(true);
      expect((await ep.end()).observation.end_reason).toBe('turns_ended');
      await ep.gone();
      return { stoppedBy: 'the output bound: first and last 16 KiB kept, 99.97 MB dropped', stopMs };
    });
  }, 300_000);

  it("a flood of the shell's control channel (fd 3): the shell is ended at once, the neighbour unslowed", async () => {
    await attack("a flood of the shell's control channel (`yes > /proc/$$/fd/3`)", async (ep) => {
      const t0 = Date.now();
      const r = await ep.bash('yes > /proc/$$/fd/3', 60);
      const stopMs = Date.now() - t0;
      expect(r.done).toBe(false);
      expect(r.result).toMatchObject({ shell_died: true });
      const next = await ep.bash('echo alive');
      expect(next.text).toMatch(/control channel \(fd 3\)\);[^\]]*\]\nalive\n\[exit code 0\]$/);
      expect((await ep.end()).observation.end_reason).toBe('turns_ended');
      await ep.gone();
      return { stoppedBy: 'the control channel bound (16 KiB a call): the shell ended, the model reads that it died and gets a new one', stopMs };
    });
  }, 300_000);

  it('invalid UTF-8 output: replaced, the frame valid', async () => {
    await attack('invalid UTF-8 output (and 1 MB of random bytes)', async (ep) => {
      const t0 = Date.now();
      const r = await ep.bash('printf "\\xff\\xfe\\xc3 ok \\xed\\xa0\\x80 \\xe2\\x82"; echo; head -c 1000000 /dev/urandom; echo', 60);
      const stopMs = Date.now() - t0;
      expect(r.text.startsWith('\uFFFD\uFFFD\uFFFD ok \uFFFD\uFFFD\uFFFD \uFFFD\n')).toBe(true);
      // no lone surrogate reached the wire: the text re-encodes to UTF-8 and back unchanged
      expect(Buffer.from(r.text, 'utf8').toString('utf8')).toBe(r.text);
      expect(r.text).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/);
      expect(r.result.output_bytes).toBeGreaterThan(1_000_000);
      expect((await ep.end()).observation.end_reason).toBe('turns_ended');
      await ep.gone();
      return { stoppedBy: 'replaced by U+FFFD (and bounded)', stopMs };
    });
  }, 300_000);

  it("scans from inside: the server's port, the engine's socket and TCP ports, another episode's env, the env's own secret", async () => {
    const port = new URL(srv.url).port;
    // a listener on every host address, standing for anything the host serves
    const open = net.createServer((c) => c.end('reached\n'));
    await new Promise<void>((r) => open.listen(0, '0.0.0.0', r));
    const openPort = (open.address() as net.AddressInfo).port;
    const hostAddresses = Object.values(os.networkInterfaces())
      .flat()
      .filter((a) => a && a.family === 'IPv4')
      .map((a) => a!.address);
    try {
      await attack('scans: the server, the engine, another episode, its own secret', async (ep) => {
        const t0 = Date.now();
        // the subnet's first address (where a gateway would be): the route's destination is little-endian hex
        const routes = (await ep.bash('cat /proc/net/route')).text;
        const dest = /^\S+\t([0-9A-F]{8})\t00000000/m.exec(routes)?.[1];
        expect(dest, routes).toBeDefined();
        const o = Buffer.from(dest!, 'hex').reverse();
        const gateway = `${o[0]}.${o[1]}.${o[2]}.${o[3]! + 1}`;
        const targets: [string, number | string][] = [];
        for (const h of new Set([gateway, '127.0.0.1', ...hostAddresses])) {
          for (const p of [port, openPort, 2375, 2376]) targets.push([h, p]);
        }
        targets.push([neighbour.ip, 8080]);
        const probe = targets.map(([h, p]) => `timeout 3 bash -c 'exec 3<>/dev/tcp/${h}/${p}' 2>/dev/null && echo "OPEN ${h}:${p}"`).join('; ');
        const scan = await ep.bash(`${probe}; echo scanned`, 300);
        expect(scan.text).toBe('scanned\n[exit code 0]');
        // the engine's socket: not there, under any of its usual paths
        const sock = await ep.bash('ls -la /var/run/docker.sock /run/docker.sock /var/run/docker 2>&1; find / -xdev -type s 2>/dev/null | head; echo end');
        expect(sock.text).toMatch(/No such file or directory[\s\S]*No such file or directory/);
        expect(sock.text).not.toMatch(/docker\.sock\s*$/m);
        // the env's environment and every process's: no identity secret, nothing of the server's
        const env = await ep.bash("cat /proc/1/environ /proc/self/environ /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | sort -u");
        expect(env.text).not.toContain(ENV_SECRET_VAR);
        expect(env.text).not.toContain(TOKEN);
        expect(env.text).not.toMatch(/^(AGENTENV|OPENENV)_/m);
        const stopMs = Date.now() - t0;
        expect((await ep.end()).observation.end_reason).toBe('turns_ended');
        await ep.gone();
        return {
          stoppedBy: `internal network without a host address: ${targets.length} TCP targets unreachable; no engine socket; no secret in /proc (a shell env is given none)`,
          stopMs,
        };
      });
    } finally {
      open.close();
    }
  }, 600_000);
});
