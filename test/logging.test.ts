/**
 * The episode lifecycle in the log, in-process with the envs as processes: one JSON line per
 * event with its ids and durations, the token in none of them, polled routes kept log.text().
 * logging.docker.test.ts proves the same of a real `node dist/serve.js` on real Docker.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { captureLog, type CapturedLog } from './support/log-capture.js';
import { loggerHygiene } from '../src/logging.js';
import { startProcessServer, type ProcessServer } from './support/process-server.js';
import { waitFor } from '../scripts/lib/wait.js';
import { WsClient } from '../scripts/lib/ws-client.js';

const TOKEN = 'tok-3c2b1a09f8e7d6c5b4a39281706f5e4d-fast-logging';
const EVENTS = ['queued', 'deployed', 'reset', 'ended', 'torn_down'] as const;

describe('episode lifecycle lines in the log', () => {
  let s: ProcessServer;
  let log: CapturedLog;
  const lines = () => log.lines();
  const episodes: Record<string, string> = {};

  beforeAll(async () => {
    // as serve.ts makes it for a server with a token
    log = captureLog({ level: 'info', ...loggerHygiene(TOKEN) });
    const logger = log.logger;
    s = await startProcessServer({ token: TOKEN, tokenInPath: true, logger });
    const auth = { authorization: `Bearer ${TOKEN}` };
    await fetch(`${s.url}/health`);
    await fetch(`${s.url}/metrics`, { headers: auth });
    await fetch(`${s.url}/bundle`, { headers: auth });
    await fetch(`${s.url}/tasks?split=train&token=${TOKEN}`, { headers: auth });
    await fetch(`${s.url}/t/${TOKEN}x/bundle`);

    // a scored episode (header auth) and a crashed one (token in the path, and as its label)
    const a = await WsClient.open(s.url, TOKEN);
    const ra = await a.reset({ task_id: 'fx-echo-0' });
    episodes.scored = ra.data.observation.episode_id;
    await a.call('echo', { text: TOKEN });
    expect((await a.call('end_turn', {})).data.reward).toBe(0.5);
    await a.close();
    const b = await WsClient.open(`${s.url}/t/${TOKEN}`);
    const rb = await b.reset({ task_id: 'fx-echo-1', episode_id: TOKEN });
    episodes.crashed = rb.data.observation.episode_id;
    expect((await b.call('crash', {})).data.observation.end_reason).toBe('env_failed');
    await b.close();
    await waitFor(() => lines().filter((l) => l.event === 'torn_down').length === 2, 30_000, 'both episodes torn down');
  });
  afterAll(async () => {
    await s?.stop();
  });

  it('every line is JSON, and the token is in none of them', () => {
    expect(lines().length).toBeGreaterThan(10);
    expect(log.text()).not.toContain(TOKEN);
    // the lines that carried it are there, redacted
    expect(log.text()).toContain('[redacted]');
  });

  it('polled routes (/health, /metrics) do not log their requests; others do', () => {
    const urls = lines()
      .map((l) => (l.req as { url?: string } | undefined)?.url)
      .filter(Boolean);
    expect(urls).toContain('/bundle');
    expect(urls).not.toContain('/health');
    expect(urls).not.toContain('/metrics');
  });

  it('one line per lifecycle event of each episode, with its ids and durations, in order', () => {
    for (const [kind, id] of Object.entries(episodes)) {
      const mine = lines()
        .filter((l) => l.episode_id === id && typeof l.event === 'string' && (EVENTS as readonly string[]).includes(l.event as string))
        .sort((x, y) => (x.time as number) - (y.time as number));
      expect(
        mine.map((l) => l.event),
        kind,
      ).toEqual([...EVENTS]);
      for (const l of mine) expect(l.task_id).toBe(kind === 'scored' ? 'fx-echo-0' : 'fx-echo-1');
      const by = Object.fromEntries(mine.map((l) => [l.event, l]));
      expect(by.deployed!.deploy_s).toEqual(expect.any(Number));
      expect(by.reset).toMatchObject({ queued_s: expect.any(Number), deploy_s: expect.any(Number) });
      expect(by.ended).toMatchObject({ queued_s: expect.any(Number), deploy_s: expect.any(Number), running_s: expect.any(Number), steps: expect.any(Number) });
      expect(by.torn_down!.teardown_s).toEqual(expect.any(Number));
    }
    const ended = lines().filter((l) => l.event === 'ended');
    expect(ended.find((l) => l.episode_id === episodes.scored)).toMatchObject({ end_reason: 'turns_ended', reward: 0.5, steps: 2 });
    expect(ended.find((l) => l.episode_id === episodes.crashed)).toMatchObject({
      end_reason: 'env_failed',
      reward: null,
      failure_reason: expect.stringMatching(/^env_(crashed|unreachable)$/),
    });
    expect(lines().some((l) => l.event === 'env_failed' && l.episode_id === episodes.crashed && typeof l.message === 'string')).toBe(true);
  });
});
