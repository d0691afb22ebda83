/** The eval summary's arithmetic and wording, on records made by hand. */
import { describe, expect, it } from 'vitest';
import type { EpisodeRecord } from '../../src/eval/play.js';
import { formatSummary, meanStat, summarize } from '../../src/eval/summary.js';

function rec(over: Partial<EpisodeRecord>): EpisodeRecord {
  return {
    task_id: 't',
    split: 'eval',
    index: 0,
    groups: {},
    episode_id: null,
    messages: [],
    tool_calls: [],
    reward: null,
    scores: null,
    end_reason: 'finished',
    failure: null,
    model_turns: 1,
    turns_exhausted: false,
    usage: null,
    harness: null,
    timings: { queued_s: 0, deploy_s: 0, running_s: 0, model_s: 0, wall_s: 0 },
    ...over,
  };
}

const context = {
  server: 'http://s',
  bundle: 'b',
  split: 'eval',
  model: 'm',
  modelUrl: 'http://m/v1',
  tasks: 5,
  groupNames: ['size'],
  baselines: { greedy: 0.5 },
  interrupted: false,
  wallS: 1.5,
  settings: {},
};

describe('eval summary', () => {
  it('mean and standard error: sample deviation over √n; none below two', () => {
    expect(meanStat([])).toEqual({ n: 0, mean: null, stderr: null });
    expect(meanStat([0.3])).toEqual({ n: 1, mean: 0.3, stderr: null });
    const m = meanStat([0, 1, 1, 0]);
    expect(m.mean).toBe(0.5);
    // s² = (4 · 0.25) / 3, SE = √(s²/4)
    expect(m.stderr).toBeCloseTo(Math.sqrt(1 / 3 / 4), 15);
  });

  it('failures are counted by side and reason and left out of the mean, the zeros and the groups', () => {
    const s = summarize(
      [
        rec({ reward: 1, groups: { size: '2' }, usage: { prompt_tokens: 10, completion_tokens: 2 } }),
        rec({ reward: 0, groups: { size: '10' } }),
        rec({ reward: 0.5, groups: { size: '2' }, usage: { prompt_tokens: 5, completion_tokens: 1 } }),
        rec({ task_id: 'a', groups: { size: '2' }, failure: { kind: 'env', reason: 'env_crashed', message: 'the env exited with code 3\nits log: …' } }),
        rec({ task_id: 'b', groups: { size: '10' }, failure: { kind: 'model', reason: 'model_timeout', message: 'the model did not answer' } }),
        rec({ task_id: 'c', groups: { size: '2' }, failure: { kind: 'env', reason: 'env_crashed', message: 'a later crash' } }),
      ],
      context,
    );
    expect(s.played).toBe(6);
    expect(s.scored).toMatchObject({ n: 3, mean: 0.5 });
    expect(s.scored.zero_share).toBeCloseTo(1 / 3, 15);
    expect(s.failures).toEqual({
      env: { env_crashed: 2 },
      model: { model_timeout: 1 },
      total: 3,
      first: {
        env_crashed: { task_id: 'a', message: 'the env exited with code 3\nits log: …' },
        model_timeout: { task_id: 'b', message: 'the model did not answer' },
      },
    });
    // group values in numeric order
    expect(Object.keys(s.groups.size!)).toEqual(['2', '10']);
    expect(s.groups.size!['2']).toMatchObject({ n: 2, mean: 0.75 });
    expect(s.tokens).toEqual({ prompt: 15, completion: 3, episodes_reporting: 2 });
    const text = formatSummary(s);
    expect(text).toContain('m on b, split eval: 6 of 5 tasks played in 1.5 s');
    // each reason's first message, one line each
    expect(text).toContain(
      [
        '  failures     3, not scored (env: env_crashed 2; model: model_timeout 1)',
        '    env_crashed    first: a: the env exited with code 3',
        '    model_timeout  first: b: the model did not answer',
      ].join('\n'),
    );
    expect(text).toContain('by size       2 0.7500 ± 0.2500 (2) · 10 0.0000 (1)');
    expect(text).toContain('baselines    greedy 0.5');
  });
});

