/**
 * Every failure reason, decided here and mapped once: what each means, whether a retry of the
 * episode may succeed, and the OpenEnv ToolErrorType a call gets when the failure cut it short.
 * The sandboxes report what they saw, as facts in their own words (an exit state, a lost node, a
 * readiness wait that ran out, an image the engine cannot get: SANDBOX_FACTS); the episode reports
 * what its call got (no answer, a timeout, a bad reply); the verdicts below turn those into a
 * reason, in one place. A table test (test/failures.test.ts) goes over every reason and fact.
 *
 * A ground-floor module: it imports the wire shapes and nothing of the sandbox, which imports it.
 */
import { FailureReasonSchema, type Failure, type FailurePhase, type FailureReason, type ToolErrorType } from './protocol/observations.js';
import { fmtS } from './util/time.js';

export interface ReasonMapping {
  /** a new episode of the same task may succeed (the env's or the server's trouble, not the task's) */
  retryable: boolean;
  /** what a tool call cut short by this failure reports as its error_type */
  toolErrorType: ToolErrorType;
  /** one line for a person reading a failure */
  meaning: string;
}

/** The one table: a reason missing here fails to compile. */
export const FAILURE_REASONS: Readonly<Record<FailureReason, ReasonMapping>> = {
  deploy_timeout: { retryable: true, toolErrorType: 'timeout', meaning: 'the env was not ready (or did not answer /reset) within its budget' },
  image_unavailable: { retryable: true, toolErrorType: 'execution_error', meaning: 'the engine has no image for the env, and could not get one' },
  image_not_built: {
    retryable: false,
    toolErrorType: 'execution_error',
    meaning: 'the server builds no images (--images prebuilt) and the engine has none for the env: `openenv-bundle build` makes it',
  },
  env_crashed: { retryable: true, toolErrorType: 'transport_error', meaning: 'the env exited' },
  env_oom: { retryable: true, toolErrorType: 'transport_error', meaning: 'the env was killed for reaching its memory limit' },
  env_unreachable: { retryable: true, toolErrorType: 'transport_error', meaning: 'the env runs but does not answer' },
  tool_timeout: { retryable: true, toolErrorType: 'timeout', meaning: 'a call to the env got no answer within --tool-timeout' },
  episode_timeout: { retryable: true, toolErrorType: 'timeout', meaning: 'the episode ran past --episode-timeout' },
  invalid_scores: { retryable: false, toolErrorType: 'execution_error', meaning: 'the env reported scores the server cannot turn into a reward' },
  engine_error: { retryable: true, toolErrorType: 'execution_error', meaning: 'the container engine failed an operation' },
  shutting_down: { retryable: true, toolErrorType: 'execution_error', meaning: 'the server is draining' },
  unschedulable: { retryable: false, toolErrorType: 'execution_error', meaning: 'no node of the cluster can ever hold the env' },
  node_lost: { retryable: true, toolErrorType: 'transport_error', meaning: 'the node the env ran on left the cluster' },
  model_calls_exhausted: { retryable: false, toolErrorType: 'execution_error', meaning: "the harness asked for more model calls than the episode's budget" },
  model_tokens_exhausted: { retryable: false, toolErrorType: 'execution_error', meaning: "the episode's model calls used more tokens than its budget" },
  model_time_exhausted: { retryable: false, toolErrorType: 'timeout', meaning: "the episode's model access passed its wall-time budget" },
  model_upstream_error: { retryable: true, toolErrorType: 'transport_error', meaning: 'a model call failed upstream (5xx, no connection, bad reply)' },
  model_upstream_timeout: { retryable: true, toolErrorType: 'timeout', meaning: 'a model call got no answer in time, or its stream stalled' },
  verifier_timeout: { retryable: false, toolErrorType: 'timeout', meaning: "the task's verifier (its tests) was still running at its timeout, and was killed" },
  verifier_failed: {
    retryable: false,
    toolErrorType: 'execution_error',
    meaning: "the task's verifier could not run its tests (its setup needed the network, or a tool the image lacks): no reward, whatever it wrote",
  },
  setup_failed: {
    retryable: false,
    toolErrorType: 'execution_error',
    meaning: "a turn's setup (its upload's setup.sh, its ready check) failed in the env's container",
  },
  storage_exceeded: {
    retryable: false,
    toolErrorType: 'execution_error',
    meaning: "the env wrote more than its storage_mb, or made more entries than its max_files, in its container's writable layer, and was stopped",
  },
  toolchain_tampered: {
    retryable: false,
    toolErrorType: 'execution_error',
    meaning:
      "the agent changed what an in-place verifier runs (the image's programs, libraries, the loader's configuration, a folder on PATH): the reward was refused, not computed",
  },
  env_killed_by_agent: {
    retryable: false,
    toolErrorType: 'execution_error',
    meaning: "a process in the env killed the env's process 1 (a signal the engine did not send), which ended its container: the model's doing",
  },
  shell_broken: {
    retryable: false,
    toolErrorType: 'execution_error',
    meaning:
      "the env's shell ran earlier in the episode and no new one can start, even without its saved state: the agent's commands broke it (bash removed or replaced, its libraries)",
  },
  env_pids_exhausted: {
    retryable: false,
    toolErrorType: 'execution_error',
    meaning: "the env's processes held its whole pids limit (a fork bomb, runaway forks), so no new process, no new shell, could start",
  },
};

