/**
 * Every line of GET /console/stream is a StreamMessage as src/protocol/console.ts declares it
 * (the page's types come from the same declaration), and the overview it carries follows the
 * window asked for. An episode played meanwhile shows up in it.
 */
import { describe, expect, it } from 'vitest';
import { StreamMessageSchema, type StreamMessage } from '../../src/protocol/console.js';
import { http } from '../routes/http.js';
import { startProcessServer } from '../support/process-server.js';

/** reads NDJSON lines of a streaming response until `until` says enough */
async function readLines(url: string, until: (seen: StreamMessage[]) => boolean, signal: AbortSignal): Promise<StreamMessage[]> {
  const res = await fetch(url, { signal });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  const seen: StreamMessage[] = [];
  let buf = '';
  while (!until(seen)) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      const parsed = StreamMessageSchema.safeParse(JSON.parse(line));
      if (!parsed.success) throw new Error(`a stream line is not a StreamMessage: ${parsed.error.message}\n${line.slice(0, 300)}`);
      seen.push(parsed.data);
    }
  }
  return seen;
}

describe('GET /console/stream', () => {
  it('sends only declared messages: a snapshot, episode changes, overviews over the window asked for', async () => {
    const s = await startProcessServer({}, {});
    const ctl = new AbortController();
    try {
      const reading = readLines(
        `${s.url}/console/stream?window=15m`,
        (seen) => seen.some((m) => m.type === 'overview' && (m.overview.series.rewards.by_split.train?.n ?? 0) > 0),
        ctl.signal,
      );
      const c = await http(s.url, 'POST', '/episodes', { task_id: 'fx-echo-0' });
      await http(s.url, 'POST', `/episodes/${c.body.episode_id}/step`, { type: 'call_tool', tool_name: 'end_turn', arguments: {} });
      const seen = await reading;
      expect(seen[0]?.type).toBe('snapshot');
      const episodes = seen.filter((m) => m.type === 'episode');
      expect(episodes.some((m) => m.type === 'episode' && m.episode.episode_id === c.body.episode_id && m.episode.phase === 'done')).toBe(true);
      const last = seen.at(-1)!;
      expect(last.type === 'overview' && last.overview.series.window).toBe('15m');
      expect((await http(s.url, 'GET', '/console/stream?window=2h')).status).toBe(400);
    } finally {
      ctl.abort();
      await s.stop();
    }
  });
});
