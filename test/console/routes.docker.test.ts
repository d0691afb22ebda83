/**
 * The console's routes against a real server on real Docker (fixture bundle): auth, live and
 * ended episodes with their transcripts, filters, the NDJSON stream, --record, /openapi.json,
 * and the page's static files and redirects.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { dailyFile } from '../../src/console/recorder.js';
import { findWebRoot } from '../../src/routes/web.js';
import { describeDocker, labelledResources, waitFor } from '../support/docker.js';
import { INSTANCE_LABEL, suiteServer } from '../support/docker-server.js';
import { http } from '../routes/http.js';

const TOKEN = 'console-test-token-Zq81';
const auth = { authorization: `Bearer ${TOKEN}` };
const recordDir = mkdtempSync(join(tmpdir(), 'openenv-console-record-'));
afterAll(() => rmSync(recordDir, { recursive: true, force: true }));

/** reads an NDJSON response line by line */
async function openStream(url: string, headers: Record<string, string>) {
  const ctl = new AbortController();
  const res = await fetch(url, { headers, signal: ctl.signal });
  const messages: any[] = [];
  let ended = false;
  const pump = (async () => {
    if (!res.body) return;
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          messages.push(JSON.parse(buf.slice(0, i)));
          buf = buf.slice(i + 1);
        }
      }
    } catch {
      // aborted
    }
    ended = true;
  })();
  return { res, messages, ended: () => ended, close: async () => (ctl.abort(), await pump) };
}

