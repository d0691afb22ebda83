/**
 * Every failure reason, decided in one place (src/failures.ts): a table over every reason of the
 * wire schema with its retryable flag and the ToolErrorType a call it cut short reports, and the
 * verdicts that turn what the sandbox saw, or what a call got, into a reason.
 */
import { describe, expect, it } from 'vitest';
import {
  ALL_FAILURE_REASONS,
  FAILURE_REASONS,
  SANDBOX_FACTS,
  callVerdict,
  envGone,
  envVerdict,
  invalidScoresMessage,
  makeFailure,
  notReadyVerdict,
  resetCallVerdict,
  sandboxReason,
  toolErrorType,
  unexplainedDeployFailure,
} from '../src/failures.js';
import { SandboxError } from '../src/sandbox/sandbox.js';
import { FailureSchema, type FailureReason, type ToolErrorType } from '../src/protocol/observations.js';

const ids = { episode_id: 'e1', task_id: 't1' };

/** what a client sees per reason: written out here, so a change in src/failures.ts has to change this table too */
const EXPECTED: Record<FailureReason, { retryable: boolean; toolErrorType: ToolErrorType }> = {
  deploy_timeout: { retryable: true, toolErrorType: 'timeout' },
  image_unavailable: { retryable: true, toolErrorType: 'execution_error' },
  image_not_built: { retryable: false, toolErrorType: 'execution_error' },
  env_crashed: { retryable: true, toolErrorType: 'transport_error' },
  env_oom: { retryable: true, toolErrorType: 'transport_error' },
  env_unreachable: { retryable: true, toolErrorType: 'transport_error' },
  tool_timeout: { retryable: true, toolErrorType: 'timeout' },
  episode_timeout: { retryable: true, toolErrorType: 'timeout' },
  invalid_scores: { retryable: false, toolErrorType: 'execution_error' },
  engine_error: { retryable: true, toolErrorType: 'execution_error' },
  shutting_down: { retryable: true, toolErrorType: 'execution_error' },
  unschedulable: { retryable: false, toolErrorType: 'execution_error' },
  node_lost: { retryable: true, toolErrorType: 'transport_error' },
  model_calls_exhausted: { retryable: false, toolErrorType: 'execution_error' },
  model_tokens_exhausted: { retryable: false, toolErrorType: 'execution_error' },
  model_time_exhausted: { retryable: false, toolErrorType: 'timeout' },
  model_upstream_error: { retryable: true, toolErrorType: 'transport_error' },
  model_upstream_timeout: { retryable: true, toolErrorType: 'timeout' },
  verifier_timeout: { retryable: false, toolErrorType: 'timeout' },
  verifier_failed: { retryable: false, toolErrorType: 'execution_error' },
  setup_failed: { retryable: false, toolErrorType: 'execution_error' },
  storage_exceeded: { retryable: false, toolErrorType: 'execution_error' },
  env_pids_exhausted: { retryable: false, toolErrorType: 'execution_error' },
  toolchain_tampered: { retryable: false, toolErrorType: 'execution_error' },
  env_killed_by_agent: { retryable: false, toolErrorType: 'execution_error' },
  shell_broken: { retryable: false, toolErrorType: 'execution_error' },
};

describe('failure reasons', () => {
  it('the table covers exactly the reasons of the wire schema', () => {
    expect(Object.keys(FAILURE_REASONS).sort()).toEqual([...ALL_FAILURE_REASONS].sort());
    expect(Object.keys(EXPECTED).sort()).toEqual([...ALL_FAILURE_REASONS].sort());
  });

  it.each(ALL_FAILURE_REASONS.map((r) => [r]))('%s: a valid wire failure, its retryable flag and the error type of the call it cut short', (reason) => {
    const f = makeFailure(reason, 'tool', `it was ${reason}`, ids, { exit_code: 3, log_tail: 'last line' });
    expect(FailureSchema.parse(f)).toEqual(f);
    expect(f).toMatchObject({ reason, phase: 'tool', message: `it was ${reason}`, ...ids, exit_code: 3, log_tail: 'last line' });
    expect(f.retryable).toBe(EXPECTED[reason].retryable);
    expect(toolErrorType(f)).toBe(EXPECTED[reason].toolErrorType);
    expect(FAILURE_REASONS[reason].meaning.length).toBeGreaterThan(0);
  });

  it('a node lost during a call is a transport error, not an execution error', () => {
    expect(toolErrorType(makeFailure('node_lost', 'tool', 'gone', ids))).toBe('transport_error');
  });

  it('a call cut short without a failure (the episode was closed) is an execution error; an empty log tail is left out', () => {
    expect(toolErrorType(null)).toBe('execution_error');
    expect(makeFailure('env_crashed', 'tool', 'x', ids, { log_tail: '' })).not.toHaveProperty('log_tail');
  });
});

