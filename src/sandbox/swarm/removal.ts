/**
 * Removing what a swarm sandbox owns (engine/owned.ts): one episode's (teardown), or everything of
 * a server instance (sweep at start, reconciler). Services scaled to nothing first (their nodes
 * report each task's end once its container stopped, and swarm's task reaper then deletes the
 * task), removed once their tasks are gone, then the overlays, which swarm refuses to remove while
 * a task of them is still around: retried until the tasks are gone, within `networkRemovalMs`.
 * `onEnvRemoved` once all of it is gone, so a slot is never freed while its env may still run on
 * its node (the cap holds on every node). A task on a node that is down stays until the node comes
 * back or is removed from the swarm (`docker node rm`); its overlay is then left for the
 * reconciler, and reported.
 */
import type Dockerode from 'dockerode';
import { SWARM } from '../../defaults.js';
import { engineMessage } from '../engine/errors.js';
import { leaveAndRemoveNetwork } from '../engine/networks.js';
import type { ListEnvs, Owned, RemovalSettings, RemoveResult } from '../engine/owned.js';
import { retry, sleep } from '../engine/retry.js';
import { removeService, stopService } from './services.js';
import { listNodes, listTasks, LOST_NODE_STATES, TERMINAL_STATES, type SwarmTask } from './tasks.js';

/** an instance's services, by label */
export function listServices(docker: Dockerode): ListEnvs {
  return async (filters) => {
    const services = (await docker.listServices({ filters })) as unknown as Array<{ ID: string; Spec?: { Labels?: Record<string, string> } }>;
    return services.map((s) => ({ id: s.ID, labels: s.Spec?.Labels }));
  };
}

export interface RemoveOptions extends RemovalSettings {
  /** how long a network removal waits for the tasks of its removed service to be gone */
  networkRemovalMs: number;
  /** called once everything was removed: only then is no env of it running on any node */
  onEnvRemoved?: () => void;
}

export async function removeOwned(docker: Dockerode, owned: Owned, opts: RemoveOptions): Promise<RemoveResult> {
  const result: RemoveResult = { removed: { envs: [], networks: [] }, failed: [] };
  const attempt = <T>(fn: () => Promise<T>) => retry(fn, { attempts: opts.attempts, baseDelayMs: opts.baseDelayMs });
  const serviceIds = owned.envs.map((s) => s.id);
  const tasks = await listTasks(docker, serviceIds).catch(() => [] as SwarmTask[]);
  const nodes = tasks.length ? await listNodes(docker).catch(() => []) : [];
  const lostNodes = new Set(nodes.filter((n) => LOST_NODE_STATES.has(n.state)).map((n) => n.id));
  const episodesOnLostNodes = new Set(
    owned.envs
      .filter((s) => tasks.some((t) => t.ServiceID === s.id && t.NodeID && lostNodes.has(t.NodeID) && !TERMINAL_STATES.has(t.Status?.State ?? '')))
      .map((s) => s.episode),
  );
  // scaled to nothing first: while the service exists its task's end is reported by its node once
  // the container has stopped, so the slot is held until then (the cap holds on the nodes too),
  // except on a node that is down, where nothing stops; then the service goes
  await Promise.all(owned.envs.map((s) => attempt(() => stopService(docker, s.id)).catch(() => undefined)));
  const running = await waitForTasksToGo(docker, serviceIds, lostNodes, opts);
  // a task not seen ended may still run its env on its node: its removal is reported failed, so
  // its slot is not said free (onEnvRemoved) while it may hold one (the cap across the cluster)
  for (const t of running) {
    const s = owned.envs.find((e) => e.id === t.ServiceID);
    if (s)
      result.failed.push({
        kind: 'service',
        ...s,
        error: new Error(
          `its task ${t.ID.slice(0, 12)} on node ${t.NodeID?.slice(0, 12) ?? '?'} was still ${t.Status?.State ?? 'unknown'} ${opts.networkRemovalMs / 1000} s after the service was scaled to nothing`,
        ),
      });
  }
  await Promise.all(
    owned.envs.map(async (s) => {
      try {
        await attempt(() => removeService(docker, s.id));
        result.removed.envs.push(s);
      } catch (error) {
        result.failed.push({ kind: 'service', ...s, error });
      }
    }),
  );
  await Promise.all(
    owned.networks.map(async (n) => {
      const until = Date.now() + (episodesOnLostNodes.has(n.episode) ? 0 : opts.networkRemovalMs);
      for (let i = 0; ; i++) {
        try {
          await leaveAndRemoveNetwork(docker, n.id, opts.attachContainer);
          result.removed.networks.push(n);
          return;
        } catch (error) {
          const inUse = /in use|active endpoints/i.test(engineMessage(error));
          if ((inUse && Date.now() < until) || (!inUse && i + 1 < opts.attempts)) {
            await sleep(inUse ? SWARM.taskPollMaxMs : opts.baseDelayMs * 2 ** i);
            continue;
          }
          const why = episodesOnLostNodes.has(n.episode)
            ? new Error(`${engineMessage(error)} (its task is on a node that is down: it goes when the node comes back or is removed with \`docker node rm\`)`)
            : error;
          result.failed.push({ kind: 'network', ...n, error: why });
          return;
        }
      }
    }),
  );
  if (result.failed.length === 0) opts.onEnvRemoved?.();
  return result;
}

