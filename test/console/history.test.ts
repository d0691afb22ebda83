/**
 * EpisodeHistory and EpisodeRecorder without Docker: real Episodes of the fixture bundle that
 * wait for a slot and are closed (no env is ever deployed), observed through EpisodeDeps.observer.
 */
import { mkdtempSync, readFileSync, readdirSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadBundle, type LoadedBundle } from '../../src/bundle/index.js';
import { Admission } from '../../src/episodes/capacity/admission.js';
import type { EpisodeObserver } from '../../src/episodes/episode.js';
import { EpisodeHistory } from '../../src/console/history.js';
import type { Transcript } from '../../src/protocol/console.js';
import { BUCKET_MS } from '../../src/console/series.js';
import { EpisodeManager } from '../../src/episodes/manager.js';
import { dailyFile, EpisodeRecorder } from '../../src/console/recorder.js';
import { Metrics } from '../../src/metrics.js';
import type { EnvSpec, Sandbox } from '../../src/sandbox/sandbox.js';
import { FIXTURE_BUNDLE } from '../support/app.js';
import { fakeEpisode } from '../support/fake-episode.js';

const silent = pino({ level: 'silent' });
let bundle: LoadedBundle;
beforeAll(async () => {
  bundle = await loadBundle(FIXTURE_BUNDLE);
});
afterAll(async () => {
  await bundle?.cleanup();
});

/** a manager whose one slot is held: every episode it starts waits in the queue */
async function manager(observer: EpisodeObserver) {
  const admission = new Admission(1, 1000);
  await admission.acquire({ timeoutMs: 1000 });
  const metrics = new Metrics({ running: () => 0, waiting: () => ({ high: 0, normal: 0, low: 0 }), capacity: () => 1, networks: () => 0 }, 'test_', false);
  // never called: no episode here gets a slot, so none deploys (its image is ready: it waits for the slot at once)
  const sandbox = {} as Sandbox;
  const m = new EpisodeManager(
    {
      bundle,
      sandbox,
      admission,
      envSpec: () => ({}) as EnvSpec,
      settings: { resetTimeoutMs: 60_000, splitLanes: new Map(), toolTimeoutMs: 1000, episodeTimeoutMs: 60_000, maxSteps: 8 },
      reward: (s) => Object.values(s)[0] ?? 0,
      log: silent,
      metrics,
      observer,
    },
    silent,
  );
  return { m, admission };
}

/** creates an episode, lets it wait for a slot, closes it; resolves once it is torn down */
async function waitAndClose(m: EpisodeManager, data: { task_id?: string; split?: string } = {}) {
  const ep = m.create({ task_id: 'fx-echo-0', ...data }, 'http');
  const started = m.start(ep).catch((e: Error) => e);
  expect(m.admission.waitingCount).toBe(1);
  await ep.close();
  await started;
  await ep.tornDown;
  return ep;
}

