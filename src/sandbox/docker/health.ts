/**
 * The image's own HEALTHCHECK as readiness: when an env's container has one (its image declared
 * it; the engine runs it and keeps State.Health), its deploy waits until the engine says
 * `healthy`. `unhealthy`, the container's exit or the deploy deadline end the wait, with the
 * check's command and its last output (State.Health.Log) to say why. A container without a
 * healthcheck is ready as it is (the other probes decided).
 */
import type Dockerode from 'dockerode';
import { abortError } from '../engine/errors.js';
import { sleep } from '../engine/retry.js';

/** How often a deploy reads the engine's health status of an env whose image has a HEALTHCHECK (sandbox/docker/health.ts). */
const HEALTH_POLL_MS = 200;

export type HealthOutcome =
  /** no healthcheck: nothing to wait for */
  | { kind: 'none' }
  | { kind: 'healthy'; waitedMs: number }
  /** the engine said unhealthy, the container stopped, or the deadline passed while it was `starting` */
  | { kind: 'not_healthy'; why: 'unhealthy' | 'exited' | 'timeout'; check: string; status: string; lastOutput: string | null };

interface HealthState {
  Status?: string;
  Log?: { ExitCode?: number; Output?: string }[] | null;
}

/** the check as the Dockerfile wrote it: `CMD-SHELL curl -f …` → `curl -f …`; null when there is none (or `NONE`) */
export function healthcheckCommand(test: readonly string[] | undefined | null): string | null {
  if (!test || test.length === 0 || test[0] === 'NONE') return null;
  const [kind, ...rest] = test;
  return kind === 'CMD-SHELL' || kind === 'CMD' ? rest.join(' ') : test.join(' ');
}

/** the last run of the check, as the engine logged it: its exit code and output (trimmed, bounded) */
function lastRun(health: HealthState | undefined): string | null {
  const last = health?.Log?.at(-1);
  if (!last) return null;
  const out = (last.Output ?? '').trim();
  const bounded = out.length > 2000 ? `…${out.slice(-2000)}` : out;
  return `exit code ${last.ExitCode ?? '?'}${bounded ? `: ${bounded}` : ', no output'}`;
}

/**
 * Polls the container's health (container.inspect()) until `healthy`, `unhealthy`, its exit or
 * `deadline` (epoch ms); an abort of `signal` rejects.
 */
export async function waitForHealthy(
  docker: Dockerode,
  containerId: string,
  opts: { deadline: number; signal: AbortSignal; pollMs?: number },
): Promise<HealthOutcome> {
  const started = Date.now();
  const container = docker.getContainer(containerId);
  let check: string | null = null;
  for (let first = true; ; first = false) {
    if (opts.signal.aborted) throw abortError(opts.signal.reason);
    const info = await container.inspect();
    if (first) {
      check = healthcheckCommand(info.Config?.Healthcheck?.Test);
      if (check === null) return { kind: 'none' };
    }
    const health = (info.State as { Health?: HealthState }).Health;
    const status = health?.Status ?? 'none';
    if (status === 'healthy') return { kind: 'healthy', waitedMs: Date.now() - started };
    const ended = (why: 'unhealthy' | 'exited' | 'timeout') => ({ kind: 'not_healthy' as const, why, check: check!, status, lastOutput: lastRun(health) });
    if (status === 'unhealthy') return ended('unhealthy');
    if (!info.State.Running) return ended('exited');
    const left = opts.deadline - Date.now();
    if (left <= 0) return ended('timeout');
    await sleep(Math.min(opts.pollMs ?? HEALTH_POLL_MS, left), opts.signal).catch(() => {});
  }
}

/** The deploy's message for a container that did not become healthy. */
export function notHealthyMessage(env: { name: string; deployTimeoutMs: number }, o: Extract<HealthOutcome, { kind: 'not_healthy' }>): string {
  const what =
    o.why === 'unhealthy'
      ? 'the engine marked it unhealthy'
      : o.why === 'exited'
        ? 'its container stopped before the check passed'
        : `it was still ${o.status} when its deploy timeout (${env.deployTimeoutMs / 1000} s) passed`;
  return (
    `env \`${env.name}\` was not ready: its image's HEALTHCHECK (${o.check}) did not pass (${what}); ` +
    (o.lastOutput === null ? 'the check had not run yet (its interval is longer than the deploy timeout?)' : `its last run: ${o.lastOutput}`)
  );
}
