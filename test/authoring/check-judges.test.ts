/**
 * check's judges of a play, without an engine (src/authoring/check/): what a golden, an empty and
 * a schema-violating play say, how two plays differ, which plays on reused containers are played
 * again, and the env times.
 */
import { describe, expect, it } from 'vitest';
import type { Task } from '../../src/bundle/index.js';
import { freshReplays } from '../../src/authoring/check/clean-reset.js';
import { emptySteps, judgeEmpty } from '../../src/authoring/check/empty.js';
import { judgeGolden } from '../../src/authoring/check/golden.js';
import { describeFailure, firstDifference, type Play } from '../../src/authoring/check/play.js';
import { envTimes } from '../../src/authoring/check/run.js';
import { judgeViolations } from '../../src/authoring/check/schema-violations.js';
import { Plays, rangeOf, spread } from '../../src/authoring/check/tally.js';
import type { Failure } from '../../src/protocol/observations.js';

const task = { task_id: 't1', turns: ['do it', 'then this'], golden: [{ tool: 'a' }, { tool: 'end_turn' }] } as unknown as Task;
const playOf = (p: Partial<Play>): Play => ({
  steps: [],
  done: true,
  reward: 1,
  scores: { score: 1 },
  end_reason: 'end_turn',
  failure: null,
  deploy_s: 1,
  served_before: 0,
  verifier_output: null,
  ...p,
});
const step = (tool: string, p: Partial<Play['steps'][number]> = {}) => ({ tool, text: 'ok', is_error: false, error_type: null, error: null, ...p });
const failure = (reason: Failure['reason'], log_tail?: string): Failure => ({
  reason,
  phase: 'tool',
  retryable: false,
  message: 'it broke',
  episode_id: 'e',
  task_id: 't1',
  ...(log_tail ? { log_tail } : {}),
});

