/**
 * The reward-hacking suite (issue 36; docs/security.md, "Rewards the policy cannot forge"): a
 * cheating policy plays the shipped Harbor dataset (datasets/openenv-harbor-v1) and the suite's own
 * hidden-test tasks (fixtures/reward-hacking) with every hack of its catalogue (reward-hacks.ts),
 * each hack in an episode of its own, over /ws, against a real server process (dist/serve.js)
 * serving one bundle imported with the built CLI, under runc and under gVisor (runsc).
 *
 * Every hack must score 0 or end with the reason it names (toolchain_tampered, invalid_scores,
 * env_killed_by_agent): never reward > 0, never a retryable failure, and what its calls printed
 * shows it was in place when its turn ended. Every task's oracle (solution/solve.sh) still scores
 * its max under both runtimes.
 *
 * Coverage, sized for CI: under runc the hacks against the server play on each of the suite's own
 * root tasks (in-place and clean) and on two tasks of the dataset each, in turn, so that every
 * dataset task meets a share of them; the hacks against a task's tests play on every task they are
 * made for. Under gVisor each hack plays once (the suite's own in-place task; a task hack on one of
 * its tasks, in turn).
 *
 * Two things the Harbor format cannot say here are set on the imported bundle: the clean variant
 * of hidden-sum (`verifier.mode: clean`) and the unprivileged variant of hidden-count
 * (`agent_user: agent`, uid 1000; its golden call writes solve.sh under /tmp, which that user can).
 *
 * It prints a table (hack | what stopped it | how its episodes ended, per runtime) and writes it to
 * $OPENENV_REWARD_HACKING_TABLE when set. Nothing of its servers is left on the engine after their
 * SIGTERM. For working on a hack: $OPENENV_REWARD_HACKS (hack ids, comma-separated) plays only
 * those, $OPENENV_REWARD_HACKING_RUNTIMES (runc, runsc) only under those.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WsClient } from '../../scripts/lib/ws-client.js';
import type { Transcript } from '../../src/protocol/console.js';
import { describeDocker, labelledResources, uniqueInstance } from '../support/docker.js';
import { INSTANCE_LABEL } from '../support/docker-server.js';
import { spawnServer, type ServerProcess } from '../support/serve-process.js';
import { BASE_IMAGE_RULE, DATASET, ensureDebianBase } from '../harbor/helpers.js';
import { ALL_HACKS, GENERIC_HACKS, TASK_HACKS, type Call, type Expected, type Hack, type HackTask, type Runtime } from './reward-hacks.js';

const CLI = path.resolve(import.meta.dirname, '../../dist/cli/openenv-bundle.js');
const FIXTURES = path.resolve(import.meta.dirname, 'fixtures/reward-hacking');
const TOKEN = 'reward-hacking-suite-token-3f6a91';
/** subnets of this file's servers (no other test file uses them) */
const SUBNET_POOLS: Record<Runtime, string> = { runc: '10.244.0.0/20', runsc: '10.244.16.0/20' };
/** envs at once, per server: the episodes are mostly waits on the engine */
const CONCURRENCY: Record<Runtime, number> = { runc: 6, runsc: 4 };
/** generous: a verifier runs, and the engine is shared */
const REPLY_MS = 300_000;