export const ALL_FAILURE_REASONS: readonly FailureReason[] = FailureReasonSchema.options;

export interface FailureExtra {
  exit_code?: number | null;
  log_tail?: string;
}

export function makeFailure(
  reason: FailureReason,
  phase: FailurePhase,
  message: string,
  ids: { episode_id: string; task_id: string },
  extra: FailureExtra = {},
): Failure {
  const f: Failure = { reason, phase, retryable: FAILURE_REASONS[reason].retryable, message, ...ids };
  if (extra.exit_code !== undefined) f.exit_code = extra.exit_code;
  if (extra.log_tail !== undefined && extra.log_tail !== '') f.log_tail = extra.log_tail;
  return f;
}

/** the OpenEnv ToolErrorType of a call the episode's failure cut short (no failure: the episode was closed) */
export function toolErrorType(f: Failure | null): ToolErrorType {
  return f ? FAILURE_REASONS[f.reason].toolErrorType : 'execution_error';
}

/**
 * What a sandbox saw go wrong, in its own words: a SandboxError carries one, and its reason is the
 * one this table decides (a sandbox never names a reason).
 */
export const SANDBOX_FACTS = {
  /** the env stopped on its own */
  exited: 'env_crashed',
  /** the kernel killed the env for reaching its memory limit */
  oom_killed: 'env_oom',
  /** the env was not ready, or its task had not even started, by its deploy timeout */
  not_ready_in_time: 'deploy_timeout',
  /** the engine has no image for the env and could not build, push or pull one */
  no_image: 'image_unavailable',
  /** the image is not on the engine, and the server was told to build none (--images prebuilt) */
  not_prebuilt: 'image_not_built',
  /** no node of the cluster can ever hold the env (it asks for more than the largest has, or none is up) */
  unplaceable: 'unschedulable',
  /** the node the env ran on left the cluster */
  node_gone: 'node_lost',
  /** the engine failed a call or cannot be reached, or the sandbox is closed */
  engine_failed: 'engine_error',
  /** the sandbox stopped the env for what it wrote past its storage bound */
  storage_exceeded: 'storage_exceeded',
} as const satisfies Record<string, FailureReason>;

export type SandboxFact = keyof typeof SANDBOX_FACTS;
/** the reasons a sandbox's facts decide */
export type SandboxFailureReason = (typeof SANDBOX_FACTS)[SandboxFact];

export function sandboxReason(fact: SandboxFact): SandboxFailureReason {
  return SANDBOX_FACTS[fact];
}

/** How the wait for an env's readiness ended when the env did not get ready: facts, for notReadyVerdict. */
export type NotReady =
  /** it stopped: its exit code, and whether the kernel killed it for its memory (null: this engine cannot tell) */
  | { kind: 'exited'; exitCode: number | null; oomKilled: boolean | null }
  /** its deploy timeout passed while it ran: what GET <readyPath> last got (null: the wait never got to ask) */
  | { kind: 'timeout'; lastAnswer: string | null };

