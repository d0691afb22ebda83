/**
 * The bookkeeping every Sandbox does around an episode's env, whatever runs it: one deploy per
 * episode id at a time; a teardown of the same id finished before the id is deployed again; a
 * deploy aborted by its caller, by a teardown of its episode or by the sandbox closing (the deploy
 * then removes what it created); one shared, idempotent teardown per id; and, at close, every
 * deploy stopped and every teardown waited for.
 */
import { setMaxListeners } from 'node:events';
import { throwIfAborted } from '../util/abort.js';
import type { DeployRequest, EnvHandle } from './sandbox.js';

interface InflightDeploy {
  controller: AbortController;
  /** settles (never rejects) once the deploy and its own cleanup are over */
  settled: Promise<void>;
}

export class EnvLifecycles {
  private readonly deploys = new Map<string, InflightDeploy>();
  private readonly teardowns = new Map<string, Promise<void>>();
  /** aborted by close(): stops every deploy, readiness poll and retry timer that listens to it */
  private readonly lifetime = new AbortController();

  constructor() {
    // every deploy in flight listens to it: hundreds are normal, not a leak
    setMaxListeners(0, this.lifetime.signal);
  }

  /** aborted when the sandbox closes */
  get closing(): AbortSignal {
    return this.lifetime.signal;
  }

  /**
   * Runs `run` as the deploy of `req.envId`. `holds` says whether the sandbox still has an env
   * for that id (deploying twice without a teardown is a bug of the caller's).
   */
  async deploy(req: DeployRequest, holds: (envId: string) => boolean, run: (signal: AbortSignal) => Promise<EnvHandle>): Promise<EnvHandle> {
    throwIfAborted(req.signal);
    const { envId } = req;
    await this.teardowns.get(envId)?.catch(() => {});
    if (this.deploys.has(envId) || holds(envId)) {
      throw new Error(`episode ${envId} already has an env on this sandbox: tear it down before deploying again`);
    }
    const controller = new AbortController();
    const forward = () => controller.abort(req.signal?.reason ?? this.lifetime.signal.reason);
    req.signal?.addEventListener('abort', forward, { once: true });
    this.lifetime.signal.addEventListener('abort', forward, { once: true });
    const running = run(controller.signal);
    this.deploys.set(envId, {
      controller,
      settled: running.then(
        () => {},
        () => {},
      ),
    });
    try {
      return await running;
    } finally {
      this.deploys.delete(envId);
      req.signal?.removeEventListener('abort', forward);
      this.lifetime.signal.removeEventListener('abort', forward);
    }
  }

  /**
   * Stops a deploy of the episode in flight (it removes what it made), then runs `remove`, once per
   * id at a time. A caller who joins a teardown already running has its `onEnvRemoved` called when
   * that teardown is done.
   */
  teardown(envId: string, remove: () => Promise<void>, onEnvRemoved?: () => void): Promise<void> {
    const running = this.teardowns.get(envId);
    if (running) return onEnvRemoved ? running.then(() => onEnvRemoved()) : running;
    const p = (async () => {
      const deploying = this.deploys.get(envId);
      if (deploying) {
        deploying.controller.abort(new Error(`episode ${envId} was torn down while its env was deploying`));
        await deploying.settled;
      }
      await remove();
    })();
    this.teardowns.set(envId, p);
    const forget = () => {
      if (this.teardowns.get(envId) === p) this.teardowns.delete(envId);
    };
    p.then(forget, forget);
    return p;
  }

  /** Stops every deploy in flight and waits for it and for every teardown. */
  async close(reason: string): Promise<void> {
    this.lifetime.abort(new Error(reason));
    await Promise.all([...this.deploys.values()].map((d) => d.settled));
    await Promise.all([...this.teardowns.values()].map((t) => t.catch(() => {})));
  }
}
