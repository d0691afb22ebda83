/**
 * Logs an operator can read: one line per HTTP request (method, path, status, ms; a token in the
 * query redacted), one debug line per tool call (tool, argument bytes, latency, is_error), one
 * summary line per ended episode (steps, reward, end reason, timings).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { captureLog, type CapturedLog } from './support/log-capture.js';
import { loggerHygiene } from '../src/logging.js';
import { loggedUrl } from '../src/plugins/request-log.js';
import { startProcessServer, type ProcessServer } from './support/process-server.js';
import { waitFor } from '../scripts/lib/wait.js';
import { WsClient } from '../scripts/lib/ws-client.js';
import { http } from './routes/http.js';

const TOKEN = 'tok-readable-logs-5e4d3c2b1a09';
const auth = { authorization: `Bearer ${TOKEN}` };

describe('log lines an operator can read', () => {
  let s: ProcessServer;
  let log: CapturedLog;
  const lines = () => log.lines();
  let episodeId = '';

  beforeAll(async () => {
    log = captureLog({ level: 'debug', ...loggerHygiene(TOKEN) });
    const logger = log.logger;
    s = await startProcessServer({ token: TOKEN, logger });
    await http(s.url, 'GET', '/bundle?split=train&access_token=qz-not-logged-7731', undefined, auth);
    await http(s.url, 'GET', '/nope', undefined, auth);
    await http(s.url, 'GET', '/health');
    const c = await WsClient.open(s.url, TOKEN);
    episodeId = (await c.reset({ task_id: 'fx-echo-0' })).data.observation.episode_id;
    await c.call('echo', { text: 'hello there' });
    await c.call('fail', { message: 'on purpose' });
    await c.call('echo', 'not an object');
    await c.call('end_turn', {});
    await c.close();
    await waitFor(() => lines().some((l) => l.event === 'torn_down'), 30_000, 'the episode torn down');
  });
  afterAll(async () => {
    await s?.stop();
  });

  it('one line per HTTP request, when answered: method, path, status, ms; none for polled routes', () => {
    expect(lines().filter((l) => l.msg === 'incoming request' || l.msg === 'request completed')).toEqual([]);
    const reqLines = lines().filter((l) => l.req && typeof l.status === 'number');
    const bundle = reqLines.filter((l) => l.req.url.startsWith('/bundle'));
    expect(bundle).toHaveLength(1);
    expect(bundle[0]).toMatchObject({
      level: 30,
      req: { method: 'GET', url: '/bundle?split=train&access_token=[redacted]', remoteAddress: '127.0.0.1', host: expect.any(String) },
      status: 200,
      ms: expect.any(Number),
    });
    expect(bundle[0]!.msg).toMatch(/^GET \/bundle\?split=train&access_token=\[redacted\] 200 [\d.]+ ms$/);
    expect(reqLines.filter((l) => l.req.url === '/nope')).toMatchObject([{ status: 404, level: 30 }]);
    expect(reqLines.filter((l) => l.req.url === '/health')).toEqual([]);
    // a WebSocket upgrade: one line, when the session opens
    expect(reqLines.filter((l) => l.req.url === '/ws')).toMatchObject([{ status: 101, level: 30 }]);
    expect(log.text()).not.toContain('qz-not-logged-7731');
  });

  it('loggedUrl keeps the path and the query, token-like values redacted', () => {
    expect(loggedUrl('/tasks')).toBe('/tasks');
    expect(loggedUrl('/tasks?split=eval&limit=3')).toBe('/tasks?split=eval&limit=3');
    expect(loggedUrl('/ws?token=s3cret&x=1')).toBe('/ws?token=[redacted]&x=1');
    expect(loggedUrl('/ws?API_KEY=s3cret')).toBe('/ws?API_KEY=[redacted]');
  });

  it('one debug line per tool call: tool, argument bytes, latency, is_error', () => {
    const calls = lines().filter((l) => l.event === 'tool_call' && l.episode_id === episodeId);
    expect(calls.map((l) => l.tool)).toEqual(['echo', 'fail', 'echo', 'end_turn']);
    for (const l of calls) {
      expect(l.level).toBe(20);
      expect(l.ms).toEqual(expect.any(Number));
    }
    expect(calls[0]).toMatchObject({ arg_bytes: JSON.stringify({ text: 'hello there' }).length, is_error: false });
    expect(calls[1]).toMatchObject({ is_error: true });
    expect(calls[2]).toMatchObject({ is_error: true, error_type: 'invalid_args', arg_bytes: JSON.stringify('not an object').length });
    expect(calls[3]).toMatchObject({ is_error: false, done: true });
  });

  it('one summary line per ended episode at info: steps, reward, end reason, timings', () => {
    const ended = lines().filter((l) => l.event === 'ended' && l.episode_id === episodeId);
    expect(ended).toHaveLength(1);
    expect(ended[0]).toMatchObject({
      level: 30,
      end_reason: 'turns_ended',
      steps: 4,
      reward: expect.any(Number),
      queued_s: expect.any(Number),
      deploy_s: expect.any(Number),
      running_s: expect.any(Number),
    });
  });
});
