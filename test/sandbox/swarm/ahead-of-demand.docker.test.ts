/**
 * What the swarm backend makes ahead of demand, on a real three-node swarm (scripts/swarm-lab.sh):
 * overlays in the network stock, each taken by exactly one episode and removed after it, and the
 * warm pool, whose envs are handed out at once and refilled across the nodes with the cap held on
 * every node. Read from the swarm itself: services, overlays, tasks, containers on every node.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { uniqueInstance, waitFor } from '../../support/docker.js';
import {
  dk,
  footprint,
  lab,
  nodeIds,
  placements,
  prepareServerImage,
  removeServers,
  REPO,
  runningContainers,
  startServer,
  type LabServer,
} from '../../../scripts/lib/swarm-lab.js';
import { describeSwarm, watchContainerLives } from '../../support/swarm-lab.js';

const NODES = 3;
const FIXTURE = join(REPO, 'test/fixtures/fixture-v1');
let port = 18700;

async function reset(server: LabServer): Promise<{ id: string; pooled: boolean | undefined }> {
  const r = await server.call('POST', '/episodes', { task_id: 'fx-echo-0' });
  if (r.status !== 201) throw new Error(`reset failed: ${r.status} ${JSON.stringify(r.body)}`);
  return { id: r.body.episode_id as string, pooled: r.body.observation.timings.pooled as boolean | undefined };
}

async function echo(server: LabServer, episode: string): Promise<string> {
  const r = await server.call('POST', `/episodes/${episode}/step`, { type: 'call_tool', tool_name: 'echo', arguments: { text: `hi ${episode}` } });
  return r.body.observation.result.content[0].text as string;
}

/** the overlay the episode's service runs on */
async function overlayOf(instance: string, episode: string): Promise<string> {
  const ids = (await dk(1, ['service', 'ls', '-q', '--filter', `label=io.openenv.bundle-server.episode=${episode}`])).trim().split('\n').filter(Boolean);
  expect(ids, `one service of episode ${episode} (instance ${instance})`).toHaveLength(1);
  const target = (await dk(1, ['service', 'inspect', '--format', '{{range .Spec.TaskTemplate.Networks}}{{.Target}}{{end}}', ids[0]!])).trim();
  // the service names its network by id: the full id, as `network ls --no-trunc` has it
  return (await dk(1, ['network', 'inspect', '--format', '{{.Id}}', target])).trim();
}

async function stocked(instance: string): Promise<string[]> {
  const f = await footprint(instance, NODES);
  const full = await Promise.all(f.stocked.map(async (id) => (await dk(1, ['network', 'inspect', '--format', '{{.Id}}', id])).trim()));
  return full.sort();
}

async function exists(network: string): Promise<boolean> {
  return dk(1, ['network', 'inspect', network]).then(
    () => true,
    () => false,
  );
}

/** SIGTERM (docker stop, generous grace), then the container's exit code */
async function dkStop(server: LabServer): Promise<number> {
  await dk(1, ['stop', '--time', '180', server.name]);
  return Number((await dk(1, ['inspect', '--format', '{{.State.ExitCode}}', server.name])).trim());
}

/** nothing at all of the instance on any node, its stock included (the server has stopped) */
async function nothingAtAll(instance: string): Promise<boolean> {
  const f = await footprint(instance, NODES);
  return f.services.length + f.networks.length + f.stocked.length + f.tasks.length + runningContainers(f) === 0;
}

