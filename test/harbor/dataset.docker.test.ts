/**
 * The shipped Harbor dataset (datasets/openenv-harbor-v1) served by the real server on real
 * containers: imported as a bundle, every task's image built offline from the local Debian base
 * (at the server's start), then every task played over /ws as a client plays it: its oracle
 * (solution/solve.sh, the golden bash call) scores each score's max, an empty episode (end_turn on
 * every turn) the floor; the two-step task's empty episode stops after its first step by
 * min_reward. During an episode the tests are absent, and the agent's shell reaches neither the
 * server, nor another episode's env, nor anything outside its network.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { importHarbor, parseBaseImageRule } from '../../src/authoring/harbor/index.js';
import { loadBundle, type LoadedBundle } from '../../src/bundle/index.js';
import type { GoldenStep } from '../../src/bundle/schema.js';
import type { Transcript } from '../../src/protocol/console.js';
import { LABELS } from '../../src/sandbox/sandbox.js';
import { describeDocker, labelledResources } from '../support/docker.js';
import { INSTANCE_LABEL, startServer, type TestServer } from '../support/docker-server.js';
import { cli } from '../../src/cli/openenv-bundle.js';
import type { EvalSummary } from '../../src/eval/summary.js';
import { firstPrompt, startScriptedModel, type Policy } from '../support/scripted-model.js';
import { BASE_IMAGE_RULE, DATASET, ensureDebianBase } from './helpers.js';
import { Played, playOverWs } from './ws-play.js';

/** the dataset's tasks, by folder name */
const TASK_IDS = [
  'extract-contacts',
  'fix-backup-script',
  'fix-median',
  'fix-package-import',
  'json-merge',
  'log-pipeline',
  'rename-photos',
  'sales-summary',
  'service-config',
  'sqlite-top-customers',
  'temperature-cli',
  'word-frequency',
];

/** subnets of this file's server (no other test file uses them) */
const SUBNET_POOL = '10.238.0.0/20';

