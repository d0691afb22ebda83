/**
 * The swarm backend's shell part (sandbox.ts EnvShell) beside the walk of a deploy: what the
 * server's own steps in env containers need on each node, through that node's engine
 * (node-engines.ts).
 *
 * - The toolbox (src/sandbox/toolbox.ts): its volume (engine/toolbox-volume.ts) is made on the
 *   engine of every node the server reaches, since swarm may place an env on any of them; an env
 *   that gets the toolbox is kept off every other node by its service's placement (`node.id!=…`
 *   per node without it), so a task never lands where the volume is missing (the engine would make
 *   it empty there) or where the server could not exec into it. A node that joins the swarm after
 *   the server started, or whose engine did not answer then, is such a node until the server
 *   restarts with its engine named (docs/scaling.md).
 * - The clean verifier's container (EnvShell.companion): made by the engine of the env's node (the
 *   env's image is there: its task ran from it), as on one host: no network at all, the env's
 *   lock-down, the toolbox, the keeper as process 1. It carries the env's labels and one of its
 *   own, and goes with the env, at the sweep, or by its remove().
 */
import type Dockerode from 'dockerode';
import { SandboxError, type EnvSpec } from '../sandbox.js';
import type { ContainerExec, ExecProcess, FileChange, PathStat } from '../container-exec.js';
import { keeperCommand, newToolboxDir, toolboxBinary } from '../toolbox.js';
import { engineMessage, isConflict, isNotFound, removeOrGone } from '../engine/errors.js';
import { dockerLockdown } from '../engine/hardening.js';
import { ownerLabels, type Owner } from '../engine/labels.js';
import type { SandboxLogger } from '../engine/logger.js';
import { sleep } from '../engine/retry.js';
import { findToolboxBinary, ToolboxVolume } from '../engine/toolbox-volume.js';
import type { NodeEngine, NodeEngines } from './node-engines.js';
import { nodeNames } from './node-engines.js';
import { schedulableNodes, type SwarmNode } from './tasks.js';

/** marks a clean verifier's container on a node (its env's labels say whose it is) */
export const COMPANION_LABEL = 'io.openenv.bundle-server.swarm-companion';

/** how long the toolbox volumes' removal at close waits for the last task containers to let them go */
const VOLUME_RELEASE_MS = 30_000;

/** the toolbox volumes of one server instance, one per node engine the server reaches */
export class SwarmToolboxes {
  /** by node id: the volume once it holds the binary (a failed one is forgotten, tried again by the next deploy) */
  private readonly volumes = new Map<string, { engine: NodeEngine; made: Promise<ToolboxVolume> }>();
  /** true once the toolbox was asked for (shell.prepare, a shell env's deploy): from then on every env gets it */
  asked = false;

  constructor(
    private readonly instance: string,
    private readonly binaryPath: string | undefined,
    private readonly log: SandboxLogger,
  ) {}

  /** the volume on a node's engine, made (or found and checked) on the first call */
  private volumeOn(engine: NodeEngine): Promise<ToolboxVolume> {
    let v = this.volumes.get(engine.nodeId)?.made;
    if (!v) {
      v = (async () => {
        const arch = ((await engine.docker.info()) as { Architecture?: string }).Architecture ?? '';
        const volume = new ToolboxVolume(engine.docker, this.instance, await findToolboxBinary(this.binaryPath, arch), this.log);
        await volume.ensure();
        return volume;
      })();
      const entry = { engine, made: v };
      this.volumes.set(engine.nodeId, entry);
      v.catch(() => {
        if (this.volumes.get(engine.nodeId) === entry) this.volumes.delete(engine.nodeId);
      });
    }
    return v;
  }

  /**
   * Makes the volume on every node engine the server reaches; resolves with its name and the nodes
   * that have it. Rejects with a SandboxError (engine_failed) when no node has it, saying why; a
   * node whose engine failed is logged and left out.
   */
  async ensure(engines: NodeEngines): Promise<{ volume: string; nodes: Set<string> }> {
    this.asked = true;
    const all = engines.all();
    const made = await Promise.allSettled(all.map((e) => this.volumeOn(e)));
    const nodes = new Set<string>();
    const failures: string[] = [];
    made.forEach((m, i) => {
      const e = all[i]!;
      if (m.status === 'fulfilled') nodes.add(e.nodeId);
      else {
        const why = m.reason instanceof Error ? m.reason.message : String(m.reason);
        failures.push(`${e.address}: ${why}`);
        this.log.warn(
          { node: e.nodeId.slice(0, 12), address: e.address, err: why },
          "could not make the toolbox volume on a node's engine: no env with the toolbox is placed there",
        );
      }
    });
    if (nodes.size === 0)
      throw new SandboxError(
        'engine_failed',
        `the toolbox volume (for the shell tools and verifiers) could be made on no node of the swarm${failures.length ? `: ${failures.join('; ')}` : ''}`,
      );
    return { volume: `openenv-toolbox-${this.instance}`, nodes };
  }