export interface NotReadyContext {
  env: { name: string; port: number; readyPath: string; deployTimeoutMs: number; resources: { memoryMb: number }; kind?: 'http' | 'shell' };
  /** what runs the env, as the message calls it: container, task, process */
  runs: string;
  /** the address the ready path was asked at, when the message names it */
  at?: string;
}

/**
 * The deploy verdict of an env that was started and never got ready, for every sandbox: killed for
 * its memory, exited, or not ready within its deploy timeout, with the message a person acts on.
 */
export function notReadyVerdict(outcome: NotReady, c: NotReadyContext): { fact: SandboxFact; message: string } {
  const { env } = c;
  if (outcome.kind === 'exited') {
    if (outcome.oomKilled) {
      return { fact: 'oom_killed', message: `env \`${env.name}\` ran out of memory (limit ${env.resources.memoryMb} MB) and was killed before it was ready` };
    }
    // an engine that cannot see the kill (the container ran on another node) can still read the code
    const hint = outcome.oomKilled === null && outcome.exitCode === 137 ? ' (137: killed by SIGKILL, e.g. for reaching its memory limit)' : '';
    return { fact: 'exited', message: `env \`${env.name}\` exited with code ${outcome.exitCode ?? '?'}${hint} before it was ready` };
  }
  // a shell env is ready when an exec in its container answers
  const probe = env.kind === 'shell' ? 'an exec in it' : `GET ${env.readyPath}`;
  return {
    fact: 'not_ready_in_time',
    message:
      `env \`${env.name}\` was not ready within its deploy timeout (${fmtS(env.deployTimeoutMs)}): ` +
      (outcome.lastAnswer === null
        ? `its ${c.runs} took the whole budget to start, before ${probe} could be tried`
        : `${env.kind === 'shell' ? probe : `${probe} on port ${env.port}${c.at ? ` of ${c.at}` : ''}`} last got ${outcome.lastAnswer}`),
  };
}

/** What a sandbox's look at an env says (its EnvDiagnosis), as envVerdict reads it. */
export interface EnvLook {
  running: boolean;
  exitCode: number | null;
  oomKilled: boolean;
  logTail: string;
  /** set when the node the env ran on is gone: what is known of it */
  nodeGone?: string;
  /** set when the sandbox stopped the env for what it wrote (its storage bound): why */
  storageExceeded?: string;
  /** set when the env runs with its processes at its pids limit: what the sandbox read */
  pidsAtLimit?: string;
  /** set when the env's process 1 (the server's keeper) died of a signal the engine did not send: what the sandbox saw */
  killedFromInside?: string;
}

export interface EnvVerdict {
  reason: 'env_oom' | 'env_crashed' | 'env_unreachable' | 'node_lost' | 'storage_exceeded' | 'env_pids_exhausted' | 'env_killed_by_agent' | 'shell_broken';
  /** what happened to the env, for the failure's message */
  what: string;
  extra: FailureExtra;
}

/** what the failed call itself said of the env, beside the sandbox's look */
export interface CallEvidence {
  /** the env's shell said it could not start a process (bash's own fork failure line) */
  outOfProcesses?: string | null;
  /** a shell ran earlier in the episode, and neither a new nor a fresh one can start now: why */
  shellBroken?: string | null;
}

/**
 * Why an env stopped answering, from the sandbox's look at it (null: the sandbox could not say)
 * and what the failed call said: its node lost, OOM-killed, exited, still running with every
 * process slot taken (the model's fork bomb: no new shell can start; the sandbox read its count,
 * or the shell said its forks failed, which holds where the count cannot be read and when a
 * bomb's count swings under the limit), still running with a shell that ran earlier and cannot
 * start now (the agent broke it), or (still running, or no word) unreachable.
 */
