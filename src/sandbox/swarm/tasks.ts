/**
 * Reading what swarm says about an episode's env: its service's task (where it runs, its state,
 * its address on the episode's overlay) and the nodes (which are up, how big the biggest is).
 */
import type Dockerode from 'dockerode';

export interface SwarmTask {
  ID: string;
  ServiceID?: string;
  NodeID?: string;
  CreatedAt?: string;
  Version?: { Index?: number };
  DesiredState?: string;
  Status?: {
    State?: string;
    Message?: string;
    Err?: string;
    ContainerStatus?: { ContainerID?: string; ExitCode?: number };
  };
  NetworksAttachments?: Array<{ Network?: { ID?: string }; Addresses?: string[] }>;
}

export interface SwarmNode {
  id: string;
  /** ready, down, unknown, disconnected */
  state: string;
  /** active, pause, drain */
  availability: string;
  addr: string;
  role: string;
  memoryBytes: number;
  nanoCpus: number;
}

/** task states after which the task never runs again */
export const TERMINAL_STATES = new Set(['complete', 'failed', 'shutdown', 'rejected', 'orphaned', 'remove']);
/** node states in which its tasks can be neither reached nor trusted */
export const LOST_NODE_STATES = new Set(['down', 'unknown', 'disconnected']);

export async function listTasks(docker: Dockerode, serviceIds: string[]): Promise<SwarmTask[]> {
  if (serviceIds.length === 0) return [];
  return (await docker.listTasks({ filters: JSON.stringify({ service: serviceIds }) })) as SwarmTask[];
}

/** the newest task of a service (a service with restart-condition none has one, unless swarm rescheduled it) */
export function latestTask(tasks: SwarmTask[], serviceId: string): SwarmTask | undefined {
  let best: SwarmTask | undefined;
  for (const t of tasks) {
    if (t.ServiceID !== serviceId) continue;
    if (
      !best ||
      (t.CreatedAt ?? '') > (best.CreatedAt ?? '') ||
      ((t.CreatedAt ?? '') === (best.CreatedAt ?? '') && (t.Version?.Index ?? 0) > (best.Version?.Index ?? 0))
    )
      best = t;
  }
  return best;
}

/** the task's own address on the network (not a VIP): "10.0.3.5/24" → "10.0.3.5" */
export function taskAddress(task: SwarmTask, networkId: string): string | null {
  for (const a of task.NetworksAttachments ?? []) {
    if (a.Network?.ID !== networkId) continue;
    const addr = a.Addresses?.[0];
    if (addr) return addr.split('/')[0] ?? null;
  }
  return null;
}

interface RawNode {
  ID: string;
  Spec?: { Availability?: string; Role?: string };
  Status?: { State?: string; Addr?: string };
  Description?: { Resources?: { NanoCPUs?: number; MemoryBytes?: number } };
}

export async function listNodes(docker: Dockerode): Promise<SwarmNode[]> {
  const raw = (await docker.listNodes()) as RawNode[];
  return raw.map((n) => ({
    id: n.ID,
    state: n.Status?.State ?? 'unknown',
    availability: n.Spec?.Availability ?? 'active',
    addr: n.Status?.Addr ?? '',
    role: n.Spec?.Role ?? 'worker',
    memoryBytes: n.Description?.Resources?.MemoryBytes ?? 0,
    nanoCpus: n.Description?.Resources?.NanoCPUs ?? 0,
  }));
}

/**
 * The node listing a deploy checks its env against, shared by the deploys of a burst: one listing
 * in flight at a time, its answer reused for `maxAgeMs` (a node lost meanwhile is the task
 * watcher's to see), a failed one not kept.
 */
export class NodeListing {
  private cached: { at: number; nodes: Promise<SwarmNode[]> } | null = null;

  constructor(
    private readonly docker: Dockerode,
    private readonly maxAgeMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  get(): Promise<SwarmNode[]> {
    const c = this.cached;
    if (c && this.now() - c.at < this.maxAgeMs) return c.nodes;
    const nodes = listNodes(this.docker);
    const entry = { at: this.now(), nodes };
    this.cached = entry;
    nodes.catch(() => {
      if (this.cached === entry) this.cached = null;
    });
    return nodes;
  }
}

/** the nodes a new task can land on */
export function schedulableNodes(nodes: SwarmNode[]): SwarmNode[] {
  return nodes.filter((n) => n.state === 'ready' && n.availability === 'active');
}

/** why a task that asks for this much can never be placed, or null when some node is big enough */
export function whyUnschedulable(nodes: SwarmNode[], memoryMb: number, cpus: number): string | null {
  const usable = schedulableNodes(nodes);
  if (usable.length === 0)
    return `no node of the swarm is ready and active (${nodes.map((n) => `${n.id.slice(0, 12)}: ${n.state}/${n.availability}`).join(', ') || 'no nodes'})`;
  const needMem = memoryMb * 1024 * 1024;
  const needCpu = Math.round(cpus * 1e9);
  if (usable.some((n) => n.memoryBytes >= needMem && n.nanoCpus >= needCpu)) return null;
  const maxMem = Math.max(...usable.map((n) => n.memoryBytes));
  const maxCpu = Math.max(...usable.map((n) => n.nanoCpus));
  return (
    `it reserves ${memoryMb} MB and ${cpus} CPU(s), and no ready node has that much ` +
    `(the largest: ${Math.floor(maxMem / 1024 / 1024)} MB, ${maxCpu / 1e9} CPU(s); ${usable.length} node(s) ready)`
  );
}