describe('EpisodeHistory', () => {
  it('keeps at most --history ended episodes, the newest; an evicted transcript is gone', async () => {
    const final: Transcript[] = [];
    const h = new EpisodeHistory({ size: 3, onFinal: (t) => final.push(t) });
    const { m } = await manager(h);
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push((await waitAndClose(m, { task_id: i % 2 ? 'fx-eval-0' : 'fx-echo-1' })).id);
    expect(h.endedCount).toBe(3);
    const kept = h.endedSummaries({ limit: 100 });
    expect(kept.total).toBe(3);
    expect(kept.episodes.map((e) => e.episode_id)).toEqual(ids.slice(4).reverse());
    expect(h.transcript(ids[0]!)).toBeUndefined();
    expect(h.transcript(ids[6]!)?.events.at(-1)).toMatchObject({ kind: 'end', end_reason: 'closed', reward: null });
    // every episode reaches --record once, evicted or not
    expect(final.map((t) => t.episode_id)).toEqual(ids);
    expect(h.liveCount()).toBe(0);
  });

  it('keeps nothing with --history 0, and stays within its byte budget', async () => {
    const none = new EpisodeHistory({ size: 0 });
    const a = await manager(none);
    await waitAndClose(a.m);
    expect(none.endedCount).toBe(0);

    const small = new EpisodeHistory({ size: 100, maxBytes: 2000 });
    const b = await manager(small);
    for (let i = 0; i < 10; i++) await waitAndClose(b.m);
    expect(small.endedCount).toBeGreaterThan(0);
    expect(small.endedCount).toBeLessThan(10);
    expect(small.endedBytesApprox).toBeLessThanOrEqual(2000);
  });

  it("names the env's id once it is deployed: the pooled env's own for one taken from the warm pool", () => {
    const h = new EpisodeHistory({ size: 3 });
    const { ep } = fakeEpisode('ep-pooled', 'fx-echo-0');
    h.onCreated(ep);
    expect(h.transcript('ep-pooled')!.env_id).toBeNull();
    Object.assign(ep, { envId: 'pool-3f2a' });
    h.onReset(ep, { observation: { messages: [], tools: [] }, reward: null, done: false } as never);
    expect(h.transcript('ep-pooled')!.env_id).toBe('pool-3f2a');
    expect(h.liveSummaries().find((e) => e.episode_id === 'ep-pooled')!.env_id).toBe('pool-3f2a');
  });

  it('filters the ended ones by split, end reason, failure and task id', async () => {
    const h = new EpisodeHistory({ size: 50 });
    const { m } = await manager(h);
    await waitAndClose(m, { task_id: 'fx-echo-0' });
    await waitAndClose(m, { task_id: 'fx-eval-1' });
    expect(h.endedSummaries({ split: 'eval' }).episodes.map((e) => e.task_id)).toEqual(['fx-eval-1']);
    expect(h.endedSummaries({ split: 'train' }).episodes.map((e) => e.task_id)).toEqual(['fx-echo-0']);
    expect(h.endedSummaries({ end_reason: 'closed' }).total).toBe(2);
    expect(h.endedSummaries({ end_reason: 'finished' }).total).toBe(0);
    expect(h.endedSummaries({ failed: true }).total).toBe(0);
    expect(h.endedSummaries({ failed: false }).total).toBe(2);
    expect(h.endedSummaries({ task: 'eval' }).episodes.map((e) => e.task_id)).toEqual(['fx-eval-1']);
    expect(h.endedSummaries({ limit: 1, offset: 1 }).episodes.map((e) => e.task_id)).toEqual(['fx-echo-0']);
  });

  it('shows a waiting episode as live, then counts it in the minute it ended', async () => {
    const h = new EpisodeHistory({ size: 10 });
    const { m } = await manager(h);
    const ep = m.create({ task_id: 'fx-echo-0' }, 'ws');
    const started = m.start(ep).catch((e: Error) => e);
    expect(h.liveSummaries()).toMatchObject([{ episode_id: ep.id, phase: 'waiting', transport: 'ws', split: 'train', steps: 0, last_tool: null }]);
    expect(h.liveCount('waiting')).toBe(1);
    await ep.close();
    await started;
    expect(h.liveSummaries()).toEqual([]);
    const s = h.series();
    // the window starts at the first data kept: this minute
    expect(s.t).toHaveLength(1);
    expect(s.episodes_ended.at(-1)).toBe(1);
    expect(s.by_split.train).toMatchObject({ ended: [1], failed: [0], reward: { n: [0], mean: [null] }, steps_mean: [0], turns_mean: [1] });
    expect(s.end_reasons.closed?.at(-1)).toBe(1);
    // it never got a slot, but it waited: that wait counts; it never deployed
    expect(s.queue_wait_s.count.at(-1)).toBe(1);
    expect(s.deploy_s.count.at(-1)).toBe(0);
  });

  it('series in minute buckets: the 1 h window drops what is older, "all" keeps it', async () => {
    let now = Date.UTC(2026, 0, 1, 12, 0, 30);
    const h = new EpisodeHistory({ size: 10, now: () => now });
    const { m } = await manager(h);
    await waitAndClose(m);
    let s = h.series();
    expect(s.t.at(-1)).toBe(Date.UTC(2026, 0, 1, 12, 0) / 1000);
    expect(s.episodes_ended.reduce((a, b) => a + b)).toBe(1);
    now += 30 * BUCKET_MS;
    await waitAndClose(m);
    s = h.series();
    expect(s.episodes_ended.at(-1)).toBe(1);
    expect(s.episodes_ended.at(-31)).toBe(1);
    now += 30 * BUCKET_MS;
    s = h.series('1h');
    // the first minute left the hour; the second is 30 buckets back
    expect(s.t).toHaveLength(60);
    expect(s.episodes_ended.reduce((a, b) => a + b)).toBe(1);
    expect(s.episodes_ended.at(-31)).toBe(1);
    s = h.series('all');
    expect(s.t).toHaveLength(61);
    expect(s.episodes_ended.reduce((a, b) => a + b)).toBe(2);
  });

  it('a throwing observer never fails an episode', async () => {
    const boom = () => {
      throw new Error('observer bug');
    };
    const { m } = await manager({ onCreated: boom, onReset: boom, onStep: boom, onEnded: boom });
    const ep = await waitAndClose(m);
    expect(ep.endReason).toBe('closed');
  });

  it('tells subscribers about every change', async () => {
    const h = new EpisodeHistory({ size: 10 });
    const { m } = await manager(h);
    const seen: string[] = [];
    const off = h.subscribe((msg) => seen.push(msg.type === 'event' ? `event:${msg.event.kind}@${msg.index}` : `episode:${msg.episode.phase}`));
    await waitAndClose(m);
    // no step was in flight: the end is told when it is recorded
    off();
    await waitAndClose(m);
    expect(seen).toEqual(['episode:waiting', 'event:end@0', 'episode:done']);
  });

  it('tells the end after the step that caused it, however late that step answers (or at the teardown)', async () => {
    const h = new EpisodeHistory({ size: 10 });
    const seen: string[] = [];
    h.subscribe((msg) => {
      if (msg.type === 'event') seen.push(`${msg.event.kind}@${msg.index}`);
    });
    const fake = (id: string) => {
      const f = fakeEpisode(id, 'fx-echo-0');
      Object.assign(f.ep, { steps: 1, endReason: 'turns_ended', reward: 1, scores: { quality: 1 }, answering: true });
      return f;
    };
    // the ending step answers 50 ms after the end was recorded (its reply reads what the env cost)
    const a = fake('ep-a');
    h.onCreated(a.ep);
    h.onEnded(a.ep);
    await new Promise((r) => setTimeout(r, 50));
    expect(seen).toEqual([]);
    h.onStep(
      a.ep,
      { type: 'call_tool', tool_name: 'end_turn', arguments: {} },
      { observation: { tool_name: 'end_turn', result: null, error: null, done: true }, reward: 1, done: true } as never,
      Date.now(),
    );
    expect(seen).toEqual(['tool_call@0', 'end@1']);
    expect(h.transcript('ep-a')!.events.map((e) => e.kind)).toEqual(['tool_call', 'end']);
    // a step that never answers (it threw): the end is told at the teardown
    const b = fake('ep-b');
    h.onCreated(b.ep);
    h.onEnded(b.ep);
    b.tearDown();
    await new Promise((r) => setImmediate(r));
    expect(seen).toEqual(['tool_call@0', 'end@1', 'end@0']);
  });
});

