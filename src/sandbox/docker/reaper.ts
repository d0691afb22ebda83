/**
 * The reaper: what a server killed hard leaves is removed even if the server never starts again.
 * The start-up sweep removes a dead server's envs only when a server with the same instance name
 * starts; a trainer that died at night and was never restarted would leave its envs running for
 * days. So `serve` starts a small watcher process beside itself (testcontainers' Reaper is the
 * model): detached (its own process group, so a signal to the server's group spares it), holding
 * a pipe to the server, doing nothing while the server lives.
 *
 * - The server ends cleanly (its drain finished): it says `stop` on the pipe first, and the
 *   reaper exits without touching anything.
 * - The pipe closes without `stop` (SIGKILL, a crash, an exit with envs left): once the server's
 *   process is gone, the reaper removes the instance's labelled containers and networks **created
 *   before that moment**, then the instance's lock markers if no live server holds the name.
 *   A server started meanwhile with the same name keeps everything it deployed (created after),
 *   and it sweeps the rest at its own start anyway. Its sandboxes' egress rules on the host
 *   (egress-rules.ts) and its toolbox volume go too, once no live server holds the name.
 * - Then it looks again, a few seconds apart, while no live server holds the name: a loaded engine
 *   finishes creations the dead server asked for after it died (a run left 8 networks that a single
 *   look missed), so each late look removes what was created before it, and the watcher exits
 *   after looks in a row that found nothing. A successor that takes the name ends the looks: what
 *   is on the engine is then its own, or swept by its start.
 *
 * The watcher is a host process: it dies with the server's container when the server runs in one
 * (there, the container's restart policy and the next start's sweep do the job), and a supervisor
 * that kills the server's whole cgroup kills it too (systemd's KillMode=control-group).
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import Dockerode from 'dockerode';
import { LABELS } from '../sandbox.js';
import { abandonedInstances, removeLockMarkers } from '../engine/instance-lock.js';
import { labelFilters } from '../engine/labels.js';
import { silentLogger } from '../engine/logger.js';
import type { Owned } from '../engine/owned.js';
import { removeOwned } from './removal.js';
import { EgressRules } from './egress-rules.js';
import { removeToolboxVolumes } from '../engine/toolbox-volume.js';

/**
 * The reaper (src/sandbox/docker/reaper.ts), the watcher `serve` starts beside itself: how often it
 * looks whether the server's process is gone once the pipe closed, and its removals' retries.
 * After its first removal it looks again every `settleMs` (the engine may still be finishing
 * creations the dead server asked for: a loaded engine was seen taking seconds) until
 * `quietPasses` looks in a row find nothing, for at most `lateForMs`.
 */
const REAPER = { pollMs: 100, removeAttempts: 5, removeBaseDelayMs: 200, settleMs: 2_000, quietPasses: 2, lateForMs: 60_000 } as const;

/** what the server writes on the pipe when it ended cleanly */
const STOP = 'stop\n';

/** the compiled entry the watcher runs (dist/sandbox/docker/reaper-main.js) */
const ENTRY = fileURLToPath(new URL('./reaper-main.js', import.meta.url));

export interface Reaper {
  pid: number;
  /** the server ended cleanly: the watcher exits, removing nothing */
  stop(): void;
}

/**
 * Starts the watcher for `instance`, or says why not (null: run from sources, where there is no
 * compiled entry). The process does not wait for it.
 */
export function startReaper(instance: string): Reaper | null {
  if (!existsSync(ENTRY)) return null;
  const child = spawn(process.execPath, [ENTRY, instance, String(process.pid)], {
    detached: true,
    stdio: ['pipe', 'ignore', 'ignore'],
    env: process.env,
  });
  child.unref();
  const pipe = child.stdin!;
  // the pipe must not hold the server open, nor fail it when the watcher is gone
  (pipe as unknown as { unref?: () => void }).unref?.();
  pipe.on('error', () => undefined);
  return {
    pid: child.pid ?? -1,
    stop: () => {
      if (!pipe.destroyed) pipe.end(STOP);
    },
  };
}

