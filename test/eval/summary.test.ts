/** The eval summary's arithmetic and wording, and the progress bar, on records made by hand. */
import { describe, expect, it } from 'vitest';
import type { EpisodeRecord } from '../../src/eval/play.js';
import { ttyEvalProgress } from '../../src/eval/run.js';
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
        rec({ groups: { size: '2' }, failure: { kind: 'env', reason: 'env_crashed', message: 'x' } }),
        rec({ groups: { size: '10' }, failure: { kind: 'model', reason: 'model_timeout', message: 'y' } }),
      ],
      context,
    );
    expect(s.played).toBe(5);
    expect(s.scored).toMatchObject({ n: 3, mean: 0.5 });
    expect(s.scored.zero_share).toBeCloseTo(1 / 3, 15);
    expect(s.failures).toEqual({ env: { env_crashed: 1 }, model: { model_timeout: 1 }, total: 2 });
    // group values in numeric order
    expect(Object.keys(s.groups.size!)).toEqual(['2', '10']);
    expect(s.groups.size!['2']).toMatchObject({ n: 2, mean: 0.75 });
    expect(s.tokens).toEqual({ prompt: 15, completion: 3, episodes_reporting: 2 });
    const text = formatSummary(s);
    expect(text).toContain('m on b, split eval: 5 of 5 tasks played in 1.5 s');
    expect(text).toContain('failures     2, not scored (env: env_crashed 1; model: model_timeout 1)');
    expect(text).toContain('by size       2 0.7500 ± 0.2500 (2) · 10 0.0000 (1)');
    expect(text).toContain('baselines    greedy 0.5');
  });

  it('the progress bar draws on a terminal only', () => {
    const written: string[] = [];
    const p = ttyEvalProgress({ isTTY: true, write: (x: string) => written.push(x) });
    p.start(4);
    p.update(2, 4, 2, 0.25, 0);
    p.end();
    expect(written[1]).toContain('[###############...............] 2/4  mean 0.250 over 2  failures 0');
    const silent: string[] = [];
    const q = ttyEvalProgress({ isTTY: false, write: (x: string) => silent.push(x) });
    q.start(4);
    q.update(1, 4, 1, 1, 0);
    q.end();
    expect(silent).toEqual([]);
  });
});
