/**
 * The swarm backend's node engines (src/sandbox/swarm/node-engines.ts): the addresses it takes,
 * and what it makes of the engines behind them at start. The engines here are fakes that speak the
 * Engine API's `/info` and `/nodes` over real unix sockets, so dockerode dials them as it dials a
 * node's engine; the swarm lab proves the rest on real engines (multi-node.docker.test.ts).
 */
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Dockerode from 'dockerode';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { NodeEngines, nodeEngineOptions, setsNoNewPrivileges } from '../../../src/sandbox/swarm/node-engines.js';
import { serveCommand } from '../../../src/cli/serve.js';
import type { SwarmNode } from '../../../src/sandbox/swarm/tasks.js';

const dir = mkdtempSync(join(tmpdir(), 'node-engines-'));
const servers: Server[] = [];
/** the nodes whose engine created a probe container, in order */
const probesRun: string[] = [];
/** probe containers that never started, removed, by node */
const removed: string[] = [];
/** starts refused so far for a missing program, by node */
const missing: Record<string, number> = {};
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  rmSync(dir, { recursive: true, force: true });
});

interface FakeNode {
  id: string;
  state?: string;
  /** its info lists name=no-new-privileges (Docker 24 and later, when set) */
  nnp?: boolean;
  /** what its probe container exits with (0: NoNewPrivs 1, 1: 0); absent: it has no image to run one */
  probeExit?: number;
  /** how many of the probe's programs (sh, node, python3, in turn) its image lacks */
  probeMissing?: number;
}

/** an engine on a unix socket answering /info as node `n` of a swarm, and /nodes with `members` */
async function fakeEngine(name: string, n: FakeNode, members: FakeNode[] = []): Promise<string> {
  const path = join(dir, `${name}.sock`);
  const server = createServer((req, res) => {
    const url = req.url ?? '';
    let body: unknown;
    if (/\/info$/.test(url)) {
      body = {
        Swarm: { NodeID: n.id, LocalNodeState: n.state ?? 'active' },
        SecurityOptions: ['name=seccomp,profile=default', ...(n.nnp ? ['name=no-new-privileges'] : [])],
      };
    } else if (/\/nodes(\?.*)?$/.test(url)) {
      body = members.map((m) => ({ ID: m.id, Status: { State: 'ready', Addr: `10.0.0.${m.id.length}` } }));
    } else if (n.probeExit !== undefined && /\/images\/.+\/json$/.test(url)) {
      body = { Id: 'sha256:probe' };
    } else if (n.probeExit !== undefined && /\/containers\/create/.test(url)) {
      probesRun.push(n.id);
      res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ Id: 'probe-1' }));
      return;
    } else if (/\/containers\/probe-1\/start$/.test(url)) {
      if ((missing[n.id] = (missing[n.id] ?? 0) + 1) <= (n.probeMissing ?? 0)) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ message: 'OCI runtime create failed: exec: "x": executable file not found in $PATH: unknown' }));
        return;
      }
      res.writeHead(204).end();
      return;
    } else if (/\/containers\/probe-1\?/.test(url) && req.method === 'DELETE') {
      removed.push(n.id);
      res.writeHead(204).end();
      return;
    } else if (/\/containers\/probe-1\/wait/.test(url)) {
      body = { StatusCode: n.probeExit };
    } else {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(path, r));
  return path;
}

function node(id: string): SwarmNode {
  return { id, state: 'ready', availability: 'active', addr: '10.0.0.9', role: 'worker', memoryBytes: 0, nanoCpus: 0 };
}

function capture(): { logger: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  return { lines, logger: pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) }) };
}

