/**
 * Who acts in an env's container, as numbers. The shell, the file tools and a harness run as the
 * agent's user; a user given by name (the image's USER, a bundle's `agent_user`) is looked up in
 * the container's /etc/passwd, which an agent that is root may rewrite. So every user an episode
 * uses is resolved once, as its env is attached and before the agent has run anything: the engine
 * starts the toolbox's `id` as that user (its own lookup, as for any exec), and from then on the
 * episode names the user by uid:gid only.
 */
import type { ContainerExec } from '../sandbox/container-exec.js';
import { runTrusted } from './run.js';

/** A user as the engine takes it and no file of the container can change: `uid:gid`. */
export type NumericUser = `${number}:${number}`;

/** `user` (a name, uid or uid:gid; absent: the container's own user) as uid:gid */
export async function resolveUser(exec: ContainerExec, user: string | undefined): Promise<NumericUser> {
  const r = await runTrusted(exec, 'openenv-id', 'echo "$(id -u):$(id -g)"', [], user === undefined ? { imageUser: true } : { user });
  const said = r.stdout.toString('utf8').trim();
  if (r.exitCode !== 0 || !/^\d+:\d+$/.test(said)) {
    throw new Error(
      `the user ${user === undefined ? "of the env's image" : JSON.stringify(user)} is not one the container knows: ${r.stderr || said || `exit code ${r.exitCode}`}`,
    );
  }
  return said as NumericUser;
}

/**
 * The agent's user of one episode, resolved at its first use (the shell's first call, the
 * harness's first run, a turn's upload: each comes before anything of the agent has run), then
 * kept.
 */
export class AgentUser {
  private resolved: Promise<NumericUser> | null = null;

  constructor(
    private readonly exec: ContainerExec,
    /** the bundle's `agent_user` (a name, uid or uid:gid); absent: the image's own user */
    private readonly spec: string | undefined,
  ) {}

  get(): Promise<NumericUser> {
    this.resolved ??= resolveUser(this.exec, this.spec).catch((e: unknown) => {
      this.resolved = null;
      throw e;
    });
    return this.resolved;
  }
}
