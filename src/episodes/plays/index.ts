/**
 * The episode's kinds (play.ts): which one a task plays, chosen once when its episode is made, and
 * the env's container as the plays reach it.
 */
import { END_TURN, type LoadedBundle, type Task } from '../../bundle/index.js';
import { AgentUser } from '../../container/index.js';
import type { EnvHandle, EnvShell, EnvSpec } from '../../sandbox/sandbox.js';
import { BuiltinTools } from '../builtin-tools.js';
import { harnessOf } from '../harness-task.js';
import type { CallObservation, Ending, StepOutcome } from '../../protocol/observations.js';
import { toolError } from '../outcomes.js';
import { argumentsProblem } from '../replies.js';
import { TaskVerification } from '../verified-task.js';
import { EnvToolsPlay } from './env-tools.js';
import { HarnessRunPlay } from './harness-run.js';
import type { EpisodePlay, PlayEnv, PlayHost } from './play.js';
import { ShellToolsetPlay } from './shell-toolset.js';
import { VerifiedTaskPlay } from './verified-task.js';

export { httpEnvClient } from './env-tools.js';
export { TurnSetupError, type EpisodePlay, type FinishReason, type PlayEnv, type PlayHost } from './play.js';

/**
 * The task's play: its toolset's (the env's own tools, with the shell toolset when it has built-in
 * tools), scored by its verifiers when it names any, run by its harness when it (or its bundle)
 * names one.
 */
export function choosePlay(host: PlayHost): EpisodePlay {
  const { bundle, task } = host;
  const tools = (bundle.manifest.toolsets[task.toolset]?.builtin.length ?? 0) > 0 ? new ShellToolsetPlay(host) : new EnvToolsPlay(host);
  const scored = TaskVerification.needed(task) ? new VerifiedTaskPlay(host, tools) : tools;
  const harness = harnessOf(bundle, task);
  return harness ? new HarnessRunPlay(host, harness, scored) : scored;
}

/** The env's container for the plays: its exec, the agent's user (resolved before anything of the agent's runs), the toolset's built-in tools. */
export function playEnv(
  bundle: LoadedBundle,
  task: Task,
  handle: EnvHandle,
  shell: EnvShell | null,
  /** the env's spec as deployed (a clean verifier's companion is made of it) */
  deployed: EnvSpec | null,
  /** the episode's: a companion's deploy stops when it aborts */
  signal: AbortSignal,
  envGone: () => Promise<boolean>,
): PlayEnv {
  const companion = () => {
    if (!deployed) throw new Error("the env's spec is not known: no clean verifier can be made");
    return shell!.companion(handle, deployed, signal);
  };
  const exec = shell?.exec(handle) ?? null;
  const agentUser = exec ? new AgentUser(exec, bundle.envOf(task).spec.agent_user) : null;
  return { handle, exec, shell, agentUser, builtin: BuiltinTools.of(bundle, task, exec, agentUser, envGone), companion };
}

/** A call_tool step of a stepped play: its arguments refused, end_turn, a tool it does not list, or its call of one. */
export async function playCall(play: EpisodePlay, toolName: string, args: unknown, toolset: string): Promise<StepOutcome<CallObservation | Ending>> {
  const given = (args === undefined ? {} : args) as Record<string, unknown>;
  const problem = argumentsProblem(given);
  if (problem !== null) return toolError(toolName, 'invalid_args', problem);
  if (toolName === END_TURN) return play.endTurn(typeof given.answer === 'string' ? given.answer : null);
  if (!play.tools.some((t) => t.name === toolName)) {
    return toolError(toolName, 'tool_not_found', `no tool "${toolName}" in toolset "${toolset}"; tools: ${play.tools.map((t) => t.name).join(', ')}`);
  }
  return play.call(toolName, given);
}
