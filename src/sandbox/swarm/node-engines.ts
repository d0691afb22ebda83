/**
 * The engines of a swarm's nodes, where the server can reach them (the manager's own, and each
 * `--swarm-node-engine`): what only the node that runs an env's container can tell. Through a
 * node's engine the swarm backend reads what an env used (its episode's cost), watches its writable
 * layer (the storage bound, storage-watch.ts, as on Docker), learns whether the kernel killed it
 * for memory, and whether that engine gives every container `no-new-privileges` (`dockerd
 * --no-new-privileges`, which its `info` lists: the way to have it on engines older than API 1.44,
 * whose services cannot ask for it).
 *
 * Each address is asked once at start who it is (`info`: its swarm node id, its security options).
 * An address that is not a node of this swarm is refused; one that does not answer is logged and
 * left out (a node may be down while the server starts): envs placed on a node the server cannot
 * reach have their wall time only, and their storage bound is not kept (docs/scaling.md).
 */
import Dockerode from 'dockerode';
import { parseEngineAddress } from '../../engine-address.js';
import { SandboxError } from '../sandbox.js';
import type { SandboxLogger } from '../engine/logger.js';
import { StorageWatch } from '../engine/storage-watch.js';
import type { SwarmNode } from './tasks.js';

/** how long an engine named at start may take to say who it is */
const NODE_ENGINE_INFO_MS = 5_000;

export interface NodeEngine {
  nodeId: string;
  /** the address it was reached at (`unix:///…`, `tcp://…`; the manager's own: `manager`) */
  address: string;
  docker: Dockerode;
  /** its engine gives every container no-new-privileges (`dockerd --no-new-privileges`) */
  noNewPrivileges: boolean;
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

  /** the nodes (of those given) whose engine the server cannot reach */
  unreached(nodes: readonly SwarmNode[]): SwarmNode[] {
    return nodes.filter((n) => !this.byNode.has(n.id));
  }

  /** null when every node given has an engine that gives each container no-new-privileges, else why not */
  whyNotNoNewPrivileges(nodes: readonly SwarmNode[]): string | null {
    const unreached = this.unreached(nodes);
    const without = nodes.filter((n) => this.byNode.get(n.id)?.noNewPrivileges === false);
    if (unreached.length === 0 && without.length === 0) return null;
    const parts: string[] = [];
    if (without.length > 0) parts.push(`the engine of ${nodeNames(without)} runs without dockerd --no-new-privileges`);
    if (unreached.length > 0) parts.push(`the server cannot ask the engine of ${nodeNames(unreached)} (--swarm-node-engine)`);
    return parts.join('; ');
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
  return { nodeId, address, docker, noNewPrivileges: setsNoNewPrivileges(info), storage: new StorageWatch(docker, log) };
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