export interface ReapResult {
  containers: string[];
  networks: string[];
  markers: string[];
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/**
 * The watcher's whole life (reaper-main.ts): waits for the pipe to close; `stop` first: nothing;
 * else waits for `serverPid` to be gone and removes what the instance had on the engine from
 * before then.
 */
export async function watchAndReap(instance: string, serverPid: number, input: NodeJS.ReadableStream, docker = new Dockerode()): Promise<ReapResult | null> {
  let said = '';
  await new Promise<void>((resolve) => {
    input.on('data', (d: Buffer) => (said += d.toString()));
    input.on('end', resolve);
    input.on('close', resolve);
    input.on('error', () => resolve());
  });
  if (said.includes(STOP)) return null;
  while (alive(serverPid)) await new Promise((r) => setTimeout(r, REAPER.pollMs));
  const reaped = await reapUntilQuiet(docker, instance, Date.now());
  // its sandboxes' egress rules (egress-rules.ts) and its toolbox volume: theirs to remove too, unless a successor holds the name
  if (!(await heldByALiveServer(docker, instance))) {
    await new EgressRules(instance, silentLogger).sweep();
    await removeToolboxVolumes(docker, instance).catch(() => []);
  }
  return reaped;
}

export interface LateLooks {
  settleMs: number;
  quietPasses: number;
  lateForMs: number;
}

/**
 * Removes what the instance had before `goneAt` (reapBefore), then looks again every `settleMs`
 * while nobody holds the name, each look removing what was created before it, until
 * `quietPasses` looks in a row removed nothing or `lateForMs` passed.
 */
export async function reapUntilQuiet(docker: Dockerode, instance: string, goneAt: number, looks: LateLooks = REAPER): Promise<ReapResult> {
  const total = await reapBefore(docker, instance, goneAt);
  const until = goneAt + looks.lateForMs;
  for (let quiet = 0; quiet < looks.quietPasses && Date.now() + looks.settleMs <= until;) {
    await new Promise((r) => setTimeout(r, looks.settleMs));
    const at = Date.now();
    if (await heldByALiveServer(docker, instance)) break;
    const late = await reapBefore(docker, instance, at);
    total.containers.push(...late.containers);
    total.networks.push(...late.networks);
    total.markers.push(...late.markers);
    quiet = late.containers.length + late.networks.length === 0 ? quiet + 1 : 0;
  }
  return total;
}

async function heldByALiveServer(docker: Dockerode, instance: string): Promise<boolean> {
  // named as seen, so that an instance with no marker left counts as abandoned
  const abandoned = await abandonedInstances(docker, instance, [instance]);
  return !abandoned.some((a) => a.instance === instance);
}

/** Removes the instance's labelled containers and networks created before `goneAt`, then its markers if nobody holds the name. */
export async function reapBefore(docker: Dockerode, instance: string, goneAt: number): Promise<ReapResult> {
  const filters = JSON.stringify(labelFilters(instance));
  const [containers, networks] = await Promise.all([docker.listContainers({ all: true, filters }), docker.listNetworks({ filters })]);
  // a container's listed Created is whole seconds: one made in goneAt's second is inspected for the exact time
  const before = await Promise.all(
    containers.map(async (c) => {
      if ((c.Created + 1) * 1000 <= goneAt) return true;
      if (c.Created * 1000 > goneAt) return false;
      const created = await docker
        .getContainer(c.Id)
        .inspect()
        .then((i) => Date.parse(i.Created))
        .catch(() => Infinity);
      return created <= goneAt;
    }),
  );
  const owned: Owned = {
    envs: containers.filter((_, i) => before[i]).map((c) => ({ id: c.Id, episode: c.Labels?.[LABELS.episode] ?? '' })),
    networks: networks.filter((n) => Date.parse(n.Created) <= goneAt).map((n) => ({ id: n.Id, episode: n.Labels?.[LABELS.episode] ?? '' })),
  };
  const removed = await removeOwned(docker, owned, {
    attachContainer: null,
    attempts: REAPER.removeAttempts,
    baseDelayMs: REAPER.removeBaseDelayMs,
    log: silentLogger,
  });
  const abandoned = (await abandonedInstances(docker, instance)).find((a) => a.instance === instance);
  if (abandoned) await removeLockMarkers(docker, abandoned.markers);
  return {
    containers: removed.removed.envs.map((c) => c.id),
    networks: removed.removed.networks.map((n) => n.id),
    markers: abandoned?.markers ?? [],
  };
}