describe('verdicts', () => {
  it("the env's state after a failed call decides crashed, OOM-killed, node lost or unreachable", () => {
    const base = { running: false, exitCode: 1, oomKilled: false, logTail: 'boom' };
    expect(envVerdict(null)).toEqual({ reason: 'env_unreachable', what: 'the env is unreachable', extra: {} });
    expect(envVerdict(base)).toEqual({ reason: 'env_crashed', what: 'the env exited (code 1)', extra: { exit_code: 1, log_tail: 'boom' } });
    expect(envVerdict({ ...base, exitCode: 137, oomKilled: true }).reason).toBe('env_oom');
    // stopped by the sandbox for what it wrote: its own reason, with why, whatever its exit code says
    expect(envVerdict({ ...base, exitCode: 137, storageExceeded: 'it wrote 80 MB, past 64' })).toEqual({
      reason: 'storage_exceeded',
      what: 'it wrote 80 MB, past 64',
      extra: { exit_code: 137, log_tail: 'boom' },
    });
    // a keeper killed from inside the env (the model's, under gVisor): its own reason, not retryable; OOM and the storage stop win
    const inside = { ...base, exitCode: 137, killedFromInside: 'its process 1 was killed by signal 9, which the engine did not send' };
    expect(envVerdict(inside)).toEqual({ reason: 'env_killed_by_agent', what: inside.killedFromInside, extra: { exit_code: 137, log_tail: 'boom' } });
    expect(FAILURE_REASONS.env_killed_by_agent.retryable).toBe(false);
    expect(envGone(inside)).toBe(true);
    expect(envVerdict({ ...inside, oomKilled: true }).reason).toBe('env_oom');
    // a shell that ran and now cannot start, the env running: the agent broke it
    expect(envVerdict({ ...base, running: true, exitCode: null }, { shellBroken: 'bash: No such file' })).toMatchObject({ reason: 'shell_broken' });
    expect(envVerdict({ ...base, running: true, exitCode: null }, { shellBroken: null }).reason).toBe('env_unreachable');
    // OOM-killed wins even if the engine still says running (it marks the exit a moment later)
    expect(envVerdict({ ...base, running: true, oomKilled: true }).reason).toBe('env_oom');
    expect(envVerdict({ ...base, running: true, exitCode: null }).reason).toBe('env_unreachable');
    // running with every process slot taken (the model's fork bomb): its own reason, not the env's, and not gone
    const bombed = { ...base, running: true, exitCode: null, pidsAtLimit: 'its processes held 64 of its pids limit of 64' };
    expect(envVerdict(bombed)).toEqual({ reason: 'env_pids_exhausted', what: bombed.pidsAtLimit, extra: { exit_code: null, log_tail: 'boom' } });
    expect(envGone(bombed)).toBe(false);
    // an env that exited is crashed, whatever its last count said
    expect(envVerdict({ ...bombed, running: false, exitCode: 1 }).reason).toBe('env_crashed');
    // the failed call's shell said its forks failed: the same reason, where no count was read
    const said = { outOfProcesses: 'bash: fork: retry: Resource temporarily unavailable' };
    expect(envVerdict({ ...base, running: true, exitCode: null }, said)).toMatchObject({
      reason: 'env_pids_exhausted',
      what: 'its shell could not start a process (bash: fork: retry: Resource temporarily unavailable)',
    });
    // … but an env that exited, was OOM-killed or stopped for its writes keeps that reason
    expect(envVerdict(base, said).reason).toBe('env_crashed');
    expect(envVerdict({ ...base, running: true, oomKilled: true }, said).reason).toBe('env_oom');
    expect(envVerdict({ ...base, storageExceeded: 'it wrote 80 MB, past 64' }, said).reason).toBe('storage_exceeded');
    expect(envVerdict({ ...base, nodeGone: 'node n2 is down' })).toEqual({
      reason: 'node_lost',
      what: "the env's node was lost: node n2 is down",
      extra: {},
    });
  });

  it('an env is gone when it exited, was OOM-killed or lost its node; one that runs, or no word, is not', () => {
    const running = { running: true, exitCode: null, oomKilled: false, logTail: '' };
    expect(envGone(null)).toBe(false);
    expect(envGone(running)).toBe(false);
    expect(envGone({ ...running, running: false, exitCode: 1 })).toBe(true);
    expect(envGone({ ...running, oomKilled: true })).toBe(true);
    expect(envGone({ ...running, nodeGone: 'node n2 is down' })).toBe(true);
  });

  it('a deploy that threw what no sandbox fact explains: engine_error, retryable, with its message', () => {
    expect(unexplainedDeployFailure(new Error('oops'), ids)).toEqual({
      reason: 'engine_error',
      phase: 'deploy',
      retryable: true,
      message: 'deploy failed: oops',
      ...ids,
    });
  });

  it('a failed call: too large is the tool error (the episode goes on), a timeout of a running env is tool_timeout, the rest asks the env', () => {
    expect(callVerdict('too_large', false)).toEqual({ tool_error: 'execution_error' });
    expect(callVerdict('timeout', false)).toEqual({ reason: 'tool_timeout' });
    expect(callVerdict('timeout', true)).toBe('ask_env');
    for (const kind of ['unreachable', 'bad_response', 'aborted', 'wrong_env'] as const) expect(callVerdict(kind, false)).toBe('ask_env');
    expect(callVerdict(null, false)).toBe('ask_env');
  });

  it("the env's own /reset: a timeout is deploy_timeout, the rest asks the env", () => {
    expect(resetCallVerdict('timeout')).toEqual({ reason: 'deploy_timeout' });
    expect(resetCallVerdict('unreachable')).toBe('ask_env');
    expect(resetCallVerdict('bad_response')).toBe('ask_env');
  });

  it('each cause of invalid_scores says what was wrong', () => {
    expect(invalidScoresMessage('no_scores_reply', 'HTTP 500')).toBe('the env answered /finish with HTTP 500 and no scores object');
    expect(invalidScoresMessage('not_scores', 'score "a" is "x"')).toContain('score "a" is "x"');
    expect(invalidScoresMessage('no_reward', '{"a":1}: no score b')).toContain('no reward from the scores');
    expect(invalidScoresMessage('out_of_range', 'a = 2 (0..1)')).toContain('a = 2 (0..1)');
  });
});

