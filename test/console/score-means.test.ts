/**
 * Each declared score's mean beside the mean reward, in the console's group and task tables: the
 * aggregation (EpisodeSeries' groups over a window of several minutes, recentTasks over the ended
 * episodes kept), then the routes' answers after real episodes of the fixture bundle (two scores,
 * quality and steps, one of them reported by one task only) with task groups declared.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recentTasks } from '../../src/console/recent-tasks.js';
import { BUCKET_MS, EpisodeSeries, type EndedEpisode } from '../../src/console/series.js';
import { ConsoleEpisodesPageSchema, OverviewSchema, RecentTasksPageSchema, type EpisodeSummary } from '../../src/protocol/console.js';
import { FIXTURE_BUNDLE, startProcessServer, type ProcessServer } from '../support/process-server.js';

/** the cost means of episodes none of which said what it cost */
const NO_COST = { n: 0, cpu_s: null, peak_memory_bytes: null, bytes_written: null, wall_s: null };

const round6 = (x: number) => Math.round(x * 1e6) / 1e6;
const mean = (xs: number[]) => round6(xs.reduce((a, b) => a + b, 0) / xs.length);

function ended(over: Partial<EndedEpisode>): EndedEpisode {
  return {
    split: 'train',
    groups: {},
    endReason: 'finished',
    failureReason: null,
    reward: 0.5,
    scores: null,
    steps: 1,
    turns: 1,
    queuedWithoutStart: null,
    lane: 'normal',
    ...over,
  };
}

describe('score means, aggregated', () => {
  it("per group over the window: each score's mean over the scored episodes that reported it, across minutes", () => {
    let now = Date.UTC(2026, 0, 1, 12, 0, 10);
    const series = new EpisodeSeries({ now: () => now });
    series.ended(ended({ groups: { size: '1' }, reward: 0.2, scores: { quality: 0.2, steps: 4 } }));
    series.ended(ended({ groups: { size: '1' }, reward: 0.6, scores: { quality: 0.6 } }));
    // a failure reports no score: it counts as an episode, in no mean
    series.ended(ended({ groups: { size: '1' }, reward: null, scores: null, failureReason: 'env_crashed', endReason: 'env_failed' }));
    now += BUCKET_MS;
    series.ended(ended({ groups: { size: '1' }, reward: 0.7, scores: { quality: 0.7, steps: 1 } }));
    series.ended(ended({ groups: { size: '2' }, reward: 1, scores: { quality: 1, steps: 2 } }));
    const s = series.view('all');
    expect(s.t).toHaveLength(2);
    expect(s.groups.train!.size).toEqual({
      '1': { ended: 4, failed: 1, n: 3, mean: 0.5, scores: { quality: 0.5, steps: 2.5 }, cost: NO_COST },
      '2': { ended: 1, failed: 0, n: 1, mean: 1, scores: { quality: 1, steps: 2 }, cost: NO_COST },
    });
    // the 15-minute window holds both minutes; a group seen by no scored episode has no mean
    series.ended(ended({ groups: { size: '4' }, reward: null, failureReason: 'deploy_failed', endReason: 'env_failed' }));
    expect(series.view('15m').groups.train!.size!['4']).toEqual({ ended: 1, failed: 1, n: 0, mean: null, scores: {}, cost: NO_COST });
  });

  it('per task over the episodes kept: the same means, from the episodes’ scores', () => {
    const summary = (task_id: string, reward: number | null, scores: Record<string, number> | null) =>
      ({
        task_id,
        split: 'train',
        reward,
        scores,
        failure_reason: reward === null ? 'env_crashed' : null,
        ended_at: '2026-01-01T00:00:00.000Z',
      }) as EpisodeSummary;
    const out = recentTasks([
      summary('a', 1, { quality: 1, steps: 3 }),
      summary('a', 0.5, { quality: 0.5, steps: 1 }),
      summary('a', null, null),
      summary('b', 0.25, { quality: 0.25 }),
    ]);
    expect(out.map((t) => [t.task_id, t.n, t.mean, t.scores])).toEqual([
      ['a', 2, 0.75, { quality: 0.75, steps: 2 }],
      ['b', 1, 0.25, { quality: 0.25 }],
    ]);
  });
});

/** the fixture bundle with two task groups: each task's kind, and a deck per split (every train task in d1) */
function groupedFixture(): string {
  const dir = mkdtempSync(join(tmpdir(), 'score-means-'));
  cpSync(FIXTURE_BUNDLE, dir, { recursive: true });
  const manifest = JSON.parse(readFileSync(join(dir, 'bundle.json'), 'utf8'));
  manifest.groups = { kind: 'meta.kind', deck: 'meta.deck' };
  writeFileSync(join(dir, 'bundle.json'), JSON.stringify(manifest, null, 2));
  for (const [split, deck] of [
    ['train', 'd1'],
    ['eval', 'd2'],
  ]) {
    const file = join(dir, `tasks/${split}.jsonl`);
    const rows = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { meta: Record<string, string> });
    writeFileSync(file, rows.map((r) => JSON.stringify({ ...r, meta: { ...r.meta, deck } })).join('\n') + '\n');
  }
  return dir;
}

