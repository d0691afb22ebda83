/**
 * The built-in tools of an episode's toolset (`"builtin": ["shell"]`): listed with the env's own
 * tools (the bundle's toolset specs hold them), served here in the env's container instead of by
 * the env. One shell toolset per episode, started at its first call; between turns whose agent
 * processes were stopped (verified-task.ts) a fresh one starts at the next call.
 */
import { BUILTIN_TOOLSETS, type LoadedBundle, type Task } from '../bundle/index.js';
import type { CallObservation, StepOutcome } from '../protocol/observations.js';
import type { AgentUser } from '../container/index.js';
import { ContainerGoneError, type ContainerExec } from '../sandbox/container-exec.js';
import { ShellToolset, type ShellSettings } from '../tools/shell/index.js';
import { textResult, toolError } from './outcomes.js';

export class BuiltinTools {
  private toolset: ShellToolset | null = null;
  private closed = false;
  /** a shell of this episode has run (a later one that cannot start was broken by the agent) */
  private shellRan = false;

  private constructor(
    private readonly exec: ContainerExec,
    private readonly names: ReadonlySet<string>,
    private readonly settings: ShellSettings,
    private readonly user: AgentUser,
    private readonly envGone: () => Promise<boolean>,
  ) {}

  /**
   * The task's built-in tools in `exec`'s container, run as the agent's `user`, or null when its
   * toolset has none. `envGone` says whether the env's container has stopped (asked when a shell
   * dies under a call).
   */
  static of(bundle: LoadedBundle, task: Task, exec: ContainerExec | null, user: AgentUser | null, envGone: () => Promise<boolean>): BuiltinTools | null {
    const toolset = bundle.manifest.toolsets[task.toolset];
    if (!toolset || toolset.builtin.length === 0) return null;
    if (!exec || !user) throw new Error(`toolset "${task.toolset}" has built-in tools, but the sandbox gives no access to the env's container`);
    const names = new Set(toolset.builtin.flatMap((b) => BUILTIN_TOOLSETS[b].map((t) => t.name)));
    const env = bundle.envOf(task).spec;
    return new BuiltinTools(exec, names, env.workdir ? { workdir: env.workdir } : {}, user, envGone);
  }

  has(name: string): boolean {
    return this.names.has(name);
  }

  /**
   * One call, answered as the model reads it. Throws when the container is gone or no shell can
   * start in it (ContainerGoneError, ShellStartError): the env's failure, not the call's.
   */
  async call(name: string, args: Record<string, unknown>): Promise<StepOutcome<CallObservation>> {
    if (this.closed) throw new Error('the episode has ended: its shell is closed');
    // the user is resolved before the first shell starts: nothing of the agent's has run yet
    this.toolset ??= new ShellToolset(this.exec, { ...this.settings, user: await this.user.get(), ranBefore: this.shellRan });
    const out = await this.toolset.call(name, args);
    if (out.kind !== 'reply') return toolError(name, out.kind, out.message);
    // a shell that died with its container (stopped by the storage watch, the engine, the host) is
    // the env's end, not the model's to read and retry: the episode ends with the env's reason
    if (out.reply.result.shell_died === true && (await this.envGone())) {
      throw new ContainerGoneError(`the env's container stopped while \`${name}\` ran`);
    }
    return {
      observation: { tool_name: name, result: textResult(out.reply.text, out.reply.result, out.reply.is_error), error: null },
      reward: null,
      done: false,
    };
  }

  /** stops the command in flight, if any, saying why (a time budget passed while it ran) */
  interrupt(why: string): void {
    this.toolset?.interrupt(why);
  }

  /** ends the shell (its processes are the caller's to stop); the next call starts a new one */
  async endShell(): Promise<void> {
    const t = this.toolset;
    if (t?.session.hasRun) this.shellRan = true;
    this.toolset = null;
    await t?.close().catch(() => undefined);
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.endShell();
  }
}
