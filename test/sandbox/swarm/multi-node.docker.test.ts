/**
 * --sandbox swarm on a real three-node swarm (scripts/swarm-lab.sh: a manager and two workers,
 * each its own dockerd in its own network namespace, a registry on the host bridge). The server
 * runs as a container on the manager n1, as deploy/swarm-manager.sh runs it; the test reaches it at n1's
 * address. Everything is read from the swarm itself: services, networks, tasks, containers on
 * every node.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { uniqueInstance, waitFor } from '../../support/docker.js';
import {
  dk,
  fixtureCopy,
  footprint,
  killNode,
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
import { describeSwarm, startedOn, watchContainerLives } from '../../support/swarm-lab.js';
import { LABELS } from '../../../src/sandbox/sandbox.js';

const NODES = 3;
/** Linux capability numbers (include/uapi/linux/capability.h), for reading CapBnd */
const CAP_NUMBERS: Record<string, number> = {
  CHOWN: 0,
  DAC_OVERRIDE: 1,
  DAC_READ_SEARCH: 2,
  FOWNER: 3,
  FSETID: 4,
  KILL: 5,
  SETGID: 6,
  SETUID: 7,
  SETPCAP: 8,
  NET_BIND_SERVICE: 10,
  NET_RAW: 13,
  SYS_CHROOT: 18,
  SYS_PTRACE: 19,
  MKNOD: 27,
  AUDIT_WRITE: 29,
  SETFCAP: 31,
};
const FIXTURE = join(REPO, 'test/fixtures/fixture-v1');
let port = 18300;

