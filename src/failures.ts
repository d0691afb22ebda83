/**
 * Every failure reason, decided here and mapped once: what each means, whether a retry of the
 * episode may succeed, and the OpenEnv ToolErrorType a call gets when the failure cut it short.
 * The backends report what they saw (an exit state, a lost node, a readiness timeout); the episode
 * reports what its call got (no answer, a timeout, a bad reply); the verdicts below turn those into
 * a reason, in one place. A table test (test/failures.test.ts) goes over every reason.
 */
import type { EnvDiagnosis } from './sandbox/sandbox.js';
import { FailureReasonSchema, type Failure, type FailurePhase, type FailureReason, type ToolErrorType } from './protocol/observations.js';

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

/** an env container that stopped: killed for its memory, or exited on its own */
export function exitReason(state: { oomKilled: boolean }): 'env_oom' | 'env_crashed' {
  return state.oomKilled ? 'env_oom' : 'env_crashed';
}

export interface EnvVerdict {
  reason: 'env_oom' | 'env_crashed' | 'env_unreachable' | 'node_lost';
  /** what happened to the env, for the failure's message */
  what: string;
  extra: FailureExtra;
}

/**
 * Why an env stopped answering, from the sandbox's look at it (null: the sandbox could not say):
 * its node lost, OOM-killed, exited, or (still running, or no word) unreachable.
 */
export function envVerdict(d: EnvDiagnosis | null): EnvVerdict {
  if (!d) return { reason: 'env_unreachable', what: 'the env is unreachable', extra: {} };
  if (d.failureReason === 'node_lost') return { reason: 'node_lost', what: `the env's node was lost: ${d.detail}`, extra: {} };
  const extra = { exit_code: d.exitCode, log_tail: d.logTail };
  if (d.oomKilled) return { reason: 'env_oom', what: 'the env was killed for running out of memory', extra };
  if (d.running) return { reason: 'env_unreachable', what: 'the env is unreachable', extra };
  return { reason: 'env_crashed', what: `the env exited (code ${d.exitCode})`, extra };
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
