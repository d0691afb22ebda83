/**
 * What an ended episode cost, end to end on the process sandbox (its `usage` reads the env
 * process' /proc: CPU time and peak resident memory; it cannot tell bytes written): the reply
 * that ends the episode carries it in `metadata.cost` over /episodes, /ws and standard MCP's
 * ending result; --record's line, the console's transcript and per-task means, and the metrics
 * carry the same figures. The reading is taken while the env still runs (before its removal), its
 * wall time lies within the window the client measured, and a reading that fails or never
 * answers leaves null figures and a normally ended episode.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EpisodeCostSchema } from '../../src/protocol/observations.js';
import type { EnvHandle, EnvUsage } from '../../src/sandbox/sandbox.js';
import { waitFor } from '../../scripts/lib/wait.js';
import { WsClient } from '../../scripts/lib/ws-client.js';
import { http as call } from '../routes/http.js';
import { DelegatingSandbox } from '../support/delegating-sandbox.js';
import type { ProcessSandbox } from '../support/process-sandbox.js';
import { startProcessServer, type ProcessServer } from '../support/process-server.js';

/** a metric's value from the /metrics text (0 when the series is not there) */
function metric(text: string, name: string): number {
  const line = text.split('\n').find((l) => l.startsWith(name));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}

async function tornDown(s: ProcessServer, id: string): Promise<void> {
  await waitFor(() => s.app.openenv.manager.list().every((e) => e.id !== id), 30_000, 'the teardown');
}

describe('what an ended episode cost', () => {
  let s: ProcessServer;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'openenv-cost-'));
  beforeAll(async () => {
    s = await startProcessServer({ maxConcurrentEnvs: 2, record: dir });
  });
  afterAll(async () => {
    await s?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the ending reply carries it (read while the env ran, its wall time within the measured window); --record, the console and the metrics carry the same', async () => {
    const before = await call(s.url, 'GET', '/metrics');
    const readsBefore = s.sandbox.usageReads;
    const t0 = performance.now();
    const started = await call(s.url, 'POST', '/episodes', { task_id: 'fx-echo-1' });
    expect(started.status, JSON.stringify(started.body)).toBe(201);
    const tReset = performance.now();
    const id = started.body.episode_id as string;
    // a window the env is surely deployed through: from the reset's reply to the ending call's send
    await call(s.url, 'POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'sleep', arguments: { seconds: 0.3 } });
    const tEndSent = performance.now();
    const end = await call(s.url, 'POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'finish_now', arguments: { score: 0.5 } });
    const t1 = performance.now();
    expect(end.body).toMatchObject({ done: true, reward: 0.5 });
    const cost = end.body.observation.metadata.cost;
    expect(EpisodeCostSchema.parse(cost)).toEqual(cost);
    // the process sandbox reads CPU and peak memory of the live process; it cannot tell bytes written
    expect(s.sandbox.usageReads).toBe(readsBefore + 1);
    expect(cost.cpu_s).toBeGreaterThan(0);
    // a node process holds some megabytes at least
    expect(cost.peak_memory_bytes).toBeGreaterThan(1024 * 1024);
    expect(cost.bytes_written).toBeNull();
    expect(cost.wall_s).toBeGreaterThanOrEqual((tEndSent - tReset) / 1000 - 0.001);
    expect(cost.wall_s).toBeLessThanOrEqual((t1 - t0) / 1000 + 0.001);
    // the CPU the env used cannot exceed its wall time times the cores it could use
    expect(cost.cpu_s).toBeLessThanOrEqual(cost.wall_s * os.availableParallelism() + 0.01);

    await tornDown(s, id);
    // the console: the transcript and the per-task means (one episode of this task: the means are its figures)
    const t = await call(s.url, 'GET', `/console/episodes/${id}`);
    expect(t.body.cost).toEqual(cost);
    const ended = await call(s.url, 'GET', '/console/episodes');
    expect(ended.body.ended.find((e: { episode_id: string }) => e.episode_id === id).cost).toEqual(cost);
    const recent = await call(s.url, 'GET', '/console/recent-tasks?n=100');
    expect(recent.body.tasks.find((x: { task_id: string }) => x.task_id === 'fx-echo-1').cost).toEqual({ n: 1, ...cost });
    // --record: the same figures in the episode's line
    await s.app.openenv.recorder!.flush();
    const lines = readdirSync(dir)
      .flatMap((f) => readFileSync(path.join(dir, f), 'utf8').split('\n'))
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    expect(lines.find((l) => l.episode_id === id).cost).toEqual(cost);
    // the metrics: one more observation of each figure the sandbox told, none of bytes written
    const after = await call(s.url, 'GET', '/metrics');
    const count = (text: string, m: string) => metric(text, `openenv_${m}_count{split="train"}`);
    expect(count(after.body, 'episode_cpu_seconds') - count(before.body, 'episode_cpu_seconds')).toBe(1);
    expect(count(after.body, 'episode_peak_memory_bytes') - count(before.body, 'episode_peak_memory_bytes')).toBe(1);
    expect(count(after.body, 'episode_wall_seconds') - count(before.body, 'episode_wall_seconds')).toBe(1);
    expect(count(after.body, 'episode_bytes_written') - count(before.body, 'episode_bytes_written')).toBe(0);
    const sum = (text: string) => metric(text, 'openenv_episode_wall_seconds_sum{split="train"}');
    expect(sum(after.body) - sum(before.body)).toBeCloseTo(cost.wall_s, 3);
  });

  it('over /ws, an episode that ends by its env failing says what it cost too; a dead env has no CPU or memory to read', async () => {
    const c = await WsClient.open(s.url);
    try {
      const reset = await c.reset({ task_id: 'fx-echo-2' });
      const id = reset.data.observation.episode_id as string;
      const r = await c.call('crash', { code: 3 });
      expect(r.data.observation).toMatchObject({ end_reason: 'env_failed', failure: { reason: 'env_crashed' } });
      const cost = r.data.observation.metadata.cost;
      expect(cost).toMatchObject({ cpu_s: null, peak_memory_bytes: null, bytes_written: null });
      expect(cost.wall_s).toBeGreaterThan(0);
      await tornDown(s, id);
      expect((await call(s.url, 'GET', `/console/episodes/${id}`)).body.cost).toEqual(cost);
    } finally {
      await c.close();
    }
  });

  it("standard MCP's ending result carries it in structuredContent", async () => {
    const transport = new StreamableHTTPClientTransport(new URL(`${s.url}/mcp?task_id=fx-echo-0`));
    const client = new Client({ name: 'openenv-test', version: '1.0.0' });
    await client.connect(transport);
    try {
      const out = await client.callTool({ name: 'finish_now', arguments: { score: 1 } });
      const cost = (out.structuredContent as { metadata: { cost: unknown } }).metadata.cost as { cpu_s: number };
      expect(EpisodeCostSchema.parse(cost)).toEqual(cost);
      expect(cost.cpu_s).toBeGreaterThan(0);
    } finally {
      await transport.terminateSession().catch(() => {});
      await client.close();
    }
  });
});

