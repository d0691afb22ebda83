/**
 * The engines of a swarm's nodes, where the server can reach them (the manager's own, and each
 * `--swarm-node-engine`): what only the node that runs an env's container can tell. Through a
 * node's engine the swarm backend reads what an env used (its episode's cost), watches its writable
 * layer (the storage bound, storage-watch.ts, as on Docker), learns whether the kernel killed it
 * for memory, and whether that engine gives every container `no-new-privileges` (`dockerd
 * --no-new-privileges`: the way to have it on engines older than API 1.44, whose services cannot
 * ask for it).
 *
 * Each address is asked once at start who it is (`info`: its swarm node id, its security options).
 * An address that is not a node of this swarm is refused; one that does not answer is logged and
 * left out (a node may be down while the server starts): envs placed on a node the server cannot
 * reach have their wall time only, and their storage bound is not kept (docs/scaling.md).
 *
 * Whether an engine sets no-new-privileges for every container: its `info` lists
 * `name=no-new-privileges` from Docker 24 on (moby#45320); an older engine says nothing either way
 * (moby#45311), so the server asks its kernel instead, once per node: a throwaway container of an
 * env image (pulled on that node, as its first task would), started by that engine with nothing of
 * the lock-down, exits 0 when its own /proc/self/status says `NoNewPrivs: 1` and 1 when not. Swarm's
 * tasks are created by the same engine, with the same default.
 */
import Dockerode from 'dockerode';
import { parseEngineAddress } from '../../util/engine-address.js';
import { SandboxError } from '../sandbox.js';
import type { SandboxLogger } from '../engine/logger.js';
import { StorageWatch } from '../engine/storage-watch.js';
import type { SwarmNode } from './tasks.js';

/** how long an engine named at start may take to say who it is */
const NODE_ENGINE_INFO_MS = 5_000;
/** how long the no-new-privileges probe of one node may take, its image's pull included */
const NNP_PROBE_MS = 120_000;
/**
 * The probe's commands, tried in turn until the image has the program: each exits 0 when its own
 * process has no_new_privs, 1 when not (anything else: it could not tell)
 */
const NNP_PROBE_CMDS = [
  ['sh', '-c', 'grep -q "^NoNewPrivs:[[:space:]]*1$" /proc/self/status'],
  ['node', '-e', 'process.exit(/^NoNewPrivs:\\s*1$/m.test(require("fs").readFileSync("/proc/self/status", "utf8")) ? 0 : 1)'],
  ['python3', '-c', 'import re, sys; sys.exit(0 if re.search(r"^NoNewPrivs:\\s*1$", open("/proc/self/status").read(), re.M) else 1)'],
];
/** what an engine says when a container's program is not in its image */
const NO_SUCH_PROGRAM = /executable file not found|no such file or directory/i;

export interface NodeEngine {
  nodeId: string;
  /** the address it was reached at (`unix:///…`, `tcp://…`; the manager's own: `manager`) */
  address: string;
  docker: Dockerode;
  /**
   * its engine gives every container no-new-privileges (`dockerd --no-new-privileges`): true or
   * false once known (its info, or the probe), null until the probe ran or when it could not tell
   */
  noNewPrivileges: boolean | null;
  /** why the probe could not tell */
  probeFailure?: string;
  /** the storage bound of the envs it runs */
  storage: StorageWatch;
}

interface EngineInfo {
  SecurityOptions?: string[];
  Swarm?: { NodeID?: string; LocalNodeState?: string };
}

/**
 * dockerode's options for an engine address: `unix:///path/to/docker.sock` or `tcp://host:port`
 * (plain HTTP: reach a remote node's engine through an SSH-forwarded socket, not over an open port).
 * Throws a message that says what was expected.
 */
export function nodeEngineOptions(address: string): Dockerode.DockerOptions {
  const a = parseEngineAddress(address);
  return 'socketPath' in a ? a : { ...a, protocol: 'http' };
}

/** an engine's own claim to give every container no-new-privileges */
export function setsNoNewPrivileges(info: EngineInfo): boolean {
  return (info.SecurityOptions ?? []).some((o) => o.split(',')[0] === 'name=no-new-privileges');
}

/** The engines the swarm backend reaches nodes through, by swarm node id. */
export class NodeEngines {
  /** each node's no-new-privileges probe, run once */
  private readonly probes = new Map<string, Promise<void>>();