describe('judgeGolden', () => {
  it('passes a play that ended without errors at every max', () => {
    expect(judgeGolden(task, playOf({ steps: [step('a')] }), undefined)).toEqual({ problems: [], passed: true });
  });
  it('says a failure, a tampered toolchain, an unended episode', () => {
    expect(judgeGolden(task, playOf({ failure: failure('env_crashed') }), undefined).problems[0]).toMatch(
      /^the golden solution failed the episode: env_crashed in phase tool: it broke/,
    );
    expect(judgeGolden(task, playOf({ failure: failure('toolchain_tampered') }), undefined).problems[0]).toMatch(/cannot be verified in place \(it broke\)/);
    expect(judgeGolden(task, playOf({ done: false }), undefined).problems).toEqual([
      `the golden solution's 2 step(s) did not end the episode; end it with "end_turn" on the last turn (2 turn(s)) or a tool answering done`,
    ]);
  });
  it('says the first erred step and every score short of its max, with the verifier output', () => {
    const g = judgeGolden(
      task,
      playOf({
        steps: [step('a', { is_error: true, error: 'nope' }), step('b', { error_type: 'tool_failed' })],
        scores: { score: 0.5 },
        verifier_output: 'x\ny',
      }),
      { score: { min: 0, max: 1 } },
    );
    expect(g.passed).toBe(false);
    expect(g.problems[0]).toMatch(/^the golden solution's step 1 \(a\) got an error \(is_error: nope\) and 1 more step\(s\) did too/);
    expect(g.problems[1]).toBe(
      "the golden solution scored score = 0.5, expected its declared max 1; fix the golden solution or the env's scoring; the verifier's output ends:\n      x\n      y",
    );
  });
});

describe('judgeEmpty', () => {
  it('ends every turn, and passes scores at their floor', () => {
    expect(emptySteps(task)).toEqual([{ tool: 'end_turn' }, { tool: 'end_turn' }]);
    expect(judgeEmpty(playOf({ scores: { score: 0 } }), undefined)).toEqual({ problems: [], passed: true });
    expect(judgeEmpty(playOf({ scores: { score: 0.2 } }), { score: { min: 0, max: 1, floor: 0.25 } }).passed).toBe(true);
  });
  it('says a score above its floor and a failed env', () => {
    expect(judgeEmpty(playOf({ scores: { score: 0.5 } }), undefined).problems).toEqual([
      "the empty solution (no tool call) scored score = 0.5, above its floor 0; doing nothing must not pay: fix the env's scoring or declare scores.score.floor",
    ]);
    expect(judgeEmpty(playOf({ failure: failure('env_unreachable', 'a\nb') }), undefined).problems[0]).toMatch(
      /failed the env: env_unreachable in phase tool: it broke; the env's last log lines:\n {6}a\n {6}b; an env must score/,
    );
  });
});

describe('judgeViolations', () => {
  const calls = [
    { step: { tool: 'a', arguments: { x: 1 } }, why: 'x must be a string' },
    { step: { tool: 'b', arguments: {} }, why: 'y is required' },
  ];
  it('says each call the env accepted, and an episode the calls ended', () => {
    const p = playOf({ steps: [step('a', { is_error: true }), step('b')], done: true, end_reason: 'done' });
    expect(judgeViolations('ts', calls, p)).toEqual([
      [
        'tool b (toolset ts)',
        'the env accepted {}, which violates the input_schema (y is required); answer 400 {"error", "message"} or is_error so the model learns',
      ],
      ['tool b (toolset ts)', "a call that violates the input_schema ended the episode (done); it must be the model's error and the episode go on"],
    ]);
    expect(judgeViolations('ts', calls, playOf({ steps: [step('a', { is_error: true }), step('b', { error_type: 'bad_arguments' })], done: false }))).toEqual(
      [],
    );
  });
});

describe('firstDifference', () => {
  it('names the first step or the scores at which two plays differ', () => {
    const a = playOf({ steps: [step('a'), step('b')] });
    expect(firstDifference(a, playOf({ steps: [step('a'), step('b')] }), 2)).toBeNull();
    expect(firstDifference(a, playOf({ steps: [step('a'), step('b', { text: 'other' })] }), 2)?.at).toBe('step 2');
    expect(firstDifference(a, playOf({ steps: [step('a'), step('b')], scores: { score: 0 } }), 2)?.at).toBe('the scores');
    expect(firstDifference(a, playOf({ steps: [step('a')] }), 2)).toMatchObject({ at: 'step 2', now: expect.stringContaining('"scores"') });
  });
  it('shows more of a verifier failure than of an env log', () => {
    const tail = Array.from({ length: 20 }, (_, i) => `l${i}`).join('\n');
    expect(describeFailure(failure('verifier_failed', tail)).split('\n')).toHaveLength(16);
    expect(describeFailure(failure('env_crashed', tail)).split('\n')).toHaveLength(6);
  });
});

describe('tallies, spreads and times', () => {
  it('means the rewards and scores of the plays that reported them', () => {
    const t = new Plays();
    t.add(playOf({ reward: 1, scores: { score: 1 } }));
    t.add(playOf({ reward: null, scores: null }));
    t.add(playOf({ reward: 0, scores: { score: 0 } }));
    t.passed = 1;
    expect(t.tally()).toEqual({ passed: 1, played: 3, reward: 0.5, scores: { score: 0.5 } });
    expect(new Plays().tally()).toEqual({ passed: 0, played: 0, reward: null, scores: {} });
  });
  it('reads a range, its floor its min unless declared', () => {
    expect(rangeOf(undefined, 's')).toEqual({ min: 0, max: 1, floor: 0 });
    expect(rangeOf({ s: { min: -1, max: 5 } }, 's')).toEqual({ min: -1, max: 5, floor: -1 });
    expect(rangeOf({ s: { min: -1, max: 5, floor: 0 } }, 'toString')).toEqual({ min: 0, max: 1, floor: 0 });
  });
  it('spreads picks first and last included; replays at least a few of the plays on reused containers', () => {
    expect(spread([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 3)).toEqual([0, 5, 9]);
    expect(spread([0, 1], 1)).toEqual([0]);
    expect(spread([0, 1], 5)).toEqual([0, 1]);
    expect(freshReplays(0)).toBeGreaterThanOrEqual(1);
    expect(freshReplays(1000)).toBeGreaterThan(freshReplays(10));
  });
  it('gives each env its deploy and reset times', () => {
    expect(envTimes(new Map([['a', [1, 2, 2]]]), new Map([['b', [0.1234]]]))).toEqual([
      { env: 'a', deploys: 3, mean_s: 1.667, max_s: 2, reused: 0, reused_mean_s: null },
      { env: 'b', deploys: 0, mean_s: 0, max_s: 0, reused: 1, reused_mean_s: 0.123 },
    ]);
  });
});