describe('eval summary: a verifier that could not run', () => {
  it("a verifier_failed episode is a failure, never a 0, and the summary prints the last line of the verifier's output", () => {
    const detail = {
      reason: 'verifier_failed' as const,
      phase: 'finish' as const,
      retryable: false,
      message: "the task's verifier: the verifier (tests/test.sh, exit code 0) could not run its tests: test.sh found no curl, uvx",
      episode_id: 'e1',
      task_id: 'needs-network',
      log_tail: 'E: Unable to locate package curl\n/tests/test.sh: line 4: curl: command not found\n/tests/test.sh: line 6: uvx: command not found\n',
    };
    const s = summarize(
      [
        rec({ reward: 1 }),
        rec({ task_id: 'needs-network', end_reason: 'env_failed', failure: { kind: 'env', reason: 'verifier_failed', message: detail.message, detail } }),
      ],
      context,
    );
    expect(s.scored).toMatchObject({ n: 1, mean: 1 });
    expect(s.scored.zero_share).toBe(0);
    expect(s.failures.first.verifier_failed).toEqual({
      task_id: 'needs-network',
      message: detail.message,
      output_ends: '/tests/test.sh: line 6: uvx: command not found',
    });
    const text = formatSummary(s);
    expect(text).toContain("    verifier_failed  first: needs-network: the task's verifier: the verifier (tests/test.sh, exit code 0) could not run its tests");
    expect(text).toContain('\n                     its output ends: /tests/test.sh: line 6: uvx: command not found');
  });
});

describe('eval summary: each score beside the reward', () => {
  it('means every score the env reported over the scored episodes, in the order first seen, and prints them under the reward', () => {
    const s = summarize(
      [
        rec({ reward: 1, scores: { correct: 1, format: 1 } }),
        rec({ reward: 0.25, scores: { correct: 0, format: 0.5 } }),
        rec({ reward: 0.5, scores: { correct: 1, format: 0, style: 0.5 } }),
        rec({ failure: { kind: 'env', reason: 'env_crashed', message: 'x' }, scores: null }),
      ],
      { ...context, groupNames: [] },
    );
    expect(Object.keys(s.scores)).toEqual(['correct', 'format', 'style']);
    expect(s.scores.correct).toMatchObject({ n: 3 });
    expect(s.scores.correct!.mean).toBeCloseTo(2 / 3, 15);
    expect(s.scores.format!.mean).toBeCloseTo(0.5, 15);
    expect(s.scores.style).toEqual({ n: 1, mean: 0.5, stderr: null });
    const lines = formatSummary(s).split('\n');
    const at = lines.findIndex((l) => l.startsWith('  mean reward'));
    expect(lines[at + 1]).toMatch(/^ {2}scores {7}correct 0\.6667 ± 0\.3333 · format 0\.5000 ± 0\.2887 · style 0\.5000 \(1\)$/);
  });
});

describe('eval summary: harness episodes', () => {
  it("sums the harnesses' model calls and tokens through the gateway and prints them; none played: null, no line", () => {
    const use = (model_calls: number, model_tokens: number, exit_code = 0) => ({ model_calls, model_tokens, ended: 'exited', exit_code });
    const s = summarize([rec({ reward: 1, harness: use(2, 300) }), rec({ reward: 0, harness: use(5, 1200) }), rec({ reward: 1 })], context);
    expect(s.harness).toEqual({ episodes: 2, model_calls: 7, model_tokens: 1500, not_exited_0: 0 });
    expect(formatSummary(s)).toContain("harness      7 model call(s) · 1,500 tokens through the server's gateway (2 harness episode(s))");
    const refused = summarize([rec({ reward: 0, harness: use(0, 0, 4) }), rec({ reward: 1, harness: use(2, 300) })], context);
    expect(refused.harness).toMatchObject({ episodes: 2, not_exited_0: 1 });
    expect(formatSummary(refused)).toContain(
      "(2 harness episode(s); in 1 the harness did not exit 0: its output's tail is in its record, harness.output_tail)",
    );
    const plain = summarize([rec({ reward: 1 })], context);
    expect(plain.harness).toBeNull();
    expect(formatSummary(plain)).not.toContain('harness ');
  });
});