  private constructor(private readonly byNode: Map<string, NodeEngine>) {}

  /**
   * The manager's engine (always) and each address's, asked who they are. Rejects with a
   * SandboxError (engine_failed) when an address is malformed, or answers as no node of this swarm.
   */
  static async connect(manager: Dockerode, addresses: readonly string[], log: SandboxLogger): Promise<NodeEngines> {
    const byNode = new Map<string, NodeEngine>();
    const own = await askInfo(manager, 'the manager');
    const ownId = own.Swarm?.NodeID;
    if (ownId) byNode.set(ownId, engineOf(ownId, 'manager', manager, own, log));
    const members = new Set(((await manager.listNodes().catch(() => [])) as { ID: string }[]).map((n) => n.ID).concat(ownId ? [ownId] : []));
    for (const address of addresses) {
      let options: Dockerode.DockerOptions;
      try {
        options = nodeEngineOptions(address);
      } catch (err) {
        throw new SandboxError('engine_failed', `--swarm-node-engine: ${(err as Error).message}`);
      }
      const docker = new Dockerode(options);
      let info: EngineInfo;
      try {
        info = await askInfo(docker, address);
      } catch (err) {
        log.warn(
          { address, err: (err as Error).message },
          'a --swarm-node-engine did not answer: envs swarm places on its node report their wall time only, and their storage_mb is not kept',
        );
        continue;
      }
      const nodeId = info.Swarm?.NodeID ?? '';
      if (info.Swarm?.LocalNodeState !== 'active' || !members.has(nodeId)) {
        throw new SandboxError(
          'engine_failed',
          `--swarm-node-engine ${address} is the engine of no node of this swarm (its swarm state: ${info.Swarm?.LocalNodeState ?? 'unknown'}` +
            `${nodeId ? `, node ${nodeId.slice(0, 12)}` : ''}): give the engine of each node the manager lists (docker node ls)`,
        );
      }
      if (!byNode.has(nodeId)) byNode.set(nodeId, engineOf(nodeId, address, docker, info, log));
    }
    return new NodeEngines(byNode);
  }

  /** the engine of the node, or null when the server cannot reach it */
  of(nodeId: string | undefined): NodeEngine | null {
    return nodeId ? (this.byNode.get(nodeId) ?? null) : null;
  }

  /** every node engine the server reaches */
  all(): NodeEngine[] {
    return [...this.byNode.values()];
  }

  /** the nodes (of those given) whose engine the server cannot reach */
  unreached(nodes: readonly SwarmNode[]): SwarmNode[] {
    return nodes.filter((n) => !this.byNode.has(n.id));
  }

  /**
   * null when every node given has an engine that gives each container no-new-privileges, else
   * why not. Engines whose info does not say are probed with a container of `image` (once each,
   * all at once; a probe that fails is not tried again).
   */
  async whyNotNoNewPrivileges(nodes: readonly SwarmNode[], image: string, log: SandboxLogger): Promise<string | null> {
    const reached = nodes.map((n) => this.byNode.get(n.id)).filter((e): e is NodeEngine => e !== undefined);
    await Promise.all(reached.filter((e) => e.noNewPrivileges === null).map((e) => this.probe(e, image, log)));
    const unreached = this.unreached(nodes);
    const without = nodes.filter((n) => this.byNode.get(n.id)?.noNewPrivileges === false);
    const unknown = nodes.filter((n) => this.byNode.get(n.id)?.noNewPrivileges === null);
    if (unreached.length + without.length + unknown.length === 0) return null;
    const parts: string[] = [];
    if (without.length > 0) parts.push(`the engine of ${nodeNames(without)} runs without dockerd --no-new-privileges`);
    for (const n of unknown) parts.push(`the server could not tell for node ${nodeNames([n]).slice(5)}: ${this.byNode.get(n.id)!.probeFailure}`);
    if (unreached.length > 0) parts.push(`the server cannot ask the engine of ${nodeNames(unreached)} (--swarm-node-engine)`);
    return parts.join('; ');
  }