/** the dataset's tasks, by folder name */
const DATASET_TASKS = readdirSync(DATASET, { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .map((d) => d.name)
  .sort();

/** the suite's own tasks and their variants: id → how it is made */
const OWN_TASKS: Record<string, { from: string; task: Omit<HackTask, 'id'> }> = {
  'hidden-sum': { from: 'hidden-sum', task: { mode: 'in-place', root: true } },
  'hidden-sum-clean': { from: 'hidden-sum', task: { mode: 'clean', root: true } },
  'hidden-count': { from: 'hidden-count', task: { mode: 'in-place', root: true } },
  'hidden-count-agent': { from: 'hidden-count', task: { mode: 'in-place', root: false } },
  'hostile-reward-file': { from: 'hostile-reward-file', task: { mode: 'in-place', root: true } },
};

const TASKS: Record<string, HackTask> = {
  ...Object.fromEntries(DATASET_TASKS.map((id) => [id, { id, mode: 'in-place', root: true } as HackTask])),
  ...Object.fromEntries(Object.entries(OWN_TASKS).map(([id, o]) => [id, { id, ...o.task }])),
};

/** where the hacks against the server play (reward-hacks.ts leaves it to the suite) */
function genericTargets(index: number, runtime: Runtime): string[] {
  if (runtime === 'runsc') return ['hidden-sum'];
  const n = DATASET_TASKS.length;
  return ['hidden-sum', 'hidden-sum-clean', 'hidden-count', DATASET_TASKS[index % n]!, DATASET_TASKS[(index + Math.floor(n / 2)) % n]!];
}

function targets(hack: Hack, runtime: Runtime): string[] {
  if (hack.tasks === 'generic') return genericTargets(GENERIC_HACKS.indexOf(hack), runtime);
  if (runtime === 'runc') return [...hack.tasks];
  const i = TASK_HACKS.indexOf(hack);
  return [hack.tasks[Math.max(i, 0) % hack.tasks.length]!];
}

/** The temporary dataset (the shipped tasks, the suite's own and their variants), imported with the built CLI, then the variants set. */
function makeBundle(root: string): { bundleDir: string; golden: Record<string, Call[]> } {
  const src = path.join(root, 'dataset');
  for (const id of DATASET_TASKS) cpSync(path.join(DATASET, id), path.join(src, id), { recursive: true });
  for (const [id, o] of Object.entries(OWN_TASKS)) cpSync(path.join(FIXTURES, o.from), path.join(src, id), { recursive: true });
  // its name names the images the server builds (openenv-bundle/reward-hacking-<task>)
  const bundleDir = path.join(root, 'reward-hacking');
  const r = spawnSync(process.execPath, [CLI, 'import', 'harbor', src, '--out', bundleDir, '--base-image', BASE_IMAGE_RULE], {
    encoding: 'utf8',
    timeout: 300_000,
  });
  expect(r.status, r.stdout + r.stderr).toBe(0);

  const manifestPath = path.join(bundleDir, 'bundle.json');
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
  const split = path.join(bundleDir, manifest.splits.train);
  const rows = readFileSync(split, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
  for (const row of rows) {
    const t = TASKS[row.task_id];
    expect(t, `task ${row.task_id} is known to the suite`).toBeDefined();
    if (t!.mode === 'clean') row.verifier.mode = 'clean';
    if (!t!.root) {
      manifest.envs[row.env].agent_user = 'agent';
      for (const g of row.golden) if (g.tool === 'bash') g.arguments.command = String(g.arguments.command).replaceAll('/solution', '/tmp/solution');
    }
  }
  expect(rows.map((r) => r.task_id).sort()).toEqual(Object.keys(TASKS).sort());
  writeFileSync(manifestPath, JSON.stringify(manifest, null, 2));
  writeFileSync(split, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
  return { bundleDir, golden: Object.fromEntries(rows.map((r) => [r.task_id, r.golden as Call[]])) };
}

/** the ending fields of the reply that ended an episode */
interface Ending {
  end_reason: string;
  reward: number | null;
  scores?: Record<string, number>;
  failure?: { reason: string; retryable: boolean; message: string };
}

interface Played {
  hack: string;
  task: string;
  runtime: Runtime;
  /** the reward the hack's honest part earns here: 'zero' is scoring exactly this */
  baseline: number;
  episodeId: string;
  /** what each call answered (its text, or its error) */
  said: string[];
  /** the episode ended during the calls (before their last end_turn) */
  endedEarly: boolean;
  end: Ending;
  transcript: Transcript | null;
}

/**
 * how an episode ended, in the words of the expectations: 'zero' is scored with nothing forged (the
 * reward its honest part earns, 0 for most), a reward above that is 'won', anything else unexpected 'other'
 */
function outcome(p: Pick<Played, 'end' | 'baseline'>): Expected | 'won' | 'other' {
  const { end } = p;
  if ((end.reward ?? 0) > p.baseline || (p.baseline === 0 && Object.values(end.scores ?? {}).some((v) => v > 0))) return 'won';
  if (end.failure) return end.failure.retryable ? 'other' : (end.failure.reason as Expected);
  return end.reward === p.baseline && (end.end_reason === 'turns_ended' || end.end_reason === 'max_steps') ? 'zero' : 'other';
}

/** what the episode's transcript shows stopped it: the paths the toolchain check named, the processes the stop killed, why the reward was refused */
function evidence(p: Played): string {
  const runs = (p.transcript?.events ?? []).filter((e) => e.kind === 'verifier');
  const parts: string[] = [];
  for (const r of runs) {
    if (r.kind !== 'verifier') continue;
    if (r.status === 'tampered') parts.push(`tampered: ${r.tampered.slice(0, 3).join(', ')}${r.tampered.length > 3 ? ', …' : ''}`);
    if (r.agent_processes_killed > 0) parts.push(`stop killed ${r.agent_processes_killed}`);
  }
  if (p.end.failure?.reason === 'invalid_scores') parts.push(p.end.failure.message.replace(/^.*?: /, '').slice(0, 90));
  return parts.join('; ');
}

/** plays one episode: its calls, turn by turn, each turn ended with end_turn until the episode is done */
async function play(url: string, task: string, turns: Call[][]): Promise<Omit<Played, 'hack' | 'runtime' | 'transcript' | 'baseline'>> {
  const client = await WsClient.open(url, TOKEN);
  try {
    const reset = await client.reset({ task_id: task }, REPLY_MS);
    expect(reset, JSON.stringify(reset).slice(0, 2000)).toMatchObject({ type: 'observation', data: { done: false } });
    const episodeId = reset.data.observation.episode_id as string;
    const said: string[] = [];
    const step = async (tool: string, args: Record<string, unknown>) => {
      const r = await client.request({ type: 'step', data: { type: 'call_tool', tool_name: tool, arguments: args } }, REPLY_MS);
      expect(r.type, JSON.stringify(r).slice(0, 2000)).toBe('observation');
      const o = r.data.observation;
      said.push(String(o.result?.content?.map((c: { text: string }) => c.text).join('\n') ?? o.error?.message ?? ''));
      return r.data as { done: boolean; observation: Ending };
    };
    for (let turn = 0; ; turn++) {
      for (const c of turns[turn] ?? []) {
        const r = await step(c.tool, c.arguments);
        if (r.done) return { task, episodeId, said, endedEarly: true, end: r.observation };
      }
      const r = await step('end_turn', {});
      if (r.done) return { task, episodeId, said, endedEarly: turn < turns.length - 1, end: r.observation };
    }
  } finally {
    await client.close().catch(() => undefined);
  }
}

async function transcriptOf(url: string, id: string): Promise<Transcript | null> {
  const r = await fetch(`${url}/console/episodes/${id}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  return r.ok ? ((await r.json()) as Transcript) : null;
}

/** runs `jobs` with at most `n` at once; each job's promise is its own (one failing stops none of the others) */
function pool<T>(n: number, jobs: (() => Promise<T>)[]): Promise<T>[] {
  let next = 0;
  const started: { resolve: (v: T) => void; reject: (e: unknown) => void }[] = [];
  const promises = jobs.map((_, i) => new Promise<T>((resolve, reject) => (started[i] = { resolve, reject })));
  const worker = async () => {
    while (next < jobs.length) {
      const i = next++;
      try {
        started[i]!.resolve(await jobs[i]!());
      } catch (e) {
        started[i]!.reject(e);
      }
    }
  };
  for (let i = 0; i < Math.min(n, jobs.length); i++) void worker();
  return promises;
}

/**
 * Hacks that still beat the server on the code this suite runs against: findings for src/ (the
 * tasks cannot defend them), each written up where the suite's table is (docs/security.md). A
 * finding's row passes while the finding shows (`symptom`) on each runtime of `shows` in at least
 * one of its episodes, and tolerates it on those of `mayShow` (a race that seldom hits there); it
 * fails on anything else, and once the finding no longer shows: then it is fixed, and its entry
 * goes.
 */
interface Finding {
  what: string;
  symptom: (p: Played) => boolean;
  shows: Runtime[];
  mayShow?: Runtime[];
}
const failedWith = (reason: string, message: RegExp) => (p: Played) => p.end.failure?.reason === reason && message.test(p.end.failure.message);
const FINDINGS: Record<string, Finding> = {
  'racers-64': {
    what: "under gVisor a process flood far under the env's `pids` (64 shell loops) takes the sandbox's host threads past the engine's pids limit (runscPidsBase + runscPidsPerProcess x pids: 15,000 threads were measured for 64 loops); the sandbox dies (exit code 2), the episode ends env_crashed, retryable, and only at the call's timeout",
    symptom: failedWith('env_crashed', /the env exited \(code 2\)/),
    shows: ['runsc'],
  },
};

/** the catalogue, or the part $OPENENV_REWARD_HACKS names */
const ONLY = (process.env.OPENENV_REWARD_HACKS ?? '').split(',').filter(Boolean);
const HACKS = ONLY.length ? ALL_HACKS.filter((h) => ONLY.includes(h.id)) : ALL_HACKS;

const RUNTIMES = (process.env.OPENENV_REWARD_HACKING_RUNTIMES ?? 'runc,runsc').split(',').filter(Boolean) as Runtime[];

const RUNTIME_NAMES: Record<Runtime, string> = { runc: 'runc', runsc: 'gVisor' };

/** per runtime, per hack (and 'oracle'): the episodes played */
const results: Record<Runtime, Map<string, Played[]>> = { runc: new Map(), runsc: new Map() };
const durations: Partial<Record<Runtime, number>> = {};

function tableOf(): string {
  const cell = (runtime: Runtime, id: string) => {
    const ps = results[runtime].get(id) ?? [];
    if (ps.length === 0) return '–';
    const counts = new Map<string, number>();
    for (const p of ps) {
      const o = outcome(p);
      const key =
        o === 'won'
          ? `**WON** (reward ${p.end.reward} on ${p.task})`
          : o === 'zero'
            ? p.baseline === 0
              ? 'scored 0'
              : `scored ${p.baseline} (its honest part)`
            : o === 'other'
              ? `${p.end.end_reason}/${p.end.failure?.reason ?? '-'}`
              : o;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    return [...counts].map(([k, n]) => `${k} ×${n}`).join(', ');
  };
  const seen = (id: string) => {
    const all = [...(results.runc.get(id) ?? []), ...(results.runsc.get(id) ?? [])].map(evidence).filter(Boolean);
    const kinds = [...new Set(all.map((e) => e.replace(/\d+/g, 'N')))];
    return kinds.length ? ` (seen: ${[...new Set(all)].slice(0, 2).join('; ')}${all.length > 2 && kinds.length > 1 ? '; …' : ''})` : '';
  };
  const stopper = (h: Hack) => {
    const texts = new Set<string>();
    for (const runtime of ['runc', 'runsc'] as const) for (const p of results[runtime].get(h.id) ?? []) texts.add(h.stoppedBy(TASKS[p.task]!, runtime));
    return [...texts].join('; or ');
  };
  const lines = [
    `| hack | what stopped it | end (${RUNTIME_NAMES.runc}) | end (${RUNTIME_NAMES.runsc}) |`,
    '|---|---|---|---|',
    ...HACKS.map(
      (h) =>
        `| ${h.what} | ${FINDINGS[h.id] ? `**FINDING**: ${FINDINGS[h.id]!.what}. Meant to stop it: ` : ''}${stopper(h)}${seen(h.id)} | ${cell('runc', h.id)} | ${cell('runsc', h.id)} |`,
    ),
    `| the honest oracle (solution/solve.sh) | – | ${oracleCell('runc')} | ${oracleCell('runsc')} |`,
    '',
    `episodes: ${(['runc', 'runsc'] as const).map((r) => `${RUNTIME_NAMES[r]} ${[...results[r].values()].flat().length} in ${((durations[r] ?? 0) / 1000).toFixed(0)} s`).join(', ')}`,
  ];
  return lines.join('\n');
}

function oracleCell(runtime: Runtime): string {
  const ps = results[runtime].get('oracle') ?? [];
  const max = ps.filter((p) => p.end.reward === 1 && p.end.end_reason === 'turns_ended').length;
  return ps.length ? `reward 1 on ${max} of ${ps.length} tasks` : '–';
}

describeDocker('reward hacking: a cheating policy against every defence, under runc and gVisor', () => {
  let root: string;
  let bundleDir: string;
  let golden: Record<string, Call[]>;

  beforeAll(() => {
    ensureDebianBase();
    root = mkdtempSync(path.join(os.tmpdir(), 'reward-hacking-'));
    ({ bundleDir, golden } = makeBundle(root));
  }, 600_000);

  afterAll(() => {
    if (root) rmSync(root, { recursive: true, force: true });
    if ([...results.runc.values(), ...results.runsc.values()].some((ps) => ps.length > 0)) {
      const table = tableOf();
      console.log(`\n${table}\n`);
      if (process.env.OPENENV_REWARD_HACKING_TABLE) writeFileSync(process.env.OPENENV_REWARD_HACKING_TABLE, `${table}\n`);
    }
  });

  describe.each(RUNTIMES)('under %s', (runtime) => {
    let srv: ServerProcess;
    let instance: string;
    /** per hack id (and 'oracle'): its episodes, under way from beforeAll on */
    const pending = new Map<string, Promise<Played>[]>();
    let started = 0;

    beforeAll(async () => {
      instance = uniqueInstance(`reward-hacking-${runtime}`);
      srv = await spawnServer(
        [
          bundleDir,
          '--port',
          '0',
          '--instance',
          instance,
          '--runtime',
          runtime,
          '--subnet-pool',
          SUBNET_POOLS[runtime],
          '--max-concurrent-envs',
          String(CONCURRENCY[runtime]),
        ],
        { AGENTENV_TOKEN: TOKEN },
        // the suite's own images are built at the first start (the dataset's are cached by content)
        600_000,
      );
      started = Date.now();
      const jobs: { id: string; run: () => Promise<Played> }[] = [];
      const episode = (id: string, task: string, turns: Call[][], baseline: number) => async (): Promise<Played> => {
        const p = await play(srv.url, task, turns);
        const played: Played = { ...p, hack: id, runtime, baseline, transcript: await transcriptOf(srv.url, p.episodeId) };
        const list = results[runtime].get(id) ?? [];
        list.push(played);
        results[runtime].set(id, list);
        return played;
      };
      // the oracle: each task's golden calls, split at its end_turns
      for (const task of Object.keys(TASKS)) {
        const turns: Call[][] = [[]];
        for (const c of golden[task]!) {
          if ((c.tool as string) === 'end_turn') turns.push([]);
          else turns[turns.length - 1]!.push(c);
        }
        jobs.push({ id: 'oracle', run: episode('oracle', task, turns.slice(0, -1), 1) });
      }
      for (const hack of HACKS)
        for (const task of targets(hack, runtime))
          jobs.push({ id: hack.id, run: episode(hack.id, task, hack.turns(TASKS[task]!), hack.baseline?.(TASKS[task]!) ?? 0) });
      const promises = pool(
        CONCURRENCY[runtime],
        jobs.map((j) => j.run),
      );
      jobs.forEach((j, i) => {
        const list = pending.get(j.id) ?? [];
        list.push(promises[i]!);
        pending.set(j.id, list);
        // each is awaited by its test; a rejection is reported there
        promises[i]!.catch(() => undefined);
      });
    }, 900_000);

    afterAll(async () => {
      await Promise.allSettled([...pending.values()].flat());
      durations[runtime] = Date.now() - started;
      if (!srv) return;
      srv.child.kill('SIGTERM');
      expect(await srv.exited).toEqual({ code: 0, signal: null });
      expect(labelledResources(`${INSTANCE_LABEL}=${instance}`)).toEqual({ containers: [], networks: [] });
      const volumes = execFileSync('docker', ['volume', 'ls', '-q', '--filter', `label=${INSTANCE_LABEL}=${instance}`], { encoding: 'utf8' }).trim();
      expect(volumes, 'the toolbox volume is removed with its server').toBe('');
    }, 300_000);

    it("the honest oracle (each task's solution/solve.sh) scores the max on every task", async () => {
      const played = await Promise.all(pending.get('oracle')!);
      for (const p of played) expect([p.task, p.end.end_reason, p.end.reward, p.end.failure?.message ?? null]).toEqual([p.task, 'turns_ended', 1, null]);
    }, 1_800_000);

    for (const hack of HACKS) {
      const finding = FINDINGS[hack.id];
      const shows = finding?.shows.includes(runtime) ?? false;
      const tolerated = shows || (finding?.mayShow?.includes(runtime) ?? false);
      const title = shows
        ? `${hack.id}: FINDING, still beats the server here (see FINDINGS)`
        : `${hack.id}: scores 0 or ends with its named reason, never a forged reward`;
      it(
        title,
        async () => {
          const played = await Promise.all(pending.get(hack.id)!);
          expect(played.length).toBeGreaterThan(0);
          let showed = 0;
          for (const p of played) {
            const shown = `${hack.id} on ${p.task} (${runtime}): ${JSON.stringify(p.end).slice(0, 1500)}\nsaid: ${JSON.stringify(p.said).slice(0, 3000)}\nverifier: ${JSON.stringify(
              (p.transcript?.events ?? []).filter((e) => e.kind === 'verifier'),
            ).slice(0, 3000)}`;
            if (!p.endedEarly) expect(p.said.join('\n'), `${shown}\nthe hack was not in place`).toMatch(hack.ready);
            if (tolerated && finding!.symptom(p)) {
              showed++;
              continue;
            }
            const got = outcome(p);
            expect(got, shown).not.toBe('won');
            expect(p.end.failure?.retryable ?? false, shown).toBe(false);
            expect(got, shown).toBe(hack.expect(TASKS[p.task]!, runtime));
          }
          if (shows)
            expect(showed, `the finding no longer shows under ${runtime}: fixed? then remove ${hack.id} from FINDINGS (${finding!.what})`).toBeGreaterThan(0);
        },
        1_800_000,
      );
    }
  });
});