describe('node engine addresses', () => {
  it('takes unix sockets and tcp host:port, and refuses anything else saying what it expects', () => {
    expect(nodeEngineOptions('unix:///var/run/n2.sock')).toEqual({ socketPath: '/var/run/n2.sock' });
    expect(nodeEngineOptions('tcp://node-2.internal:2375')).toEqual({ host: 'node-2.internal', port: 2375, protocol: 'http' });
    expect(nodeEngineOptions('tcp://[fd00::2]:2375')).toMatchObject({ host: 'fd00::2', port: 2375 });
    for (const bad of [
      '/var/run/n2.sock',
      'unix://relative.sock',
      'tcp://node-2',
      'tcp://node-2:0',
      'tcp://node-2:70000',
      'https://node-2:2376',
      'ssh://node-2',
    ]) {
      expect(() => nodeEngineOptions(bad), bad).toThrow(/expected a Docker engine address unix:\/\/\/PATH or tcp:\/\/HOST:PORT/);
    }
  });

  it('--swarm-node-engine is repeatable, checked at parse, and needs --sandbox swarm', () => {
    const parse = (argv: string[]) => serveCommand.parse(['b', ...argv], {});
    const o = parse(['--sandbox', 'swarm', '--swarm-node-engine', 'unix:///a.sock', '--swarm-node-engine', 'tcp://n3:2375']);
    expect(o.swarmNodeEngine).toEqual(['unix:///a.sock', 'tcp://n3:2375']);
    expect(parse(['--sandbox', 'swarm']).swarmNodeEngine).toEqual([]);
    expect(() => parse(['--sandbox', 'swarm', '--swarm-node-engine', 'n3:2375'])).toThrow(/unix:\/\/\/PATH or tcp:\/\/HOST:PORT/);
    expect(() => parse(['--swarm-node-engine', 'unix:///a.sock'])).toThrow(/needs --sandbox swarm/);
  });

  it("reads an engine's own no-new-privileges default from its security options", () => {
    expect(setsNoNewPrivileges({ SecurityOptions: ['name=seccomp,profile=default', 'name=no-new-privileges'] })).toBe(true);
    expect(setsNoNewPrivileges({ SecurityOptions: ['name=seccomp,profile=default'] })).toBe(false);
    expect(setsNoNewPrivileges({})).toBe(false);
  });
});