export function envVerdict(d: EnvLook | null, said: CallEvidence = {}): EnvVerdict {
  const forkFailed = said.outOfProcesses ? `its shell could not start a process (${said.outOfProcesses})` : null;
  if (!d)
    return forkFailed
      ? { reason: 'env_pids_exhausted', what: forkFailed, extra: {} }
      : { reason: 'env_unreachable', what: 'the env is unreachable', extra: {} };
  if (d.nodeGone !== undefined) return { reason: 'node_lost', what: `the env's node was lost: ${d.nodeGone}`, extra: {} };
  const extra = { exit_code: d.exitCode, log_tail: d.logTail };
  if (d.storageExceeded !== undefined) return { reason: 'storage_exceeded', what: d.storageExceeded, extra };
  if (d.oomKilled) return { reason: 'env_oom', what: 'the env was killed for running out of memory', extra };
  if (d.running && d.pidsAtLimit !== undefined) return { reason: 'env_pids_exhausted', what: d.pidsAtLimit, extra };
  if (d.running && forkFailed) return { reason: 'env_pids_exhausted', what: forkFailed, extra };
  if (d.running && said.shellBroken) return { reason: 'shell_broken', what: `its shell, which ran earlier, cannot start any more: ${said.shellBroken}`, extra };
  if (d.running) return { reason: 'env_unreachable', what: 'the env is unreachable', extra };
  if (d.killedFromInside !== undefined) return { reason: 'env_killed_by_agent', what: d.killedFromInside, extra };
  return { reason: 'env_crashed', what: `the env exited (code ${d.exitCode})`, extra };
}

/** the env is gone (exited, killed for its memory, its node lost, stopped for its writes), not merely silent or out of process slots */
export function envGone(d: EnvLook | null): boolean {
  if (d === null) return false;
  const { reason } = envVerdict(d);
  return reason !== 'env_unreachable' && reason !== 'env_pids_exhausted';
}

/** how a call to the env ended that got no usable answer, as env-client.ts's EnvCallError kinds say */
export type CallErrorKind = 'timeout' | 'unreachable' | 'bad_response' | 'aborted' | 'wrong_env' | 'too_large';

/**
 * What a failed tool (or /finish) call means: an answer too large to read is the tool's error
 * (the episode goes on); a timeout is `tool_timeout` while the env still runs; anything else
 * (and a timeout of an env that exited) is for the env's state to decide (envVerdict).
 */
export function callVerdict(kind: CallErrorKind | null, envExited: boolean): { tool_error: ToolErrorType } | { reason: 'tool_timeout' } | 'ask_env' {
  if (kind === 'too_large') return { tool_error: 'execution_error' };
  if (kind === 'timeout' && !envExited) return { reason: 'tool_timeout' };
  return 'ask_env';
}

/**
 * Why the env's own /reset failed: a timeout is `deploy_timeout` (the env was deployed but never
 * ready to play); anything else is for the env's state to decide.
 */
export function resetCallVerdict(kind: CallErrorKind): { reason: 'deploy_timeout' } | 'ask_env' {
  return kind === 'timeout' ? { reason: 'deploy_timeout' } : 'ask_env';
}

/** a deploy that threw what no sandbox fact explains (a bug, most likely): counted as the engine's, so a retry may succeed */
export function unexplainedDeployFailure(e: unknown, ids: { episode_id: string; task_id: string }): Failure {
  return makeFailure('engine_error', 'deploy', `deploy failed: ${(e as Error)?.message ?? String(e)}`, ids);
}

/**
 * The causes of `invalid_scores`; each is the env's (or the reward function's) fault, never
 * retryable. `out_of_range` is for a bundle that declares score ranges.
 */
export type InvalidScoresCause = 'no_scores_reply' | 'not_scores' | 'no_reward' | 'out_of_range';

export function invalidScoresMessage(cause: InvalidScoresCause, detail: string): string {
  switch (cause) {
    case 'no_scores_reply':
      return `the env answered /finish with ${detail} and no scores object`;
    case 'not_scores':
      return `the env reported invalid scores: ${detail}`;
    case 'no_reward':
      return `no reward from the scores ${detail}`;
    case 'out_of_range':
      return `the env reported scores out of their declared range: ${detail}`;
  }
}