describeDocker('console routes', () => {
  const s = suiteServer({ token: TOKEN, history: 3, record: recordDir, maxConcurrentEnvs: 2 });
  const call = (method: string, path: string, body?: unknown) => http(s.url, method, path, body, auth);

  /** plays fx-echo-<n>: echo, then end_turn (scored by the env) */
  async function playEcho(taskId: string, word: string) {
    const created = await call('POST', '/episodes', { task_id: taskId, episode_id: `label-${word}` });
    expect(created.status).toBe(201);
    const id = created.body.episode_id as string;
    const echo = await call('POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'echo', arguments: { text: word } });
    expect(echo.body.observation.result.content[0].text).toBe(word);
    const end = await call('POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'end_turn', arguments: { answer: word } });
    expect(end.body.done).toBe(true);
    return { id, reward: end.body.reward as number };
  }

  it('every /console route needs the token', async () => {
    for (const path of ['/console/overview', '/console/episodes', '/console/episodes/x', '/console/tasks', '/console/stream']) {
      const none = await http(s.url, 'GET', path);
      expect(none.status, path).toBe(401);
      const wrong = await http(s.url, 'GET', path, undefined, { authorization: 'Bearer wrong' });
      expect(wrong.status, path).toBe(401);
      expect(wrong.body.error).toBe('unauthorized');
    }
  });

  it('shows a live episode as it runs, its transcript, then keeps it ended; the stream tells each step', async () => {
    const stream = await openStream(`${s.url}/console/stream`, auth);
    expect(stream.res.status).toBe(200);
    expect(stream.res.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
    await waitFor(() => stream.messages.length > 0, 10_000, 'the snapshot');
    expect(stream.messages[0]).toMatchObject({
      type: 'snapshot',
      overview: { capacity: 2, running: 0, waiting: 0, deploying: 0, history: { size: 3 } },
      live: [],
    });

    const created = await call('POST', '/episodes', { task_id: 'fx-echo-0', episode_id: 'my-label' });
    expect(created.status).toBe(201);
    const id = created.body.episode_id as string;
    const echoSent = Date.now();
    await call('POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'echo', arguments: { text: 'hello' } });
    const echoRoundTripMs = Date.now() - echoSent;

    const live = await call('GET', '/console/episodes');
    expect(live.status).toBe(200);
    expect(live.body.live).toEqual([
      expect.objectContaining({
        episode_id: id,
        client_label: 'my-label',
        env_id: id,
        task_id: 'fx-echo-0',
        split: 'train',
        phase: 'running',
        transport: 'http',
        steps: 1,
        last_tool: 'echo',
        end_reason: null,
      }),
    ]);
    const ov = await call('GET', '/console/overview');
    expect(ov.body).toMatchObject({ capacity: 2, running: 1, waiting: 0, deploying: 0, live: 1 });

    // a stream watching this episode starts with its transcript so far
    const watch = await openStream(`${s.url}/console/stream?episode=${id}`, auth);
    await waitFor(() => watch.messages.some((m) => m.type === 'transcript'), 10_000, 'the transcript');
    expect(watch.messages.find((m) => m.type === 'transcript').transcript.events.map((e: { kind: string }) => e.kind)).toEqual(['reset', 'tool_call']);

    const end = await call('POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'end_turn', arguments: { answer: 'done' } });
    expect(end.body).toMatchObject({ done: true, reward: 0.5 });

    const t = await call('GET', `/console/episodes/${id}`);
    expect(t.status).toBe(200);
    const tr = t.body;
    expect(tr).toMatchObject({
      episode_id: id,
      task_id: 'fx-echo-0',
      phase: 'done',
      end_reason: 'turns_ended',
      reward: 0.5,
      scores: { quality: 0.5 },
      failure: null,
      steps: 2,
    });
    expect(tr.events.map((e: { kind: string }) => e.kind)).toEqual(['reset', 'tool_call', 'tool_call', 'end']);
    expect(tr.events[0].messages).toEqual([
      { role: 'system', content: 'You are testing an echo env. Call the tools you are asked to call.' },
      { role: 'user', content: 'Echo the word hello, then end your turn.' },
    ]);
    expect(tr.events[0].tools).toEqual(['echo', 'finish_now', 'sleep', 'crash', 'fail', 'end_turn']);
    expect(tr.events[1]).toMatchObject({
      tool_name: 'echo',
      arguments: { text: 'hello' },
      result: { content: [{ type: 'text', text: 'hello' }], is_error: false },
      error: null,
      step: 1,
    });
    // the call's time is the server's measure of it: an integer within the client's round trip
    expect(Number.isInteger(tr.events[1].ms)).toBe(true);
    expect(tr.events[1].ms).toBeLessThanOrEqual(echoRoundTripMs);
    expect(tr.events.map((e: { ms?: number }) => e.ms)).toEqual([undefined, tr.events[1].ms, tr.events[2].ms, undefined]);
    expect(tr.events[2]).toMatchObject({ tool_name: 'end_turn', arguments: { answer: 'done' }, step: 2 });
    expect(tr.events[3]).toMatchObject({ kind: 'end', end_reason: 'turns_ended', reward: 0.5, scores: { quality: 0.5 } });
    // what the model saw and sent: never the token, never the task's hidden data
    const text = JSON.stringify(tr);
    expect(text).not.toContain(TOKEN);
    expect(text).not.toContain('finish_score');

    // the stream told every change of the episode, and the watching one each event
    await waitFor(
      () => stream.messages.some((m) => m.type === 'episode' && m.episode.episode_id === id && m.episode.phase === 'done'),
      10_000,
      'the end on the stream',
    );
    const phases = stream.messages.filter((m) => m.type === 'episode' && m.episode.episode_id === id).map((m) => m.episode.phase);
    expect(phases[0]).toBe('waiting');
    expect(phases).toContain('running');
    expect(stream.messages.some((m) => m.type === 'event')).toBe(false); // not watching any
    await waitFor(() => watch.messages.some((m) => m.type === 'event' && m.event.kind === 'end'), 10_000, 'the end event');
    expect(watch.messages.filter((m) => m.type === 'event').map((m) => `${m.event.kind}@${m.index}`)).toEqual(['tool_call@2', 'end@3']);
    // the overview comes every second
    await waitFor(() => stream.messages.some((m) => m.type === 'overview'), 10_000, 'an overview tick');

    const ended = await call('GET', '/console/episodes');
    expect(ended.body.live).toEqual([]);
    expect(ended.body.ended[0]).toMatchObject({ episode_id: id, end_reason: 'turns_ended', reward: 0.5, failure_reason: null });

    const dl = await call('GET', `/console/episodes/${id}?download=true`);
    expect(dl.headers.get('content-disposition')).toBe(`attachment; filename="episode-${id}.json"`);
    await stream.close();
    await watch.close();
  });

  it('keeps the last --history ended episodes, filterable; series count them', async () => {
    const played = [];
    for (const [task, word] of [
      ['fx-echo-1', 'a'],
      ['fx-eval-0', 'b'],
      ['fx-echo-1', 'c'],
    ] as const)
      played.push(await playEcho(task, word));
    const all = await call('GET', '/console/episodes');
    expect(all.body.history_size).toBe(3);
    expect(all.body.ended_total).toBe(3);
    expect(all.body.ended.map((e: { episode_id: string }) => e.episode_id)).toEqual(played.map((p) => p.id).reverse());
    const evalOnly = await call('GET', '/console/episodes?split=eval');
    expect(evalOnly.body.ended.map((e: { task_id: string }) => e.task_id)).toEqual(['fx-eval-0']);
    expect((await call('GET', '/console/episodes?failed=true')).body.ended_total).toBe(0);
    expect((await call('GET', '/console/episodes?end_reason=turns_ended&limit=1')).body).toMatchObject({ ended_total: 3, ended: [expect.anything()] });
    expect((await call('GET', '/console/episodes?end_reason=nope')).status).toBe(400);
    expect((await call('GET', '/console/episodes?limit=0')).status).toBe(400);
    // the first test's episode was evicted from the ring
    const ov = await call('GET', '/console/overview');
    expect(ov.body.history).toMatchObject({ kept: 3, size: 3 });
    const series = ov.body.series;
    // the hour's window starts at the first data kept, not an hour back
    expect(series.window).toBe('1h');
    expect(series.t[0]).toBe(series.kept_since);
    expect(series.episodes_ended.reduce((a: number, b: number) => a + b, 0)).toBe(4);
    expect(series.deploy_s.count.reduce((a: number, b: number) => a + b, 0)).toBe(4);
    expect(series.rewards.by_split.train.n).toBe(3);
    expect(series.rewards.by_split.eval.n).toBe(1);
    // fx-echo-1 scores 1 (last bin), fx-echo-0 0.5, fx-eval-0 0.9
    expect(series.rewards.by_split.train.counts[10]).toBe(2);
    expect(series.rewards.by_split.train.counts[6]).toBe(1);
    expect(series.rewards.by_split.eval.counts[10]).toBe(1);
    // exact means, from the rewards (not the bins' centres: 0.85 and 0.95)
    expect(series.rewards.by_split.train.mean).toBe(Math.round(((1 + 0.5 + 1) / 3) * 1e6) / 1e6);
    expect(series.rewards.by_split.eval.mean).toBe(0.9);
  });

  it('a failed episode keeps its failure with the log tail', async () => {
    const created = await call('POST', '/episodes', { task_id: 'fx-echo-0' });
    const id = created.body.episode_id as string;
    const crash = await call('POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'crash', arguments: { code: 7 } });
    expect(crash.body.done).toBe(true);
    const t = (await call('GET', `/console/episodes/${id}`)).body;
    expect(t).toMatchObject({ end_reason: 'env_failed', failure_reason: 'env_crashed', failure: { reason: 'env_crashed', exit_code: 7 } });
    expect(t.events.map((e: { kind: string }) => e.kind)).toEqual(['reset', 'tool_call', 'end']);
    expect(t.events[1]).toMatchObject({ tool_name: 'crash', arguments: { code: 7 }, error: { error_type: 'transport_error' } });
    expect((await call('GET', '/console/episodes?failed=true')).body.ended.map((e: { episode_id: string }) => e.episode_id)).toEqual([id]);
    expect((await call('GET', '/console/episodes?failure_reason=env_crashed')).body.ended_total).toBe(1);
    const series = (await call('GET', '/console/overview')).body.series;
    expect(series.failures.env_crashed.reduce((a: number, b: number) => a + b, 0)).toBe(1);
  });

  it("--record wrote one JSON line per ended episode, in the day's file", async () => {
    await waitFor(() => s.app.openenv.manager.list().length === 0, 30_000, 'every teardown');
    const file = dailyFile(recordDir, Date.now());
    await waitFor(() => existsSync(file) && readFileSync(file, 'utf8').trim().split('\n').length >= 5, 10_000, 'five lines');
    const lines = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(5);
    expect(lines.map((l) => l.end_reason)).toEqual(['turns_ended', 'turns_ended', 'turns_ended', 'turns_ended', 'env_failed']);
    expect(lines[0].events.map((e: { kind: string }) => e.kind)).toEqual(['reset', 'tool_call', 'tool_call', 'end']);
    const text = readFileSync(file, 'utf8');
    expect(text).not.toContain(TOKEN);
    expect(text).not.toContain('finish_score');
    expect((await call('GET', '/console/overview')).body.recorder).toMatchObject({ dir: recordDir, written: 5, dropped: 0, failed: 0 });
  });

  it("searches a split's tasks by id", async () => {
    const r = await call('GET', '/console/tasks?split=train&q=ECHO-&limit=2');
    expect(r.body).toMatchObject({ split: 'train', splits: { train: 6, eval: 2 }, total: 4, offset: 0 });
    expect(r.body.tasks.map((t: { task_id: string }) => t.task_id)).toEqual(['fx-echo-0', 'fx-echo-1']);
    expect((await call('GET', '/console/tasks?split=nope')).status).toBe(404);
    expect((await call('GET', '/console/episodes/nope')).status).toBe(404);
  });

  it('/openapi.json describes the console routes from their schemas', async () => {
    const doc = (await call('GET', '/openapi.json')).body;
    for (const p of ['/console/overview', '/console/episodes', '/console/episodes/{id}', '/console/tasks', '/console/stream']) {
      expect(doc.paths[p]?.get?.summary, p).toMatch(/^Console: /);
      expect(doc.paths[p].get.security).toEqual([{ bearer: [] }]);
    }
    const params = doc.paths['/console/episodes'].get.parameters.map((p: { name: string; in: string }) => `${p.in}:${p.name}`);
    expect(params).toEqual(expect.arrayContaining(['query:split', 'query:end_reason', 'query:failed', 'query:limit']));
    expect(doc.paths['/console/episodes/{id}'].get.parameters.find((p: { in: string }) => p.in === 'path')).toMatchObject({
      name: 'id',
      in: 'path',
      required: true,
    });
    expect(doc.paths['/console/stream'].get.responses['200'].content).toHaveProperty(['application/x-ndjson']);
  });

  it('serves the page without a token, and sends a browser from / to it', async () => {
    expect(findWebRoot(), 'dist/web: run npm run build').not.toBeNull();
    const page = await fetch(`${s.url}/web/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('content-security-policy')).toContain("connect-src 'self'");
    const html = await page.text();
    // every asset is relative and in the build: no CDN
    const refs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(refs.length).toBeGreaterThan(0);
    for (const ref of refs) {
      expect(ref, ref).toMatch(/^\.\//);
      expect((await fetch(`${s.url}/web/${ref.slice(2)}`)).status, ref).toBe(200);
    }
    const browser = await fetch(`${s.url}/`, { headers: { accept: 'text/html,application/xhtml+xml' }, redirect: 'manual' });
    expect(browser.status).toBe(302);
    expect(browser.headers.get('location')).toBe('web/');
    expect((await fetch(`${s.url}/web`, { redirect: 'manual' })).headers.get('location')).toBe('web/');
    expect((await fetch(`${s.url}/`, { headers: { accept: 'application/json' } })).status).toBe(404);
    expect((await fetch(`${s.url}/web/nope.js`)).status).toBe(404);
    expect((await fetch(`${s.url}/web/../bundle`)).status).toBe(401);
  });

  it('closing the server ends an open stream', async () => {
    const stream = await openStream(`${s.url}/console/stream`, auth);
    await waitFor(() => stream.messages.length > 0, 10_000, 'the snapshot');
    await s.stop();
    await waitFor(() => stream.ended(), 10_000, 'the stream to end');
    expect(labelledResources(`${INSTANCE_LABEL}=${s.instance}`)).toEqual({ containers: [], networks: [] });
    (s as { app: unknown }).app = undefined; // stopped and checked here: nothing left for the suite's afterAll
  });
});