async function reset(server: LabServer, taskId = 'fx-echo-0'): Promise<string> {
  const r = await server.call('POST', '/episodes', { task_id: taskId });
  if (r.status !== 201) throw new Error(`reset failed: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.episode_id as string;
}

async function nothingLeft(instance: string): Promise<boolean> {
  const f = await footprint(instance, NODES);
  return f.services.length === 0 && f.networks.length === 0 && f.tasks.length === 0 && runningContainers(f) === 0;
}

describeSwarm('swarm sandbox on a three-node swarm', () => {
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

  it('places episodes on more than one node, and plays them to a reward', async () => {
    const server = await startServer({ instance: uniqueInstance('swarm-place'), port: port++, bundleDir: FIXTURE, args: ['--max-concurrent-envs', '6'] });
    const episodes = await Promise.all(Array.from({ length: 6 }, () => reset(server)));
    const placed = await placements(server.instance);
    expect(placed.map((p) => p.episode).sort()).toEqual([...episodes].sort());
    const nodes = new Set(placed.map((p) => p.node));
    // every task is on a node of the lab, and swarm spread them
    for (const n of nodes) expect(ids.has(n)).toBe(true);
    expect(nodes.size).toBeGreaterThan(1);
    for (const e of episodes) {
      const echo = await server.call('POST', `/episodes/${e}/step`, { type: 'call_tool', tool_name: 'echo', arguments: { text: `hi ${e}` } });
      expect(echo.body.observation.result.content[0].text).toBe(`hi ${e}`);
      const end = await server.call('POST', `/episodes/${e}/step`, { type: 'call_tool', tool_name: 'finish_now', arguments: { score: 0.5 } });
      expect(end.body).toMatchObject({ done: true, reward: 0.5 });
      // what the env used, read from the engine of the node it ran on (the server asks every node's: --swarm-node-engine)
      const node = ids.get(placed.find((p) => p.episode === e)!.node);
      const cost = end.body.observation.metadata.cost as {
        cpu_s: number | null;
        peak_memory_bytes: number | null;
        bytes_written: number | null;
        wall_s: number;
      };
      expect(cost.cpu_s, `cpu_s of an env on n${node}`).toBeGreaterThan(0);
      expect(cost.peak_memory_bytes, `peak_memory_bytes of an env on n${node}`).toBeGreaterThan(1024 * 1024);
      expect(cost.bytes_written, `bytes_written of an env on n${node}`).toBeGreaterThanOrEqual(0);
      expect(cost.wall_s).toBeGreaterThan(0);
    }
    await waitFor(() => nothingLeft(server.instance), 120_000, 'every service, network and task gone');
    await dkStop(server);
  });

  it('locks each env down on the node that runs it, as GET /bundle says it was granted', async () => {
    const server = await startServer({ instance: uniqueInstance('swarm-lockdown'), port: port++, bundleDir: FIXTURE, args: ['--max-concurrent-envs', '4'] });
    const episodes = await Promise.all(Array.from({ length: 4 }, () => reset(server)));
    const grant = (await server.call('GET', '/bundle')).body.envs.echo;
    // this engine's services cannot ask for no-new-privileges (API 1.41), but every lab node's engine
    // sets it for all its containers (dockerd --no-new-privileges), and the server asks each of them
    expect(grant).toMatchObject({ init: true, root: 'writable', runtime: 'runc', no_new_privileges: true, not_enforced: [] });
    const placed = await placements(server.instance);
    expect(new Set(placed.map((p) => p.node)).size).toBeGreaterThan(1);
    // the capability bits the grant names, as /proc/<pid>/status prints them (CapEff, hex)
    const bit = (c: string) => 1n << BigInt(CAP_NUMBERS[c]!);
    const wanted = (grant.capabilities as string[]).reduce((m, c) => m | bit(c), 0n);
    for (const p of placed) {
      const node = ids.get(p.node)!;
      const container = (
        await dk(node, ['ps', '-q', '--filter', `label=${LABELS.instance}=${server.instance}`, '--filter', `label=${LABELS.episode}=${p.episode}`])
      ).trim();
      expect(container, `episode ${p.episode}'s container on node n${node}`).not.toBe('');
      // the env's own process (the image has node and nothing else) reads its status and PID 1's name
      const probe = await dk(node, [
        'exec',
        container,
        'node',
        '-e',
        // no backslash in it: String.fromCharCode spells the newline and the NUL
        `const fs = require('fs'); const st = Object.fromEntries(fs.readFileSync('/proc/self/status', 'utf8').split(String.fromCharCode(10)).map((l) => l.split(':').map((x) => x.trim())));
         console.log(JSON.stringify({ eff: st.CapEff, bnd: st.CapBnd, nnp: st.NoNewPrivs, pid1: fs.readFileSync('/proc/1/cmdline', 'utf8').split(String.fromCharCode(0))[0] }))`,
      ]);
      const seen = JSON.parse(probe.trim()) as { eff: string; bnd: string; nnp: string; pid1: string };
      expect(BigInt(`0x${seen.bnd}`), `the bounding set on n${node}`).toBe(wanted);
      expect(seen.pid1, `PID 1 on n${node}`).toMatch(/docker-init/);
      // what the server says this engine cannot enforce is what the node shows
      expect(seen.nnp).toBe(grant.no_new_privileges ? '1' : '0');
      expect((grant.not_enforced as string[]).some((w) => w.startsWith('no-new-privileges'))).toBe(!grant.no_new_privileges);
      const limits = JSON.parse(await dk(node, ['inspect', '--format', '{{json .HostConfig}}', container])) as {
        Memory: number;
        PidsLimit: number;
        Ulimits: { Name: string; Soft: number; Hard: number }[] | null;
      };
      expect(limits.Memory).toBe(grant.memory_mb * 1024 * 1024);
      expect(limits.PidsLimit).toBe(grant.pids);
      expect(limits.Ulimits ?? []).toContainEqual({ Name: 'nofile', Soft: grant.nofile, Hard: grant.nofile });
    }
    for (const e of episodes) await server.call('DELETE', `/episodes/${e}`);
    await waitFor(() => nothingLeft(server.instance), 120_000, 'every service, network and task gone');
    await dkStop(server);
  });

  it("keeps each env's storage bound on the node that runs it: an env that writes until stopped ends storage_exceeded", async () => {
    const filler = fixtureCopy((m) => {
      m.envs.echo.resources.storage_mb = 32;
      m.envs.echo.environment = { ...(m.envs.echo.environment ?? {}), ECHO_FILL_DISK: '/fill' };
    });
    try {
      const server = await startServer({
        instance: uniqueInstance('swarm-storage'),
        port: port++,
        bundleDir: filler.dir,
        args: ['--max-concurrent-envs', '3', '--tool-timeout', '60'],
      });
      // an env's grant is in /bundle once its image is ready (the images build after the server is up)
      await waitFor(async () => (await server.call('GET', '/bundle')).body.envs.echo !== undefined, 180_000, "the env's grant in /bundle");
      expect((await server.call('GET', '/bundle')).body.envs.echo).toMatchObject({ storage_mb: 32, not_enforced: [] });
      const since = Math.floor(Date.now() / 1000) - 1;
      const episodes = await Promise.all(Array.from({ length: 3 }, () => reset(server)));
      const t0 = Date.now();
      // each env writes from its reset on; the call is cut short when its node's engine stops it, or,
      // when the env was stopped before the call came, the call gets the episode's ending reply
      const ends = await Promise.all(
        episodes.map((e) => server.call('POST', `/episodes/${e}/step`, { type: 'call_tool', tool_name: 'sleep', arguments: { seconds: 50 } })),
      );
      const endedS = ((Date.now() - t0) / 1000).toFixed(1);
      // where each env ran, from the nodes' own event logs (its service may be gone by now)
      const nodeOf = await startedOn(server.instance, since, NODES);
      // swarm spreads the three over the nodes: the workers' engines watch theirs
      expect(
        episodes.some((e) => (nodeOf.get(e) ?? 1) !== 1),
        'an env on a worker',
      ).toBe(true);
      for (const [i, r] of ends.entries()) {
        const node = nodeOf.get(episodes[i]!);
        expect(r.body, `the env on n${node}`).toMatchObject({
          done: true,
          observation: { end_reason: 'env_failed', failure: { reason: 'storage_exceeded', retryable: false } },
        });
        const wrote = Number(/wrote (\d+) MB/.exec(r.body.observation.failure.message as string)?.[1]);
        expect(wrote).toBeGreaterThan(32);
        console.log(`[swarm storage] n${node}: stopped at ${wrote} MB (storage_mb 32), all ended ${endedS} s after the calls`);
      }
      for (const e of episodes) await server.call('DELETE', `/episodes/${e}`);
      await waitFor(() => nothingLeft(server.instance), 120_000, 'every service, network and task gone');
      await dkStop(server);
    } finally {
      filler.cleanup();
    }
  });

  it('holds the cap across the cluster: running env containers on all nodes never exceed it', async () => {
    const cap = 3;
    const server = await startServer({ instance: uniqueInstance('swarm-cap'), port: port++, bundleDir: FIXTURE, args: ['--max-concurrent-envs', String(cap)] });
    // containers: every start and die on every node, from the engines' events (exact, not sampled);
    // services: the manager lists them in one call
    const lives = watchContainerLives(server.instance, NODES);
    let sampling = true;
    let maxServices = 0;
    let samples = 0;
    const sampler = (async () => {
      while (sampling) {
        const f = await footprint(server.instance, NODES);
        maxServices = Math.max(maxServices, f.services.length);
        samples++;
      }
    })();
    const played = await Promise.all(
      Array.from({ length: 8 }, async () => {
        const e = await reset(server);
        const r = await server.call('DELETE', `/episodes/${e}`);
        return r.status;
      }),
    );
    sampling = false;
    await sampler;
    await waitFor(() => nothingLeft(server.instance), 120_000, 'every service, network and task gone');
    const maxContainers = await lives.stop();
    expect(played).toEqual(Array(8).fill(204));
    expect(samples).toBeGreaterThan(0);
    expect(maxServices).toBeLessThanOrEqual(cap);
    // over the cap: what the server said of its removals (an env whose task it did not see end)
    const removals = maxContainers > cap ? (await server.logs()).split('\n').filter((l) => /not all gone in time|teardown_failed/.test(l)) : [];
    expect(maxContainers, `env containers running at once (cap ${cap}); the server's removal warnings: ${removals.join('\n') || 'none'}`).toBeLessThanOrEqual(
      cap,
    );
    expect(maxContainers).toBeGreaterThan(0);
    await dkStop(server);
  });

  it('fails a reset whose env no node can hold as unschedulable, at once and with a reason', async () => {
    const huge = fixtureCopy((m) => (m.envs.echo.resources.memory_mb = 64 * 1024 * 1024)); // 64 TB
    try {
      const server = await startServer({ instance: uniqueInstance('swarm-huge'), port: port++, bundleDir: huge.dir });
      const r = await server.call('POST', '/episodes', { task_id: 'fx-echo-0' });
      expect(r.status).toBe(502);
      const failure = r.body.failure ?? r.body.observation?.failure;
      expect(failure).toMatchObject({ reason: 'unschedulable', phase: 'deploy', retryable: false });
      expect(failure.message).toMatch(/no ready node has that much/);
      expect(JSON.stringify(r.body)).not.toMatch(/"reward":\s*\d/);
      await waitFor(() => nothingLeft(server.instance), 60_000, 'nothing left by the failed deploy');
      await dkStop(server);
    } finally {
      huge.cleanup();
    }
  });

  it('ends an episode whose worker dies as env_failed (node_lost), and gives its slot back', async () => {
    const cap = 3;
    const server = await startServer({
      instance: uniqueInstance('swarm-lost'),
      port: port++,
      bundleDir: FIXTURE,
      args: ['--max-concurrent-envs', String(cap)],
    });
    const episodes = await Promise.all(Array.from({ length: cap }, () => reset(server)));
    const placed = await placements(server.instance);
    const onWorker = placed.find((p) => ids.get(p.node) !== 1);
    expect(onWorker, `some episode on a worker: ${JSON.stringify(placed)}`).toBeDefined();
    const victim = ids.get(onWorker!.node)!;
    killNode(victim);
    try {
      await waitFor(
        async () => (await server.call('GET', `/episodes/${onWorker!.episode}`)).body.done === true,
        180_000,
        'the episode on the dead node to end',
      );
      const step = await server.call('POST', `/episodes/${onWorker!.episode}/step`, { type: 'call_tool', tool_name: 'echo', arguments: { text: 'x' } });
      expect(step.body).toMatchObject({ done: true, reward: null, observation: { end_reason: 'env_failed', failure: { reason: 'node_lost' } } });
      // the slot is back: a new episode starts while the other episodes still hold theirs
      const others = episodes.filter((e) => e !== onWorker!.episode);
      const fresh = await reset(server);
      const placedFresh = (await placements(server.instance)).find((p) => p.episode === fresh);
      expect(ids.get(placedFresh!.node)).not.toBe(victim);
      for (const e of [...others, fresh]) expect((await server.call('DELETE', `/episodes/${e}`)).status).toBe(204);
    } finally {
      // the node comes back (its swarm state is on disk) and drops its orphaned task
      await lab('up', NODES);
    }
    // a restart sweeps whatever the lost node kept
    await dkStop(server);
    const again = await startServer({ instance: server.instance, port: port++, bundleDir: FIXTURE, name: `${server.name}-2` });
    await waitFor(() => nothingLeft(again.instance), 180_000, 'nothing of the instance left on any node');
    await dkStop(again);
  });

  it('SIGTERM drains: no service, network, task or container is left on any node', async () => {
    const server = await startServer({ instance: uniqueInstance('swarm-term'), port: port++, bundleDir: FIXTURE, args: ['--max-concurrent-envs', '4'] });
    await Promise.all(Array.from({ length: 4 }, () => reset(server)));
    expect((await footprint(server.instance, NODES)).services.length).toBe(4);
    const code = await dkStop(server);
    expect(code).toBe(0);
    await waitFor(() => nothingLeft(server.instance), 60_000, 'nothing of the instance left on any node');
  });

  it('SIGKILL, then a restart with the same instance sweeps every node', async () => {
    // a server told no other node's engine: what only a worker's engine can tell is said not kept
    const server = await startServer({
      instance: uniqueInstance('swarm-kill'),
      port: port++,
      bundleDir: FIXTURE,
      args: ['--max-concurrent-envs', '4'],
      nodeEngines: false,
    });
    // an env's grant is in /bundle once its image is ready (the images build after the server is up)
    await waitFor(async () => (await server.call('GET', '/bundle')).body.envs.echo !== undefined, 180_000, "the env's grant in /bundle");
    const grant = (await server.call('GET', '/bundle')).body.envs.echo;
    expect(grant.no_new_privileges).toBe(false);
    expect(grant.not_enforced).toEqual([
      expect.stringMatching(/^no-new-privileges: .*the server cannot ask the engine of node \S+ \(10\.77\.0\.1\d\), node /),
      // the server's default storage and file bounds, which only a node's own engine can watch
      expect.stringMatching(/^storage_mb and max_files: not watched on node \S+ \(10\.77\.0\.1\d\), node .*\(--swarm-node-engine\)/),
    ]);
    await Promise.all(Array.from({ length: 4 }, () => reset(server)));
    await dk1(['kill', '--signal', 'KILL', server.name]);
    const left = await footprint(server.instance, NODES);
    expect(left.services.length).toBe(4);
    expect(runningContainers(left)).toBe(4);
    const again = await startServer({ instance: server.instance, port: port++, bundleDir: FIXTURE, name: `${server.name}-2` });
    // ready means swept: services and networks are gone already; containers stop within a bound
    const swept = await footprint(again.instance, NODES);
    expect([swept.services, swept.networks]).toEqual([[], []]);
    await waitFor(() => nothingLeft(again.instance), 60_000, 'nothing of the instance left on any node');
    expect(await again.logs()).toMatch(/"event":"startup_sweep"/);
    await dkStop(again);
  });
});

function dk1(args: string[]): Promise<string> {
  return dk(1, args);
}

/** SIGTERM (docker stop, generous grace), then the container's exit code */
async function dkStop(server: LabServer): Promise<number> {
  await dk1(['stop', '--time', '180', server.name]);
  return Number((await dk1(['inspect', '--format', '{{.State.ExitCode}}', server.name])).trim());
}