/**
 * Waits until the scaled-down services' tasks are gone from swarm's store, not merely ended. Once
 * a task whose desired state is `remove` has ended, swarm's task reaper deletes it, within a
 * quarter of a second; a service removed in that moment crashes the manager of Docker 20.10
 * (Debian's docker.io): on the service's removal the manager lists its tasks, then marks each
 * `remove` in a transaction that reads the task again, and a task the reaper deleted in between is
 * a nil pointer (swarmkit's SetServiceTasksRemove, moby/swarmkit#3216; later swarmkit checks). A
 * service with no task left has nothing for it to read. Tasks on a node that is down never end and
 * are not waited for (nothing deletes them either); a task that was never placed is deleted by the
 * reaper at once. A listing that fails is tried again (a manager too busy to answer once says
 * nothing of whether the tasks are gone). Resolves with the tasks, at the deadline, not seen
 * ended: those may still run their env (a task ended and not yet reaped runs nothing), and, when
 * no listing answered at all, every service's first task as last seen is unknown: reported too.
 */
async function waitForTasksToGo(docker: Dockerode, serviceIds: string[], lostNodes: Set<string>, opts: RemoveOptions): Promise<SwarmTask[]> {
  if (serviceIds.length === 0) return [];
  const until = Date.now() + opts.networkRemovalMs;
  let left: SwarmTask[] | null = null;
  let listingError = '';
  while (Date.now() < until) {
    const tasks = await listTasks(docker, serviceIds).catch((err: unknown) => {
      listingError = engineMessage(err);
      return null;
    });
    if (tasks !== null) {
      left = tasks.filter((t) => !(t.NodeID && lostNodes.has(t.NodeID)));
      if (left.length === 0) return [];
    }
    await sleep(SWARM.taskPollMaxMs / 2);
  }
  const unknown = left === null;
  const running = (left ?? serviceIds.map((id): SwarmTask => ({ ID: '(not listed)', ServiceID: id }))).filter(
    (t) => unknown || !TERMINAL_STATES.has(t.Status?.State ?? ''),
  );
  opts.log.warn(
    {
      services: serviceIds.map((id) => id.slice(0, 12)),
      tasks: (left ?? []).map((t) => `${t.ID.slice(0, 12)} ${t.Status?.State ?? '?'}`),
      ...(unknown ? { listingError } : {}),
    },
    'the tasks of scaled-down services were not all gone in time; removing the services anyway',
  );
  return running;
}