describe('EpisodeRecorder', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'openenv-record-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("appends one JSON line per record to the day's file, creating the folder", async () => {
    const at = Date.UTC(2026, 4, 17, 23, 59);
    const r = new EpisodeRecorder(join(dir, 'a', 'b'), silent, { now: () => at });
    expect(r.write({ episode_id: 'one' })).toBe(true);
    expect(r.write({ episode_id: 'two', nested: { x: [1, 2] } })).toBe(true);
    await r.flush();
    const file = dailyFile(join(dir, 'a', 'b'), at);
    expect(file.endsWith('episodes-2026-05-17.jsonl')).toBe(true);
    const lines = readFileSync(file, 'utf8').split('\n');
    expect(lines.pop()).toBe('');
    expect(lines.map((l) => JSON.parse(l))).toEqual([{ episode_id: 'one' }, { episode_id: 'two', nested: { x: [1, 2] } }]);
    expect(r.stats()).toMatchObject({ written: 2, dropped: 0, failed: 0, queued: 0 });
  });

  it('drops and counts lines past its queue rather than wait', async () => {
    const r = new EpisodeRecorder(join(dir, 'q'), silent, { maxQueue: 2 });
    // written in one go, before the writer has made its folder and taken anything from the queue
    const accepted = [1, 2, 3, 4, 5].map((i) => r.write({ i }));
    expect(accepted).toEqual([true, true, false, false, false]);
    await r.flush();
    expect(r.stats()).toMatchObject({ written: 2, dropped: 3, failed: 0, queued: 0 });
    const [file] = readdirSync(join(dir, 'q'));
    expect(
      readFileSync(join(dir, 'q', file!), 'utf8')
        .trim()
        .split('\n'),
    ).toHaveLength(2);
  });

  it('counts a write it cannot make, and never throws', async () => {
    const notADir = join(dir, 'plain-file');
    writeFileSync(notADir, 'x');
    const r = new EpisodeRecorder(notADir, silent);
    expect(r.write({ a: 1 })).toBe(true);
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    expect(r.write(circular)).toBe(false);
    await r.flush();
    expect(r.stats()).toMatchObject({ written: 0, failed: 2 });
  });
});
