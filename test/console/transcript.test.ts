/**
 * A transcript is bounded whatever the env answers. What the history keeps of
 * an episode (and so the console, the download and --record) holds truncation marks with the
 * original size in place of payloads past the bound; its size is counted exactly; the history's
 * byte bound stays a bound; the model's own observation is whole.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { TRANSCRIPT_BOUNDS } from '../../src/defaults.js';
import { EpisodeHistory } from '../../src/console/history.js';
import type { Transcript } from '../../src/protocol/console.js';
import { dailyFile, EpisodeRecorder } from '../../src/console/recorder.js';
import type { Action } from '../../src/protocol/frames.js';
import type { StepOutcome } from '../../src/protocol/observations.js';
import { processSuiteServer } from '../support/process-server.js';
import { waitFor } from '../../scripts/lib/wait.js';
import { http } from '../routes/http.js';
import { fakeEpisode } from '../support/fake-episode.js';

const MB = 1_000_000;
const dirs: string[] = [];
const tmp = (prefix: string) => {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
};
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** an episode whose tool answers `result` on each of `steps` calls, ended and torn down */
async function bigEpisode(history: EpisodeHistory, id: string, result: unknown, steps: number): Promise<StepOutcome[]> {
  const { ep, tearDown } = fakeEpisode(id);
  history.onCreated(ep);
  history.onReset(ep, { observation: { messages: [{ role: 'user', content: 'go' }], tools: [{ name: 'read' }] }, reward: null, done: false } as StepOutcome);
  const outcomes: StepOutcome[] = [];
  for (let i = 0; i < steps; i++) {
    ep.steps++;
    const action: Action = { type: 'call_tool', tool_name: 'read', arguments: { path: `/f${i}` } };
    const outcome = { observation: { tool_name: 'read', result, error: null }, reward: null, done: false } as unknown as StepOutcome;
    outcomes.push(outcome);
    history.onStep(ep, action, outcome, Date.now());
  }
  ep.phase = 'done';
  ep.endReason = 'max_steps';
  history.onEnded(ep);
  tearDown();
  await ep.tornDown;
  await new Promise((r) => setImmediate(r));
  return outcomes;
}

describe('a transcript is bounded, whatever the env answers', () => {
  it('38 results of 15 MB: marks with the original size, an exact byte count, a whole observation, a --record line', async () => {
    const dir = tmp('openenv-transcript-record-');
    const recorder = new EpisodeRecorder(dir, pino({ level: 'silent' }));
    const history = new EpisodeHistory({ size: 10, onFinal: (t) => recorder.write(t) });
    const text = 'x'.repeat(15 * MB);
    const result = { content: [{ type: 'text', text }], is_error: false };
    const resultBytes = Buffer.byteLength(JSON.stringify(result));
    const outcomes = await bigEpisode(history, 'ep-big', result, 38);

    const t = history.transcript('ep-big')!;
    const json = JSON.stringify(t);
    expect(Buffer.byteLength(json)).toBeLessThanOrEqual(TRANSCRIPT_BOUNDS.transcriptBytes + 64 * 1024);
    // counted exactly, not estimated
    expect(history.endedBytesApprox).toBe(Buffer.byteLength(json));
    const calls = t.events.filter((e) => e.kind === 'tool_call');
    expect(calls).toHaveLength(38);
    for (const c of calls) expect(c.result).toMatchObject({ truncated: true, original_bytes: resultBytes });
    // the first marks keep the start of the payload; small arguments are kept as they were
    expect((calls[0]!.result as { head: string }).head).toBe(JSON.stringify(result).slice(0, TRANSCRIPT_BOUNDS.headChars));
    expect(calls[5]!.arguments).toEqual({ path: '/f5' });
    // the model got the whole result every time
    for (const o of outcomes) expect((o.observation as { result: unknown }).result).toBe(result);
    expect(result.content[0]!.text.length).toBe(15 * MB);

    await recorder.flush();
    expect(recorder.stats()).toMatchObject({ written: 1, failed: 0 });
    const lines = readFileSync(dailyFile(dir, Date.now()), 'utf8').trim().split('\n');
    expect(lines).toHaveLength(1);
    const recorded = JSON.parse(lines[0]!) as Transcript;
    expect(recorded.episode_id).toBe('ep-big');
    expect(recorded.events.filter((e) => e.kind === 'tool_call').every((e) => (e as { result: { truncated?: boolean } }).result.truncated)).toBe(true);
  });

  it('twelve episodes of 79 MB each: the history stays within its byte bound', async () => {
    const maxBytes = 20 * 1024 * 1024;
    const history = new EpisodeHistory({ size: 100, maxBytes });
    const result = { content: [{ type: 'text', text: 'y'.repeat(MB) }] };
    for (let i = 0; i < 12; i++) await bigEpisode(history, `ep-${i}`, result, 79);
    expect(history.endedBytesApprox).toBeLessThanOrEqual(maxBytes);
    let sum = 0;
    const kept = history.endedSummaries({ limit: 100 }).episodes;
    for (const e of kept) sum += Buffer.byteLength(JSON.stringify(history.transcript(e.episode_id)));
    expect(sum).toBe(history.endedBytesApprox);
    expect(sum).toBeLessThanOrEqual(maxBytes);
    expect(kept.length).toBeGreaterThan(1);
  });

  describe('through the server', () => {
    const record = tmp('openenv-transcript-server-');
    const s = processSuiteServer({ record, maxConcurrentEnvs: 1 });

    it('a 1 MB echo: the client gets it whole; the console, the download and --record show a mark with its size', async () => {
      const text = 'z'.repeat(MB);
      const created = await http(s.url, 'POST', '/episodes', { task_id: 'fx-echo-0' });
      expect(created.status).toBe(201);
      const id = created.body.episode_id as string;
      const step = await http(s.url, 'POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'echo', arguments: { text } });
      expect(step.status).toBe(200);
      expect(step.body.observation.result.data.text).toBe(text);
      const resultBytes = Buffer.byteLength(JSON.stringify(step.body.observation.result));
      expect((await http(s.url, 'DELETE', `/episodes/${id}`)).status).toBe(204);

      for (const path of [`/console/episodes/${id}`, `/console/episodes/${id}?download=true`]) {
        const got = await http(s.url, 'GET', path);
        expect(got.status).toBe(200);
        const call = (got.body as Transcript).events.find((e) => e.kind === 'tool_call')!;
        expect(call.result).toMatchObject({ truncated: true, original_bytes: resultBytes });
        expect(call.arguments).toMatchObject({ truncated: true, original_bytes: Buffer.byteLength(JSON.stringify({ text })) });
      }
      await waitFor(() => s.app.openenv.recorder!.stats().written === 1, 20_000, 'the episode recorded');
      const line = JSON.parse(readFileSync(dailyFile(record, Date.now()), 'utf8').trim()) as Transcript;
      expect(line.episode_id).toBe(id);
      expect(line.events.find((e) => e.kind === 'tool_call')).toMatchObject({ result: { truncated: true, original_bytes: resultBytes } });
    });
  });
});