describeSwarm('swarm sandbox: overlays and envs made ahead of demand', () => {
  let ids: Map<string, number>;

  beforeAll(async () => {
    await lab('down', NODES);
    await lab('up', NODES);
    await prepareServerImage();
    ids = await nodeIds(NODES);
    expect(ids.size).toBe(NODES);
  }, 600_000);

  afterAll(async () => {
    await removeServers().catch(() => {});
    await lab('down', NODES);
  }, 300_000);

  it('hands each stocked overlay to exactly one episode, removes it after that episode, and leaves nothing after the drain', async () => {
    const stock = 2;
    const server = await startServer({
      instance: uniqueInstance('swarm-stock'),
      port: port++,
      bundleDir: FIXTURE,
      args: ['--max-concurrent-envs', '3', '--network-stock', String(stock)],
    });
    await waitFor(async () => (await stocked(server.instance)).length === stock, 120_000, 'the overlay stock full');
    const before = await stocked(server.instance);

    const a = await reset(server);
    const b = await reset(server);
    const netA = await overlayOf(server.instance, a.id);
    const netB = await overlayOf(server.instance, b.id);
    // each episode runs on an overlay of the stock, and no two share one
    expect(before).toContain(netA);
    expect(before).toContain(netB);
    expect(netA).not.toBe(netB);
    expect(await echo(server, a.id)).toBe(`hi ${a.id}`);
    expect(await echo(server, b.id)).toBe(`hi ${b.id}`);

    // the stock makes fresh ones for the next resets: the taken ones are never handed out again
    await waitFor(async () => (await stocked(server.instance)).length === stock + 2, 120_000, 'the stock refilled beside the two taken overlays');
    const refilled = (await stocked(server.instance)).filter((n) => n !== netA && n !== netB);
    expect(refilled).toHaveLength(stock);
    for (const n of refilled) expect(before).not.toContain(n);
    const c = await reset(server);
    const netC = await overlayOf(server.instance, c.id);
    expect(refilled).toContain(netC);

    // an episode's end removes its overlay, and only its overlay
    expect((await server.call('DELETE', `/episodes/${a.id}`)).status).toBe(204);
    await waitFor(async () => !(await exists(netA)), 120_000, "episode A's overlay removed");
    expect(await exists(netB)).toBe(true);
    expect(await exists(netC)).toBe(true);
    for (const e of [b, c]) expect((await server.call('DELETE', `/episodes/${e.id}`)).status).toBe(204);
    await waitFor(async () => !(await exists(netB)) && !(await exists(netC)), 120_000, 'the other overlays removed');
    // what is left is the stock itself, never more than its size
    await waitFor(async () => (await stocked(server.instance)).length === stock, 120_000, 'only the stock left');
    const f = await footprint(server.instance, NODES);
    expect([f.services, f.networks, f.tasks, runningContainers(f)]).toEqual([[], [], [], 0]);

    // the drain removes the stock too
    expect(await dkStop(server)).toBe(0);
    await waitFor(() => nothingAtAll(server.instance), 60_000, 'nothing of the instance left, its stock included');
  });

  it('hands out warm envs at once, refills the pool across the nodes, and holds the cap on every node', async () => {
    const cap = 6;
    const instance = uniqueInstance('swarm-warm');
    const lives = watchContainerLives(instance, NODES);
    const server = await startServer({ instance, port: port++, bundleDir: FIXTURE, args: ['--max-concurrent-envs', String(cap), '--warm-pool', String(cap)] });
    const poolReady = async () => ((await server.call('GET', '/health')).body.pool?.ready as number | undefined) ?? 0;
    await waitFor(async () => (await poolReady()) === cap, 300_000, 'the warm pool full');
    const firstPool = (await placements(server.instance)).map((p) => p.episode);
    expect(firstPool).toHaveLength(cap);

    const episodes = await Promise.all(Array.from({ length: cap }, () => reset(server)));
    expect(episodes.map((e) => e.pooled)).toEqual(Array(cap).fill(true));
    for (const e of episodes) expect(await echo(server, e.id)).toBe(`hi ${e.id}`);
    for (const e of episodes) expect((await server.call('DELETE', `/episodes/${e.id}`)).status).toBe(204);

    // the pool deploys fresh envs in the freed slots: never one an episode used
    await waitFor(async () => (await poolReady()) === cap, 300_000, 'the warm pool refilled');
    await waitFor(async () => runningContainers(await footprint(server.instance, NODES)) === cap, 120_000, "only the pool's envs running");
    const placed = await placements(server.instance);
    expect(placed).toHaveLength(cap);
    for (const p of placed) expect(firstPool).not.toContain(p.episode);
    const nodes = new Set(placed.map((p) => p.node));
    for (const n of nodes) expect(ids.has(n)).toBe(true);
    expect(nodes.size).toBeGreaterThan(1);

    expect(await dkStop(server)).toBe(0);
    await waitFor(() => nothingAtAll(server.instance), 60_000, 'nothing of the instance left');
    // pool, episodes and refills: the full pool had exactly the cap alive at once over all nodes,
    // and never more
    expect(await lives.stop()).toBe(cap);
    // its own waits allow 300 s for each fill on a slow lab: the test's bound covers them
  }, 900_000);
});
