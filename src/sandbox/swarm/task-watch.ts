/**
 * Watches the tasks of the envs this sandbox deployed, by polling the manager (one task list and
 * one node list per round for every watched env together): the moment a task ends or its node is
 * lost, the AbortSignal its deploy handed out aborts, so the episode learns that its env is gone
 * instead of waiting out a tool timeout. Swarm's event stream is local to the manager and says
 * nothing of a node that vanished, so polling is the dependable way here.
 */
import type Dockerode from 'dockerode';
import { EnvGoneError } from '../engine/env-gone.js';
import type { SandboxLogger } from '../engine/logger.js';
import { latestTask, listNodes, listTasks, LOST_NODE_STATES, TERMINAL_STATES } from './tasks.js';

interface Watched {
  envId: string;
  serviceId: string;
  controller: AbortController;
}

export class TaskWatcher {
  private readonly watched = new Map<string, Watched>();
  private timer: NodeJS.Timeout | null = null;
  private polling = false;
  private closed = false;

  constructor(
    private readonly docker: Dockerode,
    private readonly log: SandboxLogger,
    private readonly intervalMs: number,
  ) {}

  watch(envId: string, serviceId: string): AbortSignal {
    const w: Watched = { envId, serviceId, controller: new AbortController() };
    this.watched.set(envId, w);
    this.schedule();
    return w.controller.signal;
  }

  forget(envId: string): void {
    this.watched.delete(envId);
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private schedule(): void {
    if (this.timer || this.closed || this.watched.size === 0) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.poll().finally(() => this.schedule());
    }, this.intervalMs);
    // scheduled only while a deploy waits on a task's state: that wait keeps the process alive
  }

  private async poll(): Promise<void> {
    if (this.polling || this.watched.size === 0) return;
    this.polling = true;
    try {
      const batch = [...this.watched.values()];
      const [tasks, nodes] = await Promise.all([
        listTasks(
          this.docker,
          batch.map((w) => w.serviceId),
        ),
        listNodes(this.docker),
      ]);
      const nodeById = new Map(nodes.map((n) => [n.id, n]));
      for (const w of batch) {
        if (this.watched.get(w.envId) !== w) continue;
        const task = latestTask(tasks, w.serviceId);
        if (!task) {
          this.fire(w, new EnvGoneError('service_gone', "the env's service has no task any more (it was removed)"));
          continue;
        }
        const node = task.NodeID ? nodeById.get(task.NodeID) : undefined;
        if (node && LOST_NODE_STATES.has(node.state)) {
          this.fire(w, new EnvGoneError('node_gone', `the node the env ran on (${node.id.slice(0, 12)}, ${node.addr}) is ${node.state}`));
          continue;
        }
        const state = task.Status?.State ?? '';
        if (TERMINAL_STATES.has(state)) {
          const code = task.Status?.ContainerStatus?.ExitCode;
          this.fire(
            w,
            new EnvGoneError(
              'task_ended',
              `the env's task is ${state}${code !== undefined ? ` (exit code ${code})` : ''}${task.Status?.Err ? `: ${task.Status.Err}` : ''}`,
              code ?? null,
            ),
          );
        }
      }
    } catch (err) {
      this.log.debug({ err: (err as Error).message }, 'could not poll the env tasks; trying again');
    } finally {
      this.polling = false;
    }
  }

  private fire(w: Watched, reason: EnvGoneError): void {
    this.watched.delete(w.envId);
    this.log.warn({ episode: w.envId, service: w.serviceId.slice(0, 12), event: reason.event }, reason.message);
    w.controller.abort(reason);
  }
}
