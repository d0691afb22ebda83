import { describe, expect, it } from 'vitest';
import { makeFailure } from '../../src/failures.js';
import { argumentsProblem, endedOutcome, nextTurnOutcome, scoredOutcome, timingsOf, turnNoticeOutcome, withEnding } from '../../src/episodes/replies.js';
import { MAX_ARGUMENT_DEPTH } from '../../src/defaults.js';
import { textResult } from '../../src/episodes/outcomes.js';

const timings = { queued_s: 1, deploy_s: 2, running_s: 3 };

describe('replies', () => {
  it('endedOutcome: the ending, and as a call’s reply its error saying why', () => {
    const failure = makeFailure('env_crashed', 'tool', 'it exited', { episode_id: 'e', task_id: 't' });
    const state = { reward: null, endReason: 'env_failed' as const, failure, scores: null, timings };
    expect(endedOutcome(state, null)).toEqual({
      observation: { done: true, reward: null, end_reason: 'env_failed', timings, failure },
      reward: null,
      done: true,
    });
    expect(endedOutcome(state, 'echo').observation).toEqual({
      tool_name: 'echo',
      result: null,
      error: { error_type: 'transport_error', message: 'it exited' },
      done: true,
      reward: null,
      end_reason: 'env_failed',
      timings,
      failure,
    });
    const closed = endedOutcome({ reward: null, endReason: null, failure: null, scores: null, timings }, 'echo').observation;
    expect(closed).toMatchObject({ end_reason: 'closed', error: { message: 'the episode ended' } });
    const harness = { turn: 1, running: false, elapsed_s: 1, model_calls: 0, model_tokens: 0, ended: 'exited' as const, exit_code: 0, output_tail: '' };
    expect(endedOutcome({ reward: 1, endReason: 'turns_ended', failure: null, scores: { a: 1 }, timings, harness }, null).observation).toEqual({
      done: true,
      reward: 1,
      end_reason: 'turns_ended',
      timings,
      scores: { a: 1 },
      harness,
    });
  });

  it('scoredOutcome and withEnding: a call’s reply with the ending added', () => {
    const ended = scoredOutcome(0.5, { a: 0.5 }, 'finished', timings);
    expect(ended).toEqual({ observation: { done: true, reward: 0.5, scores: { a: 0.5 }, end_reason: 'finished', timings }, reward: 0.5, done: true });
    const call = { observation: { tool_name: 'echo', result: null, error: null }, reward: null, done: false };
    expect(withEnding(call, ended)).toEqual({ observation: { tool_name: 'echo', result: null, error: null, ...ended.observation }, reward: 0.5, done: true });
  });

  it('nextTurnOutcome and turnNoticeOutcome: the next turn’s prompt', () => {
    expect(nextTurnOutcome('end_turn', 2, 'second').observation).toEqual({
      tool_name: 'end_turn',
      result: textResult('second', { turn: 2, prompt: 'second' }),
      error: null,
      turn: 2,
    });
    const notice = turnNoticeOutcome('echo', 2, 'second');
    expect(notice.done).toBe(false);
    expect(notice.observation.result?.content[0]).toEqual({
      type: 'text',
      text: "[turn 1's time budget passed: the turn ended and this call was not run]\nsecond",
    });
    expect(notice.observation.result?.data).toEqual({ turn: 2, prompt: 'second', budget_passed: true });
  });

  it('argumentsProblem: an object is fine; anything else, or too deep, says what it got', () => {
    expect(argumentsProblem({ a: 1 })).toBeNull();
    expect(argumentsProblem('{}')).toBe(
      "arguments must be a JSON object of the tool's parameters, got a string (pass the object itself, not a JSON string of it)",
    );
    expect(argumentsProblem(null)).toBe("arguments must be a JSON object of the tool's parameters, got null");
    expect(argumentsProblem([1])).toBe("arguments must be a JSON object of the tool's parameters, got an array");
    let deep: unknown = 1;
    for (let i = 0; i <= MAX_ARGUMENT_DEPTH; i++) deep = { d: deep };
    expect(argumentsProblem(deep)).toBe(`arguments are nested deeper than ${MAX_ARGUMENT_DEPTH} levels; no tool takes that`);
  });

  it('timingsOf: each phase to now while it lasts; the pool’s part only with a pool; the image’s wait only when there was one', () => {
    expect(timingsOf(0, { queued: 1000 }, 4000)).toEqual({ queued_s: 1, deploy_s: 3, running_s: 0 });
    expect(timingsOf(0, { queued: 1000, running: 2500, ended: 5000 }, 9000)).toEqual({ queued_s: 1, deploy_s: 1.5, running_s: 2.5 });
    expect(timingsOf(0, { queued: 1000, ended: 2000 }, 9000, null)).toEqual({ queued_s: 1, deploy_s: 1, running_s: 0, pooled: false });
    expect(timingsOf(0, {}, 9000, { waitedMs: 250 })).toEqual({ queued_s: 9, deploy_s: 0, running_s: 0, pooled: true, pool_wait_s: 0.25 });
    // the image's wait only when the reset waited for it
    expect(timingsOf(0, { queued: 3000 }, 4000, undefined, 2500)).toEqual({ queued_s: 3, deploy_s: 1, running_s: 0, image_wait_s: 2.5 });
    expect(timingsOf(0, { queued: 3000 }, 4000, undefined, null)).toEqual({ queued_s: 3, deploy_s: 1, running_s: 0 });
  });
});