  /**
   * The placement constraints that keep an env with the toolbox on the nodes that have it (and whose
   * engine the server reaches); rejects with a SandboxError (unplaceable) when no such node can
   * take a task now.
   */
  static placement(nodes: readonly SwarmNode[], ready: ReadonlySet<string>, envName: string): string[] {
    const usable = schedulableNodes([...nodes]);
    if (!usable.some((n) => ready.has(n.id))) {
      throw new SandboxError(
        'unplaceable',
        `env \`${envName}\` needs a node whose engine the server reaches (--swarm-node-engine) to run the shell tools and the verifier in it, ` +
          `and none of the ready nodes is one: ${nodeNames(usable) || 'no node is ready'}`,
      );
    }
    return nodes.filter((n) => !ready.has(n.id)).map((n) => `node.id!=${n.id}`);
  }

  /** a fresh folder for one env's toolbox */
  static mount(volume: string): { volume: string; dir: string } {
    return { volume, dir: newToolboxDir() };
  }

  /**
   * Removes the volume from every node it was made on, waiting (up to VOLUME_RELEASE_MS) for the
   * containers of ended tasks, which the nodes remove on their own, to let it go.
   */
  async removeAll(): Promise<void> {
    const made = [...this.volumes.values()];
    this.volumes.clear();
    await Promise.all(
      made.map(async ({ engine, made: p }) => {
        const volume = await p.catch(() => null);
        if (!volume) return;
        const docker = engine.docker;
        const until = Date.now() + VOLUME_RELEASE_MS;
        for (;;) {
          try {
            await docker.getVolume(volume.name).remove();
            return;
          } catch (err) {
            if (isNotFound(err)) return;
            if (isConflict(err) && Date.now() < until) {
              await sleep(500);
              continue;
            }
            this.log.warn({ volume: volume.name, err: engineMessage(err) }, "could not remove the toolbox volume from a node's engine");
            return;
          }
        }
      }),
    );
  }
}

/**
 * A clean verifier's container on the engine of the env's node: the env's image as a shell env,
 * on no network, locked down as the env, the toolbox mounted read-only and its keeper as process 1
 * (as the Docker backend's docker/containers.ts makes it). Created, not started.
 */
export async function createCompanion(docker: Dockerode, owner: Owner, env: EnvSpec, toolbox: { volume: string; dir: string }): Promise<Dockerode.Container> {
  const lockdown = dockerLockdown({ resources: env.resources, security: env.security, runtime: env.runtime });
  return docker.createContainer({
    Image: env.image,
    Env: Object.entries(env.environment).map(([k, v]) => `${k}=${v}`),
    Labels: { ...ownerLabels(owner), [COMPANION_LABEL]: '1' },
    Cmd: keeperCommand(toolboxBinary(toolbox.dir)),
    ...(env.workdir ? { WorkingDir: env.workdir } : {}),
    ...(lockdown.user ? { User: lockdown.user } : {}),
    NetworkDisabled: true,
    HostConfig: {
      NetworkMode: 'none',
      ...lockdown.hostConfig,
      Init: false,
      Mounts: [{ Type: 'volume', Source: toolbox.volume, Target: toolbox.dir, ReadOnly: true }],
      AutoRemove: false,
      RestartPolicy: { Name: 'no' },
    },
  });
}

/** the exec of an env the server reaches on no node: every call rejects, saying so */
export class UnreachedExec implements ContainerExec {
  readonly toolbox = null;
  constructor(
    readonly id: string,
    private readonly why: string,
  ) {}
  private fail(): Promise<never> {
    return Promise.reject(new Error(this.why));
  }
  start(): Promise<ExecProcess> {
    return this.fail();
  }
  putArchive(): Promise<void> {
    return this.fail();
  }
  changes(): Promise<FileChange[]> {
    return this.fail();
  }
  getArchive(): Promise<NodeJS.ReadableStream & { destroy(): void }> {
    return this.fail();
  }
  stat(): Promise<PathStat | null> {
    return this.fail();
  }
}

/** removes a container of a node's engine; gone or being removed already is done */
export function removeNodeContainer(docker: Dockerode, id: string): Promise<void> {
  return removeOrGone(() => docker.getContainer(id).remove({ force: true, v: true }), isConflict);
}

/** the clean verifiers' containers of an instance (a dead server's, say) on each node engine given, removed; their ids */
export async function sweepCompanions(engines: readonly NodeEngine[], instance: string, instanceLabel: string): Promise<string[]> {
  const filters = JSON.stringify({ label: [`${instanceLabel}=${instance}`, COMPANION_LABEL] });
  const removed = await Promise.all(
    engines.map(async (e) => {
      const found = await e.docker.listContainers({ all: true, filters }).catch(() => []);
      await Promise.all(found.map((c) => removeNodeContainer(e.docker, c.Id).catch(() => undefined)));
      return found.map((c) => c.Id);
    }),
  );
  return removed.flat();
}
