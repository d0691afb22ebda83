/**
 * The shell toolset and the verifier on --sandbox swarm, on the three-node lab (scripts/swarm-lab.sh):
 * tasks of the shipped Harbor dataset (datasets/openenv-harbor-v1), imported with the built CLI
 * (one of them also as a clean-verifier variant), served by the server in its container on the
 * manager with every node's engine (--swarm-node-engine). Episodes spread over the nodes and score
 * as on one host (the oracle 1, an empty episode 0); the shell tools work in an env on a worker; a
 * planted `/usr/local/bin/bash` ends toolchain_tampered with no reward; and once the server has
 * stopped nothing of it is left on any node: services, overlays, tasks, containers (the clean
 * verifiers' too) and the toolbox's volumes.
 */
import { execFile, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { uniqueInstance, waitFor } from '../../support/docker.js';
import * as swarmLab from '../../../scripts/lib/swarm-lab.js';
import { describeSwarm, startedOn } from '../../support/swarm-lab.js';
import { BASE_IMAGE_RULE, DATASET, ensureDebianBase, LOCAL_DEBIAN_IMAGE } from '../../harbor/helpers.js';
import { GENERIC_HACKS } from '../../security/reward-hacks.js';
import { LABELS } from '../../../src/sandbox/sandbox.js';

const NODES = 3;
const CLI = join(swarmLab.REPO, 'dist/cli/openenv-bundle.js');
/** a few of the dataset's tasks (the lab builds each image on the manager and every node pulls it) */
const TASKS = ['fix-median', 'word-frequency', 'service-config', 'json-merge'];
/** json-merge again, its verifier in a fresh container beside the env (verifier.mode clean) */
const CLEAN = 'json-merge-clean';

type Call = { tool: string; arguments?: Record<string, unknown> };
type Reply = { observation: any; reward: number | null; done: boolean };

async function play(server: swarmLab.LabServer, taskId: string, calls: Call[]): Promise<{ episode: string; replies: Reply[]; last: Reply }> {
  const r = await server.call('POST', '/episodes', { task_id: taskId });
  if (r.status !== 201) throw new Error(`reset of ${taskId} failed: ${r.status} ${JSON.stringify(r.body)}`);
  const episode = r.body.episode_id as string;
  const replies: Reply[] = [];
  for (const c of calls) {
    const s = await server.call('POST', `/episodes/${episode}/step`, { type: 'call_tool', tool_name: c.tool, arguments: c.arguments ?? {} });
    replies.push(s.body as Reply);
    if (s.body.done) break;
  }
  return { episode, replies, last: replies.at(-1)! };
}

/** the text of a tool call's result */
const text = (r: Reply): string => (r.observation?.result?.content ?? []).map((c: { text?: string }) => c.text ?? '').join('');

/** everything of the instance on every node, stopped containers and volumes included */
async function leftOnNodes(instance: string): Promise<string[]> {
  const f = await swarmLab.footprint(instance, NODES);
  const left = [...f.services.map((s) => `service ${s}`), ...f.networks.map((n) => `network ${n}`), ...f.tasks.map((t) => `task ${t}`)];
  for (let n = 1; n <= NODES; n++) {
    const label = `label=${LABELS.instance}=${instance}`;
    for (const c of (await swarmLab.dk(n, ['ps', '-aq', '--filter', label])).split('\n').filter(Boolean)) left.push(`n${n} container ${c}`);
    for (const v of (await swarmLab.dk(n, ['volume', 'ls', '-q', '--filter', label])).split('\n').filter(Boolean)) left.push(`n${n} volume ${v}`);
  }
  return left;
}

describeSwarm('the shell toolset and verifiers on a three-node swarm (the shipped Harbor dataset)', () => {
  let root: string;
  let bundleDir: string;
  let golden: Record<string, Call[]>;
  let ids: Map<string, number>;
  let server: swarmLab.LabServer;

  beforeAll(async () => {
    await swarmLab.lab('down', NODES);
    await swarmLab.lab('up', NODES);
    await swarmLab.prepareServerImage();
    ids = await swarmLab.nodeIds(NODES);
    // the base the imported tasks build FROM, on the manager where the server builds them
    ensureDebianBase();
    await promisify(execFile)('sh', ['-c', `docker save ${LOCAL_DEBIAN_IMAGE} | docker -H ${swarmLab.sock(1)} load -q`]);
    root = mkdtempSync(join(tmpdir(), 'openenv-swarm-shell-'));
    const src = join(root, 'dataset');
    for (const id of TASKS) cpSync(join(DATASET, id), join(src, id), { recursive: true });
    cpSync(join(DATASET, 'json-merge'), join(src, CLEAN), { recursive: true });
    bundleDir = join(root, 'harbor-swarm');
    const r = spawnSync(process.execPath, [CLI, 'import', 'harbor', src, '--out', bundleDir, '--base-image', BASE_IMAGE_RULE], {
      encoding: 'utf8',
      timeout: 300_000,
    });
    expect(r.status, r.stdout + r.stderr).toBe(0);
    const manifest = JSON.parse(readFileSync(join(bundleDir, 'bundle.json'), 'utf8'));
    const split = join(bundleDir, manifest.splits.train);
    const rows = readFileSync(split, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    for (const row of rows) if (row.task_id === CLEAN) row.verifier.mode = 'clean';
    writeFileSync(split, rows.map((row) => JSON.stringify(row)).join('\n') + '\n');
    golden = Object.fromEntries(rows.map((row) => [row.task_id, row.golden as Call[]]));
    expect(Object.keys(golden).sort()).toEqual([...TASKS, CLEAN].sort());
    server = await swarmLab.startServer({ instance: uniqueInstance('swarm-shell'), port: 18390, bundleDir, args: ['--max-concurrent-envs', '5'] });
  }, 900_000);

  afterAll(async () => {
    await swarmLab.removeServers().catch(() => {});
    await swarmLab.lab('down', NODES);
    if (root) rmSync(root, { recursive: true, force: true });
  }, 300_000);

  it('plays every task over the nodes: the oracle scores 1, an empty episode 0, the clean verifier too', async () => {
    const since = Math.floor(Date.now() / 1000) - 1;
    const ids_ = [...TASKS, CLEAN];
    const runs = await Promise.all(
      ids_.flatMap((id) => [
        play(server, id, golden[id]!).then((p) => ({ id, kind: 'golden', ...p })),
        play(server, id, [{ tool: 'end_turn' }]).then((p) => ({ id, kind: 'empty', ...p })),
      ]),
    );
    for (const r of runs) {
      const shown = `${r.id} ${r.kind}: ${JSON.stringify(r.last).slice(0, 1500)}`;
      expect(r.last, shown).toMatchObject({ done: true, reward: r.kind === 'golden' ? 1 : 0, observation: { end_reason: 'turns_ended' } });
      for (const v of Object.values(r.last.observation.scores as Record<string, number>)) expect(v, shown).toBe(r.kind === 'golden' ? 1 : 0);
    }
    const nodeOf = await startedOn(server.instance, since, NODES);
    const used = new Set(runs.map((r) => nodeOf.get(r.episode)));
    expect(used.has(undefined), `every episode's container seen starting: ${JSON.stringify([...nodeOf])}`).toBe(false);
    // swarm spread them: envs ran on workers, exec'd through their own engines
    expect(used.size).toBeGreaterThan(1);
    // the clean verifiers ran beside their envs, on the same node
    const verifiedOn = await startedOn(server.instance, since, NODES, true);
    for (const r of runs.filter((x) => x.id === CLEAN)) expect(verifiedOn.get(r.episode), `${r.kind}'s clean verifier`).toBe(nodeOf.get(r.episode));
    console.log(
      `[swarm shell] ${runs.length} episodes over nodes ${[...used].sort().join(', ')}; clean verifiers on ${runs
        .filter((x) => x.id === CLEAN)
        .map((x) => `n${verifiedOn.get(x.episode)}`)
        .join(', ')}`,
    );
  });

  it('runs the shell tools in an env on its node: bash, write_file, read_file', async () => {
    const since = Math.floor(Date.now() / 1000) - 1;
    const p = await play(server, 'word-frequency', [
      { tool: 'bash', arguments: { command: 'cd /app && echo "from bash on $(hostname)" > made.txt && cat /proc/1/cmdline | tr "\\0" " "' } },
      { tool: 'write_file', arguments: { path: '/app/written.txt', content: 'written by write_file\n' } },
      { tool: 'read_file', arguments: { path: '/app/made.txt' } },
      { tool: 'bash', arguments: { command: 'cat /app/written.txt; pwd' } },
    ]);
    expect(
      p.replies.every((r) => !r.done && r.observation.error == null && r.observation.result?.is_error !== true),
      JSON.stringify(p.replies),
    ).toBe(true);
    // process 1 is the toolbox's keeper, as on one host
    expect(text(p.replies[0]!)).toMatch(/^\/\.openenv-toolbox-[0-9a-f]+\/busybox sh -c [\s\S]* openenv-keeper \/\.openenv-toolbox-[0-9a-f]+\/busybox/);
    expect(text(p.replies[2]!)).toMatch(/from bash on /);
    expect(text(p.replies[3]!)).toMatch(/written by write_file\s+\/app/);
    const node = (await startedOn(server.instance, since, NODES)).get(p.episode);
    expect(node, 'where the env ran').toBeDefined();
    console.log(`[swarm shell] the shell tools ran on n${node}`);
    expect((await server.call('DELETE', `/episodes/${p.episode}`)).status).toBe(204);
    // the E2B API's sandboxes are not built on swarm: refused by name, not half served
    const e2b = await server.call('POST', '/e2b/sandboxes', { templateID: 'word-frequency' });
    expect(e2b.status, JSON.stringify(e2b.body)).toBe(501);
    expect(JSON.stringify(e2b.body)).toMatch(/does not run E2B sandboxes \(--sandbox swarm: not yet\)/);
  });

  it('a planted /usr/local/bin/bash ends toolchain_tampered, with no reward', async () => {
    const hack = GENERIC_HACKS.find((h) => h.id === 'bash-wrapper')!;
    const calls = [...hack.turns({ id: 'fix-median', mode: 'in-place', root: true })[0]!, { tool: 'end_turn' }];
    const p = await play(server, 'fix-median', calls);
    expect(p.replies.map(text).join('\n')).toMatch(hack.ready);
    expect(p.last.reward ?? 0).toBe(0);
    expect(p.last, JSON.stringify(p.last)).toMatchObject({
      done: true,
      observation: { failure: { reason: 'toolchain_tampered', retryable: false } },
    });
    expect(p.last.observation.failure.message).toMatch(/\/usr\/local\/bin\/bash/);
  });

  it('leaves nothing on any node once the server has stopped: no service, overlay, task, container or toolbox volume', async () => {
    // the toolbox's volume was made on every node while it served
    for (let n = 1; n <= NODES; n++)
      expect((await swarmLab.dk(n, ['volume', 'ls', '-q', '--filter', `label=${LABELS.instance}=${server.instance}`])).trim(), `n${n}`).toMatch(
        /openenv-toolbox-/,
      );
    // the drain ends what is still live
    await swarmLab.dk(1, ['stop', '--time', '180', server.name]);
    expect(Number((await swarmLab.dk(1, ['inspect', '--format', '{{.State.ExitCode}}', server.name])).trim())).toBe(0);
    await waitFor(async () => (await leftOnNodes(server.instance)).length === 0, 60_000, 'nothing of the instance on any node');
    expect(swarmLab.runningContainers(await swarmLab.footprint(server.instance, NODES))).toBe(0);
    expect(ids.size).toBe(NODES);
  }, 300_000);
});