/** a usage part that fails, or never answers */
class BrokenUsage extends DelegatingSandbox<ProcessSandbox> {
  mode: 'reject' | 'hang' = 'reject';
  aborted = 0;
  override readonly usage: EnvUsage = {
    read: (_h: EnvHandle, signal: AbortSignal) => {
      if (this.mode === 'reject') return Promise.reject(new Error('the engine refused the stats'));
      // never answers, and ignores the abort (a sandbox that does not heed it)
      signal.addEventListener('abort', () => this.aborted++, { once: true });
      return new Promise(() => {});
    },
  };
}

describe('a cost reading that fails', () => {
  let s: ProcessServer;
  let broken: BrokenUsage;
  beforeAll(async () => {
    s = await startProcessServer({ maxConcurrentEnvs: 1 }, { wrap: (sandbox) => (broken = new BrokenUsage(sandbox)) });
  });
  afterAll(async () => {
    await s?.stop();
  });

  it.each(['reject', 'hang'] as const)('(%s) leaves null figures beside the wall time; the episode ends as it would and its env is removed', async (mode) => {
    broken.mode = mode;
    const started = await call(s.url, 'POST', '/episodes', { task_id: 'fx-echo-0' });
    const id = started.body.episode_id as string;
    const end = await call(s.url, 'POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'finish_now', arguments: { score: 0.25 } });
    expect(end.body).toMatchObject({ done: true, reward: 0.25, observation: { end_reason: 'finished' } });
    const cost = end.body.observation.metadata.cost;
    expect(cost).toMatchObject({ cpu_s: null, peak_memory_bytes: null, bytes_written: null });
    expect(cost.wall_s).toBeGreaterThan(0);
    await tornDown(s, id);
    expect(s.sandbox.held()).toEqual([]);
    // a hanging reading was told to stop at its bound (and not waited for past a short grace)
    if (mode === 'hang') expect(broken.aborted).toBe(1);
    else expect(s.logs()).toContain('the engine refused the stats');
  });
});