  /** runs the node's probe once (concurrent callers share it) */
  private probe(e: NodeEngine, image: string, log: SandboxLogger): Promise<void> {
    let p = this.probes.get(e.nodeId);
    if (!p) {
      p = probeNoNewPrivileges(e.docker, image).then(
        (nnp) => {
          e.noNewPrivileges = nnp;
          log.info(
            { node: e.nodeId.slice(0, 12), address: e.address, no_new_privileges: nnp },
            "a node's engine, probed: does it give its containers no-new-privileges",
          );
        },
        (err: Error) => {
          e.probeFailure = `its probe container of ${image} failed (${err.message})`;
          log.warn(
            { node: e.nodeId.slice(0, 12), address: e.address, err: err.message },
            'could not tell whether a node engine gives its containers no-new-privileges',
          );
        },
      );
      this.probes.set(e.nodeId, p);
    }
    return p;
  }

  close(): void {
    for (const e of this.byNode.values()) e.storage.close();
  }
}

/** "node 1a2b3c4d5e6f (10.0.0.2)" for each, comma-separated */
export function nodeNames(nodes: readonly SwarmNode[]): string {
  return nodes.map((n) => `node ${n.id.slice(0, 12)}${n.addr ? ` (${n.addr})` : ''}`).join(', ');
}

function engineOf(nodeId: string, address: string, docker: Dockerode, info: EngineInfo, log: SandboxLogger): NodeEngine {
  // an engine that does not list it may be older than Docker 24, which never does: probed later
  return { nodeId, address, docker, noNewPrivileges: setsNoNewPrivileges(info) ? true : null, storage: new StorageWatch(docker, log) };
}

/**
 * Whether the engine gives a container it starts no-new-privileges, asked of the kernel: a
 * container of `image` (pulled first when the engine lacks it) runs one of NNP_PROBE_CMDS (a
 * shell with grep, node or python3, the first the image has) with nothing of the lock-down, and
 * removes itself. Rejects when the image cannot be had, has none of them, or the probe takes
 * longer than NNP_PROBE_MS.
 */
export async function probeNoNewPrivileges(docker: Dockerode, image: string): Promise<boolean> {
  const signal = AbortSignal.timeout(NNP_PROBE_MS);
  const has = await docker
    .getImage(image)
    .inspect()
    .then(
      () => true,
      () => false,
    );
  if (!has) await pull(docker, image, signal);
  for (const cmd of NNP_PROBE_CMDS) {
    const c = await docker.createContainer({
      Image: image,
      Entrypoint: cmd,
      Cmd: [],
      Labels: { 'openenv.probe': 'no-new-privileges' },
      HostConfig: { AutoRemove: true, NetworkMode: 'none', Memory: 64 * 1024 * 1024 },
    });
    // asked before the start: an AutoRemove container may be gone before a later wait could ask
    const exited = (c.wait as (o: object) => Promise<{ StatusCode: number }>).call(c, { condition: 'next-exit', abortSignal: signal });
    exited.catch(() => undefined);
    try {
      await c.start();
    } catch (err) {
      // never started, so never removed by itself
      await c.remove({ force: true }).catch(() => undefined);
      if (NO_SUCH_PROGRAM.test((err as Error).message)) continue;
      throw err;
    }
    const { StatusCode } = await exited;
    if (StatusCode === 0 || StatusCode === 1) return StatusCode === 0;
    throw new Error(`${cmd[0]} exited ${StatusCode}`);
  }
  throw new Error('the image has none of sh, node or python3 to read /proc/self/status with');
}

function pull(docker: Dockerode, image: string, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    docker.pull(image, { abortSignal: signal }, (err: Error | null, stream?: NodeJS.ReadableStream) => {
      if (err || !stream) return reject(err ?? new Error(`pulling ${image}`));
      docker.modem.followProgress(stream, (e: Error | null, events?: { error?: string }[]) => {
        const failed = e ?? (events ?? []).find((ev) => ev.error);
        if (failed) reject(failed instanceof Error ? failed : new Error(String(failed.error)));
        else resolve();
      });
    });
  });
}

async function askInfo(docker: Dockerode, who: string): Promise<EngineInfo> {
  const asking = new AbortController();
  const timer = setTimeout(() => asking.abort(), NODE_ENGINE_INFO_MS);
  try {
    return (await (docker.info as (o: object) => Promise<unknown>).call(docker, { abortSignal: asking.signal })) as EngineInfo;
  } catch (err) {
    throw new Error(asking.signal.aborted ? `${who} did not answer within ${NODE_ENGINE_INFO_MS / 1000} s` : (err as Error).message, { cause: err });
  } finally {
    clearTimeout(timer);
  }
}
