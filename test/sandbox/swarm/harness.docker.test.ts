/**
 * Harness episodes and the model gateway on --sandbox swarm, on the three-node lab
 * (scripts/swarm-lab.sh): two tasks of the shipped Harbor dataset imported with the shipped harness
 * (`--agent`), served by the server in its container on the manager, whose upstream is the
 * scripted model (the test's own, on 127.0.0.1, relayed on the lab bridge's host address so the
 * server's container reaches it). Each env's overlay has the gateway's door, on the server
 * container's own address there. Several harness episodes at once spread over the nodes and score
 * as on one host (the oracle, as the model's one bash call: 1), each with its harness's calls in its
 * own transcript; a call to an episode's door from another episode's env (outside its overlay)
 * goes nowhere, while the same call from inside is answered; the warm pool opens its envs' doors
 * at their deploy, and an episode that takes one runs its harness through it; once the server has
 * stopped nothing of it is left on any node.
 */
import { execFile, spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, connect, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { uniqueInstance, waitFor } from '../../support/docker.js';
import * as swarmLab from '../../../scripts/lib/swarm-lab.js';
import { describeSwarm, startedOn } from '../../support/swarm-lab.js';
import { BASE_IMAGE_RULE, DATASET, ensureDebianBase, LOCAL_DEBIAN_IMAGE } from '../../harbor/helpers.js';
import { chatCompletion, startFakeUpstream, type FakeUpstream, type Received } from '../../gateway/support/fake-upstream.js';
import { HARNESS } from '../../../src/defaults.js';
import { LABELS } from '../../../src/sandbox/sandbox.js';

const NODES = 3;
const CLI = join(swarmLab.REPO, 'dist/cli/openenv-bundle.js');
const TASKS = ['fix-median', 'word-frequency'];
/** fix-median again, its instruction asking the scripted model for no answer: its harness waits on its first call */
const HOLD = 'fix-median-hold';
/** the lab bridge's host address: the server's container reaches it through n1 (the lab registry listens there too) */
const LAB_HOST = swarmLab.REGISTRY.split(':')[0]!;
const ORACLES = Object.fromEntries(TASKS.map((id) => [id, readFileSync(join(DATASET, id, 'solution/solve.sh'), 'utf8')]));
/** a file each task's oracle writes, and the other's does not */
const FILES: Record<string, string> = { 'fix-median': 'stats.py', 'word-frequency': 'top_words.sh' };
const INSTRUCTIONS = Object.fromEntries(
  TASKS.map((id) => [
    id,
    readFileSync(join(DATASET, id, 'instruction.md'), 'utf8')
      .trim()
      .slice(0, 60),
  ]),
);

/** the policy: the task's oracle (told by its instruction) as one bash call, then a stop; HOLD gets no answer */
function script(r: Received) {
  const messages: any[] = r.body?.messages ?? [];
  const said = messages.map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? ''))).join('\n');
  if (said.includes('HOLD')) return { kind: 'hang' as const };
  if (messages.some((m) => m.role === 'tool')) return { kind: 'json' as const, body: chatCompletion('Done.') };
  const task = TASKS.find((id) => said.includes(INSTRUCTIONS[id]!));
  if (!task) return { kind: 'json' as const, body: chatCompletion('No task of mine.') };
  const call = { id: 'call_1', name: 'bash', arguments: JSON.stringify({ command: ORACLES[task] }) };
  return { kind: 'json' as const, body: chatCompletion(null, { toolCalls: [call] }) };
}

/** a TCP relay on the lab bridge's host address to the scripted model on 127.0.0.1 */
async function relay(to: number): Promise<{ port: number; close: () => Promise<void> }> {
  const open = new Set<Socket>();
  const server = createServer((inbound) => {
    const out = connect(to, '127.0.0.1');
    for (const s of [inbound, out]) {
      open.add(s);
      s.on('close', () => open.delete(s));
      s.on('error', () => {
        inbound.destroy();
        out.destroy();
      });
    }
    inbound.pipe(out).pipe(inbound);
  });
  await new Promise<void>((r) => server.listen(0, LAB_HOST, r));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise((r) => {
        for (const s of open) s.destroy();
        server.close(() => r());
      }),
  };
}