describeDocker('the shipped Harbor dataset, served: every task played over /ws', () => {
  let out: string;
  let bundle: LoadedBundle;
  let s: TestServer;

  beforeAll(async () => {
    ensureDebianBase();
    out = path.join(mkdtempSync(path.join(os.tmpdir(), 'harbor-served-')), 'harbor-v1');
    const imported = await importHarbor({
      sources: [DATASET],
      out,
      baseImages: [parseBaseImageRule(BASE_IMAGE_RULE)],
      // as docs/harbor.md imports it: 3 of the 12 in eval
      evalShare: 0.25,
      ignoreInternet: false,
      skipRefused: false,
      force: false,
    });
    expect(imported.refused).toEqual([]);
    bundle = await loadBundle(out);
    // images are built at start (cached by content across runs)
    s = await startServer({ subnetPool: SUBNET_POOL, maxConcurrentEnvs: 2, networkStock: 0 }, out);
  }, 900_000);

  afterAll(async () => {
    if (s?.app) {
      await s.stop();
      expect(labelledResources(`${INSTANCE_LABEL}=${s.instance}`)).toEqual({ containers: [], networks: [] });
    }
    await bundle?.cleanup();
    if (out) rmSync(path.dirname(out), { recursive: true, force: true });
  });

  const golden = (id: string): GoldenStep[] => bundle.byId.get(id)!.golden!;
  const empty = (id: string): GoldenStep[] => bundle.byId.get(id)!.turns.map(() => ({ tool: 'end_turn' }));
  const transcript = async (episodeId: string): Promise<Transcript> => {
    const r = await fetch(`${s.url}/console/episodes/${episodeId}`);
    expect(r.status).toBe(200);
    return (await r.json()) as Transcript;
  };

  it('lists the shell tools with end_turn, and tells the model how they work', async () => {
    const p = await playOverWs(s.url, 'fix-median', []);
    expect(p.reset.tools.map((t) => t.name)).toEqual(['bash', 'read_file', 'write_file', 'end_turn']);
    expect(p.reset.messages[0]!.content).toMatch(/bash runs a command in one shell/);
    await p.close();
  });

  it.each(TASK_IDS)('%s: the oracle scores the max, an empty episode the floor', async (id) => {
    const g = await playOverWs(s.url, id, golden(id));
    expect(g.errors(), JSON.stringify(g.steps)).toEqual([]);
    expect(g.last).toMatchObject({ done: true, observation: { end_reason: 'turns_ended' } });
    const scores = g.last.observation.scores as Record<string, number>;
    expect(Object.keys(scores).length).toBeGreaterThan(0);
    for (const [name, v] of Object.entries(scores)) expect([name, v]).toEqual([name, 1]);
    expect(g.last.reward).toBe(1);
    await g.close();

    const e = await playOverWs(s.url, id, empty(id));
    expect(e.last).toMatchObject({ done: true, observation: { end_reason: 'turns_ended' } });
    for (const [name, v] of Object.entries(e.last.observation.scores as Record<string, number>)) expect([name, v]).toEqual([name, 0]);
    await e.close();

    // the verifier's output is in the transcript, never in what the client got
    const t = await transcript(g.episodeId);
    const runs = t.events.filter((ev) => ev.kind === 'verifier');
    expect(runs.length).toBe(id === 'log-pipeline' ? 2 : 1);
    expect(runs.every((r) => r.kind === 'verifier' && r.status === 'scored')).toBe(true);
    if (id === 'sales-summary') expect(Object.keys(scores).sort()).toEqual(['correctness', 'format']);
    if (id === 'log-pipeline') {
      // the first step scores 0, under its min_reward: the second is never played
      expect(e.steps.length).toBe(1);
      expect(e.steps[0]!.observation.result).toMatchObject({ content: [{ text: expect.stringMatching(/under its min_reward/) }] });
      const et = await transcript(e.episodeId);
      expect(et.events.filter((ev) => ev.kind === 'verifier').map((ev) => ev.kind === 'verifier' && ev.turn)).toEqual([1]);
    }
  });

  it('the tests are absent during the episode, and what the verifier printed never reaches the client', async () => {
    const p = await playOverWs(s.url, 'fix-median', [
      { tool: 'bash', arguments: { command: 'ls /tests; ls /solution; ls /logs/verifier' } },
      { tool: 'end_turn' },
    ]);
    const ls = p.steps[0]!.observation;
    expect(ls.result.structured_content).toMatchObject({ exit_code: 2 });
    expect(ls.result.content[0]!.text).toMatch(/cannot access '\/tests': No such file or directory/);
    expect(ls.result.content[0]!.text).toMatch(/cannot access '\/solution'/);
    const wire = JSON.stringify(p.steps);
    const t = await transcript(p.episodeId);
    const run = t.events.find((ev) => ev.kind === 'verifier');
    expect(run).toMatchObject({ kind: 'verifier', status: 'scored', scores: { reward: 0 } });
    const output = run?.kind === 'verifier' && typeof run.output === 'string' ? run.output : '';
    expect(output.length).toBeGreaterThan(0);
    expect(wire).not.toContain(output.trim().split('\n')[0]);
    await p.close();
  });

  it("the agent's shell reaches neither the server, nor another episode's env, nor outside its network", async () => {
    // a listener on every host address, standing for a server that listens on 0.0.0.0
    const open = net.createServer((c) => c.end('reached\n'));
    await new Promise<void>((r) => open.listen(0, '0.0.0.0', r));
    const openPort = (open.address() as net.AddressInfo).port;
    const serverPort = new URL(s.url).port;
    const a = await playOverWs(s.url, 'word-frequency', []);
    const b = await playOverWs(s.url, 'json-merge', []);
    try {
      const bash = async (p: Played, command: string) => {
        const o = (await p.call('bash', { command, timeout_s: 30 })).observation;
        return { text: o.result.content[0]!.text as string, exit: (o.result.structured_content as { exit_code: number }).exit_code };
      };
      // b serves on its own address; b reaches itself, a does not reach it
      const bIp = (await bash(b, "hostname -i | tr -d ' \\n'")).text.split('\n')[0]!;
      expect(bIp).toMatch(/^10\.238\./);
      await bash(
        b,
        'cd /tmp && (python3 -m http.server 8080 >/dev/null 2>&1 &) ; for i in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null && break; sleep 0.1; done',
      );
      const tcp = (host: string, port: string | number) => `timeout 5 bash -c 'exec 3<>/dev/tcp/${host}/${port}' && echo CONNECTED || echo REFUSED`;
      expect((await bash(b, tcp('127.0.0.1', 8080))).text).toContain('CONNECTED');
      expect((await bash(a, tcp(bIp, 8080))).text).toContain('REFUSED');
      // the host's address on a's network: its subnet's first address (the route's destination is little-endian hex)
      const routes = (await bash(a, 'cat /proc/net/route')).text;
      const dest = /^\S+\t([0-9A-F]{8})\t00000000/m.exec(routes)?.[1];
      expect(dest, routes).toBeDefined();
      const octets = Buffer.from(dest!, 'hex').reverse();
      const gateway = `${octets[0]}.${octets[1]}.${octets[2]}.${octets[3]! + 1}`;
      expect(gateway).toMatch(/^10\.238\./);
      expect((await bash(a, tcp(gateway, serverPort))).text).toContain('REFUSED');
      expect((await bash(a, tcp('127.0.0.1', serverPort))).text).toContain('REFUSED');
      expect((await bash(a, tcp(gateway, openPort))).text).toContain('REFUSED');
      // outside: an address of TEST-NET-3 (never routed), through whatever route the container has
      expect((await bash(a, tcp('203.0.113.1', 80))).text).toContain('REFUSED');
    } finally {
      await a.close();
      await b.close();
      open.close();
    }
  });

  it('eval with a scripted model plays the eval split: an oracle policy scores 1, a do-nothing policy 0', async () => {
    const tasks = Object.values(bundle.splits).flat();
    // the oracle: the task's golden calls in order, the task known by its prompt
    const oracle: Policy = (req) => {
      const task = tasks.find((t) => firstPrompt(req).includes(t.turns[0]!.trim()));
      const made = req.messages.flatMap((m) => m.tool_calls ?? []).length;
      const step = task?.golden?.[made];
      return step ? { tool_calls: [{ name: step.tool, arguments: step.arguments ?? {} }] } : { content: 'Done.' };
    };
    const io = { stdout: { write: () => true }, stderr: { write: () => true }, env: {} };
    for (const [policy, mean] of [
      [oracle, 1],
      [(() => ({ content: 'I will not do anything.' })) as Policy, 0],
    ] as const) {
      const model = await startScriptedModel(policy);
      const dir = mkdtempSync(path.join(os.tmpdir(), 'harbor-eval-'));
      try {
        expect(await cli(['eval', s.url, '--model-url', model.url, '--model', 'scripted', '--out', dir], io)).toBe(0);
        const summary = JSON.parse(readFileSync(path.join(dir, 'summary.json'), 'utf8')) as EvalSummary;
        expect(summary).toMatchObject({ played: bundle.splits.eval!.length, failures: { total: 0 } });
        expect(summary.scored.mean).toBe(mean);
      } finally {
        await model.close();
        rmSync(dir, { recursive: true, force: true });
      }
    }
  });

  it('leaves no env of an ended episode on the engine', async () => {
    const p = await playOverWs(s.url, 'fix-median', [{ tool: 'end_turn' }]);
    await p.close();
    await expect.poll(() => labelledResources(`${LABELS.episode}=${p.episodeId}`), { timeout: 30_000 }).toEqual({ containers: [], networks: [] });
  });
});