describe("a sandbox's facts", () => {
  it('each fact decides one reason of the wire schema, and a SandboxError carries the reason its fact decides', () => {
    expect(SANDBOX_FACTS).toEqual({
      exited: 'env_crashed',
      oom_killed: 'env_oom',
      not_ready_in_time: 'deploy_timeout',
      no_image: 'image_unavailable',
      not_prebuilt: 'image_not_built',
      unplaceable: 'unschedulable',
      node_gone: 'node_lost',
      engine_failed: 'engine_error',
      storage_exceeded: 'storage_exceeded',
    });
    for (const [fact, reason] of Object.entries(SANDBOX_FACTS)) {
      expect(ALL_FAILURE_REASONS).toContain(reason);
      const err = new SandboxError(fact as keyof typeof SANDBOX_FACTS, 'it happened');
      expect(err).toMatchObject({ fact, reason, message: 'it happened' });
      expect(sandboxReason(fact as keyof typeof SANDBOX_FACTS)).toBe(reason);
    }
  });

  const env = { name: 'echo', port: 8000, readyPath: '/health', deployTimeoutMs: 2500, resources: { memoryMb: 128 } };

  it('an env that never got ready: killed for its memory, exited (137 explained where the kill cannot be seen), or not ready in time', () => {
    expect(notReadyVerdict({ kind: 'exited', exitCode: 137, oomKilled: true }, { env, runs: 'container' })).toEqual({
      fact: 'oom_killed',
      message: 'env `echo` ran out of memory (limit 128 MB) and was killed before it was ready',
    });
    expect(notReadyVerdict({ kind: 'exited', exitCode: 7, oomKilled: false }, { env, runs: 'container' })).toEqual({
      fact: 'exited',
      message: 'env `echo` exited with code 7 before it was ready',
    });
    // the engine saw no OOM kill: 137 is somebody's SIGKILL, said as it is
    expect(notReadyVerdict({ kind: 'exited', exitCode: 137, oomKilled: false }, { env, runs: 'container' }).message).toBe(
      'env `echo` exited with code 137 before it was ready',
    );
    expect(notReadyVerdict({ kind: 'exited', exitCode: 137, oomKilled: null }, { env, runs: 'task' })).toEqual({
      fact: 'exited',
      message: 'env `echo` exited with code 137 (137: killed by SIGKILL, e.g. for reaching its memory limit) before it was ready',
    });
    expect(notReadyVerdict({ kind: 'exited', exitCode: null, oomKilled: null }, { env, runs: 'task' }).message).toBe(
      'env `echo` exited with code ? before it was ready',
    );
    expect(notReadyVerdict({ kind: 'timeout', lastAnswer: 'HTTP 503' }, { env, runs: 'task', at: '10.0.3.5' })).toEqual({
      fact: 'not_ready_in_time',
      message: 'env `echo` was not ready within its deploy timeout (2.5 s): GET /health on port 8000 of 10.0.3.5 last got HTTP 503',
    });
    expect(notReadyVerdict({ kind: 'timeout', lastAnswer: 'ECONNREFUSED' }, { env, runs: 'container' }).message).toBe(
      'env `echo` was not ready within its deploy timeout (2.5 s): GET /health on port 8000 last got ECONNREFUSED',
    );
    expect(notReadyVerdict({ kind: 'timeout', lastAnswer: null }, { env, runs: 'process' }).message).toBe(
      'env `echo` was not ready within its deploy timeout (2.5 s): its process took the whole budget to start, before GET /health could be tried',
    );
  });
});
