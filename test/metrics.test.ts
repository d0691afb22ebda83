/**
 * GET /metrics as an operator's Prometheus reads it: after real episodes (envs as processes: scored,
 * waiting for a slot, refused for capacity, crashed) every counter, gauge and histogram has moved
 * by exactly what happened, the text is valid exposition format, and two apps in one process keep
 * separate registries.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metrics } from '../src/metrics.js';
import { startProcessServer, type ProcessServer } from './support/process-server.js';
import { waitFor } from '../scripts/lib/wait.js';
import { WsClient } from '../scripts/lib/ws-client.js';
import { parsePrometheusText, sumOf, valueOf, type Family } from '../scripts/lib/prom-text.js';

const TOKEN = 'metrics-test-token-0123456789abcdef';

describe('the exposition-format reader the metrics tests rely on', () => {
  const ok =
    '# HELP a_total A.\n# TYPE a_total counter\na_total{x="1"} 2\n# HELP h H.\n# TYPE h histogram\nh_bucket{le="0.5"} 1\nh_bucket{le="+Inf"} 2\nh_sum 1.5\nh_count 2\n';

  it('reads a valid exposition', () => {
    const f = parsePrometheusText(ok);
    expect(valueOf(f, 'a_total', { x: '1' })).toBe(2);
    expect(valueOf(f, 'h_count')).toBe(2);
  });

  it.each([
    ['a sample without # TYPE', 'x 1\n'],
    ['buckets that are not cumulative', ok.replace('h_bucket{le="0.5"} 1', 'h_bucket{le="0.5"} 3')],
    ['a +Inf bucket that is not the count', ok.replace('h_count 2', 'h_count 3')],
    ['no +Inf bucket', ok.replace('h_bucket{le="+Inf"} 2\n', '')],
    ['a negative counter', ok.replace('a_total{x="1"} 2', 'a_total{x="1"} -1')],
    ['a bad label escape', ok.replace('{x="1"}', '{x="\\q"}')],
    ['an unquoted label value', ok.replace('{x="1"}', '{x=1}')],
    ['a series twice', ok.replace('a_total{x="1"} 2\n', 'a_total{x="1"} 2\na_total{x="1"} 2\n')],
    ['a value that is not a number', ok.replace('h_sum 1.5', 'h_sum one')],
    ['no final newline', ok.trimEnd()],
  ])('refuses %s', (_what, text) => {
    expect(() => parsePrometheusText(text)).toThrow();
  });
});

describe('Metrics', () => {
  it('two registries in one process do not collide, and each counts only its own', async () => {
    const a = new Metrics({ running: () => 1, waiting: () => ({ high: 2, normal: 5, low: 0 }), capacity: () => 3, networks: () => 4 });
    const b = new Metrics({ running: () => 0, waiting: () => ({ high: 0, normal: 0, low: 0 }), capacity: () => 8, networks: () => 0 });
    a.resets.inc({ outcome: 'started' });
    const fa = parsePrometheusText(await a.registry.metrics());
    const fb = parsePrometheusText(await b.registry.metrics());
    expect(valueOf(fa, 'openenv_resets_total', { outcome: 'started' })).toBe(1);
    expect(valueOf(fb, 'openenv_resets_total', { outcome: 'started' })).toBeUndefined();
    expect([
      valueOf(fa, 'openenv_episodes_running'),
      valueOf(fa, 'openenv_resets_waiting', { lane: 'high' }),
      valueOf(fa, 'openenv_resets_waiting', { lane: 'normal' }),
      valueOf(fa, 'openenv_resets_waiting', { lane: 'low' }),
      valueOf(fa, 'openenv_capacity'),
      valueOf(fa, 'openenv_episode_networks'),
    ]).toEqual([1, 2, 5, 0, 3, 4]);
    expect(valueOf(fb, 'openenv_capacity')).toBe(8);
    // the process' own figures come along
    expect(valueOf(fa, 'process_resident_memory_bytes')).toBeGreaterThan(0);
  });
});

function scrape(s: ProcessServer): Promise<Map<string, Family>> {
  return fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } }).then(async (r) => {
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    return parsePrometheusText(await r.text());
  });
}

describe('/metrics after real episodes', () => {
  let s: ProcessServer;
  let other: ProcessServer;

  beforeAll(async () => {
    s = await startProcessServer({ token: TOKEN, maxConcurrentEnvs: 1 });
    other = await startProcessServer({ token: TOKEN, maxConcurrentEnvs: 2 });
  });
  afterAll(async () => {
    await s?.stop();
    await other?.stop();
  });

  it('needs the token like every route but /health', async () => {
    expect((await fetch(`${s.url}/metrics`)).status).toBe(401);
  });

  it('gauges, counters and histograms move by exactly what the episodes did', async () => {
    const before = await scrape(s);
    expect(valueOf(before, 'openenv_capacity')).toBe(1);
    expect(valueOf(before, 'openenv_resets_total', { outcome: 'started' })).toBeUndefined();

    // A: holds the one slot
    const a = await WsClient.open(s.url, TOKEN);
    const b = await WsClient.open(s.url, TOKEN);
    const c = await WsClient.open(s.url, TOKEN);
    const d = await WsClient.open(s.url, TOKEN);
    try {
      expect((await a.reset({ task_id: 'fx-echo-0' })).type).toBe('observation');
      let m = await scrape(s);
      expect(valueOf(m, 'openenv_episodes_running')).toBe(1);
      expect(valueOf(m, 'openenv_episode_networks')).toBe(1);
      expect(sumOf(m, 'openenv_resets_waiting')).toBe(0);

      // B waits for A's slot, in the normal lane (a train task)
      const bReset = b.reset({ task_id: 'fx-echo-1' });
      await waitFor(async () => valueOf(await scrape(s), 'openenv_resets_waiting', { lane: 'normal' }) === 1, 10_000, 'B waiting');
      expect(sumOf(await scrape(s), 'openenv_resets_waiting')).toBe(1);
      await new Promise((r) => setTimeout(r, 300));

      // A plays to its end (reward 0.5), which hands the slot to B
      expect((await a.call('echo', { text: 'x' })).data.observation.error).toBeNull();
      expect((await a.call('end_turn', {})).data).toMatchObject({ done: true, reward: 0.5 });
      expect((await bReset).type).toBe('observation');

      // C finds no slot within its own short reset timeout
      const refused = await c.reset({ task_id: 'fx-echo-2', reset_timeout_s: 0.5 });
      expect(refused).toMatchObject({ type: 'error', data: { code: 'CAPACITY_REACHED' } });

      // B's env crashes: an env failure, never a reward
      const crashed = await b.call('crash', { code: 7 });
      expect(crashed.data).toMatchObject({ done: true, reward: null });
      expect(crashed.data.observation.end_reason).toBe('env_failed');

      // D: an eval task, scored 0.9 by /finish
      expect((await d.reset({ task_id: 'fx-eval-0' })).type).toBe('observation');
      expect((await d.call('end_turn', { answer: 'eval' })).data).toMatchObject({ done: true, reward: 0.9 });

      await waitFor(
        async () => {
          const g = await scrape(s);
          return valueOf(g, 'openenv_episodes_running') === 0 && valueOf(g, 'openenv_episode_networks') === 0;
        },
        30_000,
        'every episode torn down',
      );
      m = await scrape(s);

      expect(valueOf(m, 'openenv_capacity')).toBe(1);
      expect(sumOf(m, 'openenv_resets_waiting')).toBe(0);
      // resets: A, B, D started; C refused for capacity
      expect(valueOf(m, 'openenv_resets_total', { outcome: 'started' })).toBe(3);
      expect(valueOf(m, 'openenv_resets_total', { outcome: 'capacity' })).toBe(1);
      expect(sumOf(m, 'openenv_resets_total')).toBe(4);
      // every reset waited (A, C, D: not long; B: until A ended), each in its lane: D's eval task
      // in the high lane (--split-priority's default), the train tasks in the normal one
      expect(valueOf(m, 'openenv_queue_wait_seconds_count', { lane: 'normal' })).toBe(3);
      expect(valueOf(m, 'openenv_queue_wait_seconds_count', { lane: 'high' })).toBe(1);
      expect(valueOf(m, 'openenv_queue_wait_seconds_count', { lane: 'low' })).toBe(0);
      expect(valueOf(m, 'openenv_queue_wait_seconds_sum', { lane: 'normal' })).toBeGreaterThan(0.3);
      expect(valueOf(m, 'openenv_queue_wait_seconds_bucket', { lane: 'normal', le: '0.1' })).toBeLessThanOrEqual(2);
      expect(valueOf(m, 'openenv_deploy_seconds_count')).toBe(3);
      expect(valueOf(m, 'openenv_deploy_seconds_sum')).toBeGreaterThan(0);
      // where those deploys went: each waited for a deploy turn and reset its env (the process
      // sandbox tells no stages of its own)
      expect(valueOf(m, 'openenv_deploy_stage_seconds_count', { stage: 'turn' })).toBe(3);
      expect(valueOf(m, 'openenv_deploy_stage_seconds_count', { stage: 'env_reset' })).toBe(3);
      expect(valueOf(m, 'openenv_deploy_stage_seconds_sum', { stage: 'env_reset' })).toBeGreaterThan(0);
      expect(valueOf(m, 'openenv_deploy_stage_seconds_count', { stage: 'ready' })).toBeUndefined();
      // tool calls that reached the env: A's echo answered, B's crash did not
      expect(valueOf(m, 'openenv_tool_call_seconds_count', { outcome: 'ok' })).toBe(1);
      expect(valueOf(m, 'openenv_tool_call_seconds_count', { outcome: 'failed' })).toBe(1);
      expect(valueOf(m, 'openenv_teardown_seconds_count', { outcome: 'ok' })).toBe(3);
      expect(valueOf(m, 'openenv_teardown_seconds_count', { outcome: 'failed' })).toBeUndefined();
      // steps: A echo + end_turn, B crash, D end_turn
      expect(valueOf(m, 'openenv_steps_total')).toBe(4);
      // one env failure: the exited env (crashed, or unreachable if the engine had not seen the exit yet)
      expect(sumOf(m, 'openenv_env_failures_total')).toBe(1);
      const failure = (m.get('openenv_env_failures_total')?.samples ?? []).find((x) => x.value === 1)!;
      expect(['env_crashed', 'env_unreachable']).toContain(failure.labels.reason);
      // rewards by split: train 0.5 (A), eval 0.9 (D); B has none
      expect(valueOf(m, 'openenv_episode_reward_count', { split: 'train' })).toBe(1);
      expect(valueOf(m, 'openenv_episode_reward_sum', { split: 'train' })).toBe(0.5);
      expect(valueOf(m, 'openenv_episode_reward_bucket', { split: 'train', le: '0.4' })).toBe(0);
      expect(valueOf(m, 'openenv_episode_reward_bucket', { split: 'train', le: '0.5' })).toBe(1);
      expect(valueOf(m, 'openenv_episode_reward_count', { split: 'eval' })).toBe(1);
      expect(valueOf(m, 'openenv_episode_reward_sum', { split: 'eval' })).toBeCloseTo(0.9, 10);
      expect(valueOf(m, 'openenv_episodes_ended_total', { end_reason: 'turns_ended' })).toBe(2);
      expect(valueOf(m, 'openenv_episodes_ended_total', { end_reason: 'env_failed' })).toBe(1);

      // low cardinality: no label is an id
      const labelNames = new Set([...m.values()].filter((f) => f.name.startsWith('openenv_')).flatMap((f) => f.samples.flatMap((x) => Object.keys(x.labels))));
      expect([...labelNames].sort()).toEqual(['end_reason', 'lane', 'le', 'outcome', 'reason', 'split', 'stage', 'state']);
      // where the three teardowns' time went: each env removed (slot freed) before nothing was left
      expect(valueOf(m, 'openenv_teardown_stage_seconds_count', { stage: 'env_removed' })).toBe(3);
      expect(valueOf(m, 'openenv_deploys_in_flight')).toBe(0);
      for (const f of m.values()) if (f.name.startsWith('openenv_')) expect(f.help.length, f.name).toBeGreaterThan(10);

      // the other app in this process saw none of it
      const o = await scrape(other);
      expect(valueOf(o, 'openenv_capacity')).toBe(2);
      expect(valueOf(o, 'openenv_resets_total', { outcome: 'started' })).toBeUndefined();
      expect(valueOf(o, 'openenv_steps_total')).toBe(0);
    } finally {
      for (const cl of [a, b, c, d]) await cl.close();
    }
  });
});