/** a model call from inside an env's container, to the door and with the key given (a node's engine runs it) */
const CALL = `
import json, sys, urllib.error, urllib.request
req = urllib.request.Request(sys.argv[1] + "/chat/completions", method="POST",
    data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "a call from a test"}]}).encode(),
    headers={"Authorization": "Bearer " + sys.argv[2], "content-type": "application/json"})
try:
    print(json.dumps({"status": urllib.request.urlopen(req, timeout=5).status}))
except urllib.error.HTTPError as e:
    print(json.dumps({"status": e.code, "code": json.loads(e.read()).get("error", {}).get("code")}))
except Exception as e:
    print(json.dumps({"error": type(e).__name__, "why": str(getattr(e, "reason", e))}))
`;

/** the env container of an episode on its node, and what its deploy gave it of the gateway */
async function envOf(instance: string, episode: string, node: number): Promise<{ container: string; base: string; key: string }> {
  const filters = ['--filter', `label=${LABELS.instance}=${instance}`, '--filter', `label=${LABELS.episode}=${episode}`];
  const container = (await swarmLab.dk(node, ['ps', '-q', ...filters])).trim().split('\n')[0]!;
  const env: string[] = JSON.parse(await swarmLab.dk(node, ['inspect', '--format', '{{json .Config.Env}}', container]));
  const v = (k: string) => env.find((e) => e.startsWith(`${k}=`))?.slice(k.length + 1) ?? '';
  return { container, base: v('OPENAI_BASE_URL'), key: v('OPENAI_API_KEY') };
}

async function callFrom(node: number, container: string, base: string, key: string): Promise<{ status?: number; code?: string; error?: string; why?: string }> {
  return JSON.parse((await swarmLab.dk(node, ['exec', container, 'python3', '-c', CALL, base, key])).trim().split('\n').pop()!);
}

