/**
 * The shell-toolset play: the toolset's built-in tools (`"builtin": ["shell"]`, builtin-tools.ts)
 * served in the env's container, beside the env's own tools when the env is an http one (those go
 * to the env as in env-tools.ts, as do its /reset, its turns and its /finish). A shell that cannot
 * run (its container gone, no shell can start) is the env's failure, not the call's.
 */
import type { CallObservation, Ending, StepOutcome } from '../../protocol/observations.js';
import { ShellStartError } from '../../tools/shell/index.js';
import type { BuiltinTools } from '../builtin-tools.js';
import { EnvToolsPlay } from './env-tools.js';
import type { PlayEnv } from './play.js';

export class ShellToolsetPlay extends EnvToolsPlay {
  private builtin: BuiltinTools | null = null;

  override async attach(env: PlayEnv): Promise<void> {
    this.builtin = env.builtin;
    await super.attach(env);
  }

  override call(name: string, args: Record<string, unknown>): Promise<StepOutcome<CallObservation | Ending>> {
    return this.builtin?.has(name) ? this.callBuiltin(this.builtin, name, args) : super.call(name, args);
  }

  /** A call of a built-in tool (the shell), in the env's container. */
  private async callBuiltin(builtin: BuiltinTools, name: string, args: Record<string, unknown>): Promise<StepOutcome<CallObservation | Ending>> {
    const h = this.host;
    const started = h.now();
    try {
      const out = await builtin.call(name, args);
      h.metrics.toolCall.observe({ outcome: out.observation.error ? 'error' : 'ok' }, (h.now() - started) / 1000);
      return out;
    } catch (e) {
      h.metrics.toolCall.observe({ outcome: 'failed' }, (h.now() - started) / 1000);
      if (h.ended()) return h.endedOutcome(name);
      const said = e instanceof ShellStartError ? { outOfProcesses: e.outOfProcesses, shellBroken: e.brokenAfterRunning ? e.message : null } : {};
      return h.failFromEnv('tool', `tool \`${name}\` failed in the env's container: ${(e as Error).message}`, name, said);
    }
  }

  /** stops the shell's command in flight */
  override interrupt(why: string): void {
    this.builtin?.interrupt(why);
  }

  /** ends the shell */
  override async close(): Promise<void> {
    await this.builtin?.close();
  }
}