describe('score means, served', () => {
  let dir: string;
  let s: ProcessServer;
  beforeAll(async () => {
    dir = groupedFixture();
    s = await startProcessServer({}, { bundle: dir });
  });
  afterAll(async () => {
    await s?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** one episode over /episodes: `echoes` echo calls, then end_turn; its reward and scores */
  async function play(taskId: string, echoes: number): Promise<{ reward: number; scores: Record<string, number> }> {
    const c = await request(s.url).post('/episodes').send({ task_id: taskId });
    expect(c.status).toBe(201);
    const step = (body: object) => request(s.url).post(`/episodes/${c.body.episode_id}/step`).send(body);
    for (let i = 0; i < echoes; i++) expect((await step({ type: 'call_tool', tool_name: 'echo', arguments: { text: `w${i}` } })).status).toBe(200);
    const end = await step({ type: 'call_tool', tool_name: 'end_turn', arguments: {} });
    expect(end.body.done).toBe(true);
    expect(end.body.observation.failure).toBeUndefined();
    return { reward: end.body.reward, scores: end.body.observation.scores };
  }

  it("GET /console/overview and /console/recent-tasks give each score's mean beside the mean reward; /console/episodes each episode's scores", async () => {
    // fx-echo-3 reports quality and steps (its tool calls), the echo tasks quality alone
    const played = [await play('fx-echo-3', 1), await play('fx-echo-3', 3), await play('fx-echo-0', 0), await play('fx-echo-1', 2)];
    const [a, b, e0, e1] = played;
    expect(a!.scores).toEqual({ quality: 0.75, steps: 1 });
    expect(b!.scores).toEqual({ quality: 0.75, steps: 3 });
    expect(Object.keys(e0!.scores)).toEqual(['quality']);
    // and a failure, which scores nothing
    const crashed = await request(s.url).post('/episodes').send({ task_id: 'fx-echo-2' });
    const died = await request(s.url)
      .post(`/episodes/${crashed.body.episode_id}/step`)
      .send({ type: 'call_tool', tool_name: 'crash', arguments: { code: 9 } });
    expect(died.body.observation.failure.reason).toBe('env_crashed');

    const o = await request(s.url).get('/console/overview?window=all');
    expect(o.status).toBe(200);
    const groups = OverviewSchema.parse(o.body).series.groups.train!;
    expect(groups.kind!['two-scores']).toEqual({
      ended: 2,
      failed: 0,
      n: 2,
      mean: mean([a!.reward, b!.reward]),
      scores: { quality: 0.75, steps: mean([a!.scores.steps!, b!.scores.steps!]) },
      // what they cost is read as their teardown begins (episode-cost.test.ts has its figures)
      cost: expect.any(Object),
    });
    expect(groups.kind!.echo).toMatchObject({
      n: 2,
      mean: mean([e0!.reward, e1!.reward]),
      scores: { quality: mean([e0!.scores.quality!, e1!.scores.quality!]) },
    });
    // one deck: quality over the four scored episodes, steps over the two that reported it
    expect(groups.deck!.d1).toEqual({
      ended: 5,
      failed: 1,
      n: 4,
      mean: mean(played.map((p) => p.reward)),
      scores: { quality: mean(played.map((p) => p.scores.quality!)), steps: mean([a!.scores.steps!, b!.scores.steps!]) },
      cost: expect.any(Object),
    });

    const r = await request(s.url).get('/console/recent-tasks?split=train');
    expect(r.status).toBe(200);
    const tasks = new Map(RecentTasksPageSchema.parse(r.body).tasks.map((t) => [t.task_id, t]));
    expect(tasks.get('fx-echo-3')).toMatchObject({ ended: 2, n: 2, mean: mean([a!.reward, b!.reward]), scores: { quality: 0.75, steps: 2 } });
    expect(tasks.get('fx-echo-0')).toMatchObject({ n: 1, scores: e0!.scores });
    expect(tasks.get('fx-echo-2')).toMatchObject({ ended: 1, failed: 1, n: 0, mean: null, scores: {} });

    const eps = ConsoleEpisodesPageSchema.parse((await request(s.url).get('/console/episodes?task=fx-echo-3')).body);
    expect(eps.ended.map((x) => x.scores)).toEqual([b!.scores, a!.scores]);
    const failed = ConsoleEpisodesPageSchema.parse((await request(s.url).get('/console/episodes?failed=true')).body);
    expect(failed.ended.map((x) => x.scores)).toEqual([null]);
  });
});