describeSwarm('harness episodes and the model gateway on a three-node swarm (the shipped Harbor dataset)', () => {
  let root: string;
  let upstream: FakeUpstream;
  let relayed: Awaited<ReturnType<typeof relay>>;
  let server: swarmLab.LabServer;
  /** when the server started (unix seconds): its pooled envs' containers started since */
  let startedAt: number;

  const start = async (taskId: string): Promise<{ episode: string; envId: string; pooled: boolean }> => {
    const r = await server.call('POST', '/episodes', { task_id: taskId });
    if (r.status !== 201) throw new Error(`reset of ${taskId} failed: ${r.status} ${JSON.stringify(r.body)}`);
    expect(r.body.observation.harness).toBe(true);
    const episode = r.body.episode_id as string;
    // what its env is labelled with: the episode's id, or the pooled env's pool-… id
    const envId = (await server.call('GET', `/console/episodes/${episode}`)).body.env_id as string;
    expect(envId).toBeTruthy();
    return { episode, envId, pooled: r.body.observation.timings?.pooled === true };
  };
  const waitEnd = async (episode: string): Promise<any> => {
    for (let i = 0; i < 200; i++) {
      const s = await server.call('POST', `/episodes/${episode}/step`, { type: 'call_tool', tool_name: 'wait', arguments: { timeout_s: 5 } });
      if (s.body.done) return s.body;
    }
    throw new Error(`episode ${episode} did not end`);
  };
  const transcriptCalls = async (episode: string): Promise<any[]> =>
    (await server.call('GET', `/console/episodes/${episode}`)).body.events.filter((e: any) => e.kind === 'model_call');

  beforeAll(async () => {
    await swarmLab.lab('down', NODES);
    await swarmLab.lab('up', NODES);
    await swarmLab.prepareServerImage();
    ensureDebianBase();
    await promisify(execFile)('sh', ['-c', `docker save ${LOCAL_DEBIAN_IMAGE} | docker -H ${swarmLab.sock(1)} load -q`]);
    root = mkdtempSync(join(tmpdir(), 'openenv-swarm-harness-'));
    const src = join(root, 'dataset');
    for (const id of TASKS) cpSync(join(DATASET, id), join(src, id), { recursive: true });
    const bundleDir = join(root, 'harbor-harness');
    const r = spawnSync(
      process.execPath,
      [CLI, 'import', 'harbor', src, '--out', bundleDir, '--base-image', BASE_IMAGE_RULE, '--agent', `python3 ${HARNESS.shippedPath}`],
      { encoding: 'utf8', timeout: 300_000 },
    );
    expect(r.status, r.stdout + r.stderr).toBe(0);
    const split = join(bundleDir, JSON.parse(readFileSync(join(bundleDir, 'bundle.json'), 'utf8')).splits.train);
    const row = readFileSync(split, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l))
      .find((x) => x.task_id === 'fix-median');
    appendFileSync(split, JSON.stringify({ ...row, task_id: HOLD, golden: undefined, turns: [`HOLD ${row.turns[0]}`] }) + '\n');
    upstream = await startFakeUpstream(script);
    relayed = await relay(Number(new URL(upstream.baseUrl).port));
    startedAt = Math.floor(Date.now() / 1000) - 1;
    server = await swarmLab.startServer({
      instance: uniqueInstance('swarm-harness'),
      port: 18391,
      bundleDir,
      args: ['--max-concurrent-envs', '6', '--warm-pool', '2', '--model-url', `http://${LAB_HOST}:${relayed.port}/v1`, '--model', 'policy'],
    });
  }, 900_000);

  afterAll(async () => {
    await swarmLab.removeServers().catch(() => {});
    await swarmLab.lab('down', NODES);
    await relayed?.close();
    await upstream?.close();
    if (root) rmSync(root, { recursive: true, force: true });
  }, 300_000);

  it("the warm pool's envs have their doors from their deploy: a call before any episode took one is refused and goes nowhere", async () => {
    await waitFor(async () => (await server.call('GET', '/health')).body.pool?.ready === 2, 300_000, 'two pooled envs ready');
    const seen = upstream.received.length;
    const label = ['--filter', `label=${LABELS.instance}=${server.instance}`, '--format', `{{.ID}} {{.Label "${LABELS.episode}"}}`];
    let pooled = 0;
    for (let n = 1; n <= NODES; n++) {
      for (const [container, envId] of (await swarmLab.dk(n, ['ps', ...label]))
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split(' '))) {
        if (!envId!.startsWith('pool-')) continue;
        const e = await envOf(server.instance, envId!, n);
        expect(e.container).toBe(container);
        expect(await callFrom(n, container!, e.base, e.key)).toEqual({ status: 403, code: 'not_in_episode' });
        pooled++;
      }
    }
    expect(pooled).toBe(2);
    expect(upstream.received.length).toBe(seen);
  }, 360_000);

  it('runs harness episodes at once over the nodes: each scores 1 through its own door, its calls in its own transcript', async () => {
    const seen = upstream.received.length;
    const runs = await Promise.all(
      [...TASKS, ...TASKS].map(async (task) => {
        const { episode, envId, pooled } = await start(task);
        return { task, episode, envId, pooled, end: await waitEnd(episode) };
      }),
    );
    for (const r of runs) {
      const shown = `${r.task} ${r.episode}: ${JSON.stringify(r.end).slice(0, 1500)}`;
      expect(r.end, shown).toMatchObject({
        done: true,
        reward: 1,
        observation: { end_reason: 'turns_ended', harness: { ended: 'exited', exit_code: 0, model_calls: 2 } },
      });
      // its own two calls, the first answered with its own task's oracle
      const calls = (await transcriptCalls(r.episode)).filter((e) => e.api === 'openai.chat');
      expect(
        calls.map((e) => e.outcome),
        shown,
      ).toEqual(['ok', 'ok']);
      const other = TASKS.find((t) => t !== r.task)!;
      expect(JSON.stringify(calls[0].response)).toContain(FILES[r.task]);
      expect(JSON.stringify(calls[0].response)).not.toContain(FILES[other]);
    }
    expect(upstream.received.slice(seen).filter((x) => x.path === '/v1/chat/completions')).toHaveLength(2 * runs.length);
    const nodeOf = await startedOn(server.instance, startedAt, NODES);
    const used = new Set(runs.map((r) => nodeOf.get(r.envId)));
    expect(used.has(undefined), `every episode's container seen starting: ${JSON.stringify([...nodeOf])}`).toBe(false);
    expect(used.size, `the nodes used: ${[...used].join(', ')}`).toBeGreaterThan(1);
    // the pool's envs were taken (their doors bound to the episodes that took them), the others deployed with theirs
    const pooled = runs.filter((r) => r.pooled).length;
    expect(pooled, 'episodes that took a pooled env').toBeGreaterThan(0);
    console.log(`[swarm harness] ${runs.length} harness episodes scored 1 over nodes ${[...used].sort().join(', ')}; ${pooled} on pooled envs`);
  });

  it("a call to an episode's door from another episode's env goes nowhere; from its own env it is answered", async () => {
    const seen = upstream.received.length;
    const held = await Promise.all([start(HOLD), start(HOLD)]);
    const [a, b] = held.map((x) => x.envId);
    // both harnesses made their first call through their doors (held unanswered by the model)
    await upstream.receivedN(seen + 2);
    const nodeOf = await startedOn(server.instance, startedAt, NODES);
    const [na, nb] = [nodeOf.get(a!)!, nodeOf.get(b!)!];
    const ea = await envOf(server.instance, a!, na);
    const eb = await envOf(server.instance, b!, nb);
    expect(ea.base).toMatch(/^http:\/\/\d+\.\d+\.\d+\.\d+:\d+\/v1$/);
    expect(ea.base).not.toBe(eb.base);
    // from inside its own env, with its own key: answered
    expect(await callFrom(na, ea.container, ea.base, ea.key)).toEqual({ status: 200 });
    expect(upstream.received.at(-1)?.body.messages).toEqual([{ role: 'user', content: 'a call from a test' }]);
    // from the other episode's env, with the right key: no route to the other overlay, refused or timed out
    const outside = await callFrom(nb, eb.container, ea.base, ea.key);
    expect(outside.status, JSON.stringify(outside)).toBeUndefined();
    expect(outside.error).toMatch(/URLError|TimeoutError|ConnectionRefusedError|ConnectionResetError|OSError|timeout/);
    console.log(`[swarm harness] door of an env on n${na}, called from an env on n${nb}: ${outside.error} (${outside.why})`);
    for (const e of held) expect((await server.call('DELETE', `/episodes/${e.episode}`)).status).toBe(204);
    await waitFor(() => upstream.openResponses() === 0, 30_000, 'the held model calls closed', 200);
  });

  it('leaves nothing on any node once the server has stopped: no service, overlay, task, container or volume', async () => {
    await swarmLab.dk(1, ['stop', '--time', '180', server.name]);
    expect(Number((await swarmLab.dk(1, ['inspect', '--format', '{{.State.ExitCode}}', server.name])).trim())).toBe(0);
    const label = `label=${LABELS.instance}=${server.instance}`;
    const left = async (): Promise<string[]> => {
      const f = await swarmLab.footprint(server.instance, NODES);
      const out = [...f.services, ...f.networks, ...f.stocked, ...f.tasks];
      for (let n = 1; n <= NODES; n++) {
        out.push(
          ...(await swarmLab.dk(n, ['ps', '-aq', '--filter', label]))
            .split('\n')
            .filter(Boolean)
            .map((c) => `n${n} container ${c}`),
        );
        out.push(
          ...(await swarmLab.dk(n, ['volume', 'ls', '-q', '--filter', label]))
            .split('\n')
            .filter(Boolean)
            .map((v) => `n${n} volume ${v}`),
        );
      }
      return out;
    };
    await waitFor(async () => (await left()).length === 0, 60_000, 'nothing of the instance on any node');
  }, 300_000);
});