describe('NodeEngines.connect', () => {
  const members: FakeNode[] = [
    { id: 'manager-aaaaaaaaaaaa', nnp: true },
    { id: 'worker-bbbbbbbbbbbb', probeExit: 0 },
    { id: 'worker-cccccccccccc', probeExit: 1 },
  ];

  it("knows the manager's node and each node named, by the node id its engine says; tells which nodes lack what", async () => {
    const manager = new Dockerode({ socketPath: await fakeEngine('m1', members[0]!, members) });
    const b = await fakeEngine('b', members[1]!);
    const c = await fakeEngine('c', members[2]!);
    const { logger } = capture();
    const engines = await NodeEngines.connect(manager, [`unix://${b}`, `unix://${c}`], logger);
    try {
      expect(engines.of('manager-aaaaaaaaaaaa')).toMatchObject({ address: 'manager', noNewPrivileges: true });
      // engines whose info does not say are not known until probed
      expect(engines.of('worker-bbbbbbbbbbbb')).toMatchObject({ address: `unix://${b}`, noNewPrivileges: null });
      expect(engines.of('worker-cccccccccccc')).toMatchObject({ address: `unix://${c}`, noNewPrivileges: null });
      expect(engines.of('elsewhere')).toBeNull();
      expect(engines.of(undefined)).toBeNull();
      const all = members.map((m) => node(m.id));
      expect(engines.unreached(all)).toEqual([]);
      const before = probesRun.length;
      expect(await engines.whyNotNoNewPrivileges(all, 'env:1', logger)).toMatch(/^the engine of node worker-ccccc.* runs without dockerd --no-new-privileges$/);
      // the manager's info said so: only the two workers were probed, once each
      expect(probesRun.slice(before).sort()).toEqual(['worker-bbbbbbbbbbbb', 'worker-cccccccccccc']);
      expect(engines.of('worker-bbbbbbbbbbbb')?.noNewPrivileges).toBe(true);
      expect(await engines.whyNotNoNewPrivileges(all.slice(0, 2), 'env:1', logger)).toBeNull();
      expect(probesRun.length - before).toBe(2);
      // a node that joined later, with no engine given
      const later = [...all.slice(0, 2), node('worker-dddddddddddd')];
      expect(engines.unreached(later).map((n) => n.id)).toEqual(['worker-dddddddddddd']);
      expect(await engines.whyNotNoNewPrivileges(later, 'env:1', logger)).toMatch(/cannot ask the engine of node worker-ddddd.*--swarm-node-engine/);
    } finally {
      engines.close();
    }
  });

  it('a probe tries sh, node and python3 in turn; one that cannot tell (none of them, no image on the node) says so, and nothing is granted on it', async () => {
    const nodes: FakeNode[] = [
      { id: 'manager-eeeeeeeeeeee', probeExit: 0, probeMissing: 3 },
      { id: 'worker-ffffffffffff' },
      { id: 'worker-gggggggggggg', probeExit: 127 },
      { id: 'worker-hhhhhhhhhhhh', probeExit: 1, probeMissing: 2 },
    ];
    const manager = new Dockerode({ socketPath: await fakeEngine('m4', nodes[0]!, nodes) });
    const workers = [await fakeEngine('f', nodes[1]!), await fakeEngine('g', nodes[2]!), await fakeEngine('h', nodes[3]!)];
    const { logger, lines } = capture();
    const engines = await NodeEngines.connect(
      manager,
      workers.map((w) => `unix://${w}`),
      logger,
    );
    try {
      const why = await engines.whyNotNoNewPrivileges(
        nodes.map((n) => node(n.id)),
        'env:1',
        logger,
      );
      expect(why).toMatch(/could not tell for node manager-eeee.*its probe container of env:1 failed \(the image has none of sh, node or python3/);
      expect(why).toMatch(/could not tell for node worker-ffff.*its probe container of env:1 failed/);
      expect(why).toMatch(/could not tell for node worker-gggg.*failed \(sh exited 127\)/);
      // the third program it tried was there: it read NoNewPrivs 0
      expect(why).toMatch(/the engine of node worker-hhhh\S* \(\S+\) runs without dockerd --no-new-privileges/);
      expect(lines.filter((l) => /could not tell whether a node engine/.test(String(l.msg)))).toHaveLength(3);
      // a probe container that never started is removed (an AutoRemove one is removed by its engine when it ends)
      expect(removed.filter((n) => n === 'manager-eeeeeeeeeeee')).toHaveLength(3);
      expect(removed.filter((n) => n === 'worker-hhhhhhhhhhhh')).toHaveLength(2);
    } finally {
      engines.close();
    }
  });

  it('refuses an engine that is no node of this swarm, naming it', async () => {
    const manager = new Dockerode({ socketPath: await fakeEngine('m2', members[0]!, members) });
    const stranger = await fakeEngine('stranger', { id: 'node-of-another-swarm' });
    const notInSwarm = await fakeEngine('inactive', { id: '', state: 'inactive' });
    const { logger } = capture();
    for (const s of [stranger, notInSwarm]) {
      const err = await NodeEngines.connect(manager, [`unix://${s}`], logger).catch((e: Error) => e);
      expect(err).toMatchObject({ name: 'SandboxError', reason: 'engine_error' });
      expect((err as Error).message).toMatch(new RegExp(`--swarm-node-engine unix://${s} is the engine of no node of this swarm`));
    }
  });

  it('leaves out an engine that does not answer (a node may be down at start), saying so once', async () => {
    const manager = new Dockerode({ socketPath: await fakeEngine('m3', members[0]!, members) });
    const { logger, lines } = capture();
    const engines = await NodeEngines.connect(manager, [`unix://${join(dir, 'nobody.sock')}`], logger);
    try {
      expect(engines.unreached(members.map((m) => node(m.id))).map((n) => n.id)).toEqual(['worker-bbbbbbbbbbbb', 'worker-cccccccccccc']);
      const warned = lines.filter((l) => /did not answer/.test(String(l.msg)));
      expect(warned).toHaveLength(1);
      expect(warned[0]).toMatchObject({ address: `unix://${join(dir, 'nobody.sock')}` });
    } finally {
      engines.close();
    }
  });
});
