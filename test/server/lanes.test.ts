/**
 * Lanes with the envs as processes: at a full cap, eval resets (the high lane by
 * --split-priority's default) are granted before the training resets queued ahead of them, within
 * the share (one of every LANE_SHARE.oldestEvery grants to the oldest waiter); a reset's own
 * priority overrides its split's on every transport; with eval=normal the queue is plain FIFO.
 * lanes.docker.test.ts plays the same on real containers; lanes.test.ts in test/episodes/capacity
 * proves the scheduler's bounds on random runs.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { serveCommand } from '../../src/cli/serve.js';
import { splitLanes } from '../../src/config.js';
import { LANE_SHARE } from '../../src/defaults.js';
import { parsePrometheusText, valueOf } from '../../scripts/lib/prom-text.js';
import { waitFor } from '../../scripts/lib/wait.js';
import { WsClient } from '../../scripts/lib/ws-client.js';
import { evalResets, playQueuedAtFullCap, trainResets } from '../support/lanes-scenario.js';
import { FIXTURE_BUNDLE, processSuiteServer, startProcessServer } from '../support/process-server.js';
import { SERVE_JS } from '../support/serve-process.js';
import { http } from '../routes/http.js';

// the exact orders below are for the shipped share
expect(LANE_SHARE.oldestEvery).toBe(4);

describe('lanes at a full cap (default --split-priority eval=high)', () => {
  const s = processSuiteServer({ maxConcurrentEnvs: 2 });

  it('a burst of 8 training resets, then 5 eval ones: the evals go first, but every 4th grant goes to the oldest training reset', async () => {
    const before = parsePrometheusText(await (await fetch(`${s.url}/metrics`)).text());
    const r = await playQueuedAtFullCap(s.app, s.url, [...trainResets(8), ...evalResets(5)]);
    expect(r.granted).toEqual(['e0', 'e1', 'e2', 't0', 'e3', 'e4', 't1', 't2', 't3', 't4', 't5', 't6', 't7']);
    // each eval reset waited less than every training reset queued ahead of it but t0 (the share's)
    for (const e of ['e0', 'e1', 'e2', 'e3', 'e4']) for (const t of ['t1', 't2', 't3', 't4', 't5', 't6', 't7']) expect(r.waits[e]!).toBeLessThan(r.waits[t]!);
    // the waits are counted per lane: 5 high (the evals), 8 normal (the training resets)
    const m = parsePrometheusText(await (await fetch(`${s.url}/metrics`)).text());
    const count = (lane: string, f = m) => valueOf(f, 'openenv_queue_wait_seconds_count', { lane })!;
    expect(count('high') - count('high', before)).toBe(5);
    expect(count('normal') - count('normal', before)).toBe(8 + 2);
    // and so does the console's series
    const ov = (await http(s.url, 'GET', '/console/overview')).body;
    expect(ov.series.summary.queue_wait_s_by_lane.high.n).toBe(5);
    expect(ov.waiting_by_lane).toEqual({ high: 0, normal: 0, low: 0 });
  });

  it("a reset's own priority overrides its split's: a train reset asking high goes first, an eval reset asking low keeps the low lane's share", async () => {
    const queued = [
      ...trainResets(4),
      { label: 'l0', task_id: 'fx-eval-0', priority: 'low' },
      ...trainResets(4, 4),
      { label: 'h0', task_id: 'fx-echo-0', priority: 'high' },
    ];
    const r = await playQueuedAtFullCap(s.app, s.url, queued);
    // h0 first; then the normal lane in order, except that once 3 grants in a row passed l0 by
    // while it was the oldest waiter, the 4th is l0's
    expect(r.granted).toEqual(['h0', 't0', 't1', 't2', 't3', 't4', 't5', 't6', 'l0', 't7']);
  });

  it('every transport carries the priority: the waiting reset sits in its lane (metrics, console) and a refused one says which', async () => {
    const holders = await Promise.all([0, 1].map(() => WsClient.open(s.url)));
    for (const h of holders) await h.reset({ task_id: 'fx-echo-0' });
    const gauge = async () => {
      const m = parsePrometheusText(await (await fetch(`${s.url}/metrics`)).text());
      return ['high', 'normal', 'low'].map((lane) => valueOf(m, 'openenv_resets_waiting', { lane }));
    };
    try {
      // /ws reset data
      const ws = await WsClient.open(s.url);
      const wsReset = ws.reset({ task_id: 'fx-echo-1', priority: 'low', reset_timeout_s: 30 });
      await waitFor(async () => (await gauge())[2] === 1, 10_000, 'the /ws reset waiting in the low lane');
      expect((await http(s.url, 'GET', '/console/overview')).body.waiting_by_lane).toEqual({ high: 0, normal: 0, low: 1 });
      // POST /episodes: refused after its own short timeout, saying its lane
      const httpRefused = await http(s.url, 'POST', '/episodes', { task_id: 'fx-echo-1', priority: 'high', reset_timeout_s: 0.3 });
      expect(httpRefused.status).toBe(503);
      expect(httpRefused.body).toMatchObject({ error: 'capacity_reached', lane: 'high', waiting: 2 });
      // OpenEnv's MCP dialect: openenv/session/create's params
      const created = await http(s.url, 'POST', '/mcp', {
        jsonrpc: '2.0',
        id: 1,
        method: 'openenv/session/create',
        params: { task_id: 'fx-eval-0', priority: 'normal', reset_timeout_s: 0.3 },
      });
      expect(created.body.error).toMatchObject({ code: -32000, data: { error: 'capacity_reached', lane: 'normal' } });
      // standard MCP: the initialize's query (and without one, the eval split's lane)
      const init = {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
      };
      const mcpPost = (query: string) =>
        fetch(`${s.url}/mcp?${query}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
          body: JSON.stringify(init),
        }).then((x) => x.json() as Promise<any>);
      expect((await mcpPost('task_id=fx-echo-1&priority=high&reset_timeout_s=0.3')).error).toMatchObject({ data: { error: 'capacity_reached', lane: 'high' } });
      expect((await mcpPost('task_id=fx-eval-1&reset_timeout_s=0.3')).error).toMatchObject({ data: { error: 'capacity_reached', lane: 'high' } });
      // a priority that is no lane is the client's mistake, on each
      const other = await WsClient.open(s.url);
      expect((await other.reset({ task_id: 'fx-echo-1', priority: 'urgent' })).data).toMatchObject({
        code: 'VALIDATION_ERROR',
        message: expect.stringContaining('data.priority'),
      });
      await other.close();
      expect((await http(s.url, 'POST', '/episodes', { priority: 'urgent' })).status).toBe(400);
      expect((await mcpPost('priority=urgent')).error).toMatchObject({ code: -32602 });
      // the /ws reset is still waiting, in its lane; a holder's end gives it the slot
      expect(await gauge()).toEqual([0, 0, 1]);
      await holders[0]!.call('end_turn', {});
      expect((await wsReset).type).toBe('observation');
      await ws.close();
    } finally {
      await Promise.all(holders.map((h) => h.close()));
    }
    await waitFor(() => s.app.openenv.admission.activeCount === 0);
  });
});

describe('lanes off (--split-priority eval=normal)', () => {
  const s = processSuiteServer({ maxConcurrentEnvs: 2, splitPriority: 'eval=normal' });

  it('the same burst is served in arrival order: the evals wait behind every training reset', async () => {
    const r = await playQueuedAtFullCap(s.app, s.url, [...trainResets(8), ...evalResets(5)]);
    expect(r.granted).toEqual(['t0', 't1', 't2', 't3', 't4', 't5', 't6', 't7', 'e0', 'e1', 'e2', 'e3', 'e4']);
  });
});

describe('--split-priority', () => {
  const lanesOf = (argv: string[], env: NodeJS.ProcessEnv = {}) => Object.fromEntries(splitLanes(serveCommand.parse(['b', ...argv], env).splitPriority));

  it('defaults to eval=high; repeated or comma-separated, from the flag or OPENENV_SPLIT_PRIORITY; given, it replaces the default', () => {
    expect(lanesOf([])).toEqual({ eval: 'high' });
    expect(lanesOf(['--split-priority', 'train=low', '--split-priority', 'eval=high,check=normal'])).toEqual({ train: 'low', eval: 'high', check: 'normal' });
    expect(lanesOf(['--split-priority', 'train=low'])).toEqual({ train: 'low' });
    expect(lanesOf([], { OPENENV_SPLIT_PRIORITY: 'eval=normal train=high' })).toEqual({ eval: 'normal', train: 'high' });
    // the later rule for a split wins
    expect(lanesOf(['--split-priority', 'eval=low,eval=high'])).toEqual({ eval: 'high' });
  });

  it('the process exits 2 on a rule that names no lane, saying what it expects', () => {
    const run = spawnSync(process.execPath, [SERVE_JS, FIXTURE_BUNDLE, '--split-priority', 'eval=urgent'], { encoding: 'utf8' });
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/^error: --split-priority: expected SPLIT=PRIORITY, PRIORITY one of high, normal, low\n/);
  });

  it('GET /bundle reports the lanes in force; a rule for a split the bundle lacks is said at start', async () => {
    const s = await startProcessServer({ splitPriority: ['eval=high', 'holdout=low'] });
    try {
      expect((await http(s.url, 'GET', '/bundle')).body.settings.split_priority).toEqual({ eval: 'high', holdout: 'low' });
      expect(s.logs()).toContain('--split-priority holdout=low: the bundle has no split \\"holdout\\" (splits: train, eval)');
      // the default's own rule is not a mistake on a bundle without that split
      expect(s.logs()).not.toContain('--split-priority eval=high:');
    } finally {
      await s.stop();
    }
  });
});
