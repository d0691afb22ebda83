/**
 * GridSim end to end: the real server (buildApp) serving bundles/gridsim-v1, its env image built
 * from the bundle, one real container per episode, driven over /ws as a trainer would.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { SYSTEM_PROMPT } from '../../bundles/gridsim-v1/envs/gridsim/src/task.js';
import { describeDocker, labelledResources } from '../support/docker.js';
import { INSTANCE_LABEL, startServer, type TestServer } from '../support/docker-server.js';
import { WsClient } from '../../scripts/lib/ws-client.js';

const BUNDLE = join(import.meta.dirname, '../../bundles/gridsim-v1');

interface WiringRow {
  task_id: string;
  turns: string[];
  data: { optimal_schedule: number[]; battery: { k_dis: number } };
  meta: { wiring: 'optimal' | 'idle' | 'infeasible' | 'no_submit' };
}
const wiring = readFileSync(join(BUNDLE, 'tasks/wiring.jsonl'), 'utf8')
  .split('\n')
  .filter((l) => l !== '')
  .map((l) => JSON.parse(l) as WiringRow);
const byKind = (kind: WiringRow['meta']['wiring']) => wiring.find((r) => r.meta.wiring === kind) as WiringRow;
const zeros = () => new Array<number>(24).fill(0);
/** within every battery's bounds (k_dis ≥ 2), and infeasible: 24 units sold from at most 8 stored */
const infeasible = () => new Array<number>(24).fill(-1);

describeDocker('GridSim end to end (real server, real containers)', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer({ maxConcurrentEnvs: 4 }, BUNDLE);
  });
  afterAll(async () => {
    await s?.stop();
    if (s) expect(labelledResources(`${INSTANCE_LABEL}=${s.instance}`)).toEqual({ containers: [], networks: [] });
  });

  it('serves the bundle: splits, the toolset and task rows without their data', async () => {
    const bundle = (await (await fetch(`${s.url}/bundle`)).json()) as Record<string, unknown>;
    expect(bundle).toMatchObject({ name: 'gridsim-v1', version: '1.0.0', default_split: 'train', splits: { train: 2000, eval: 200, wiring: 4 } });
    const toolsets = (await (await fetch(`${s.url}/toolsets`)).json()) as { toolsets: Record<string, Array<{ name: string }>> };
    expect(toolsets.toolsets.gridsim?.map((t) => t.name)).toEqual(['get_situation', 'check_schedule', 'submit_schedule', 'end_turn']);
    const row = byKind('optimal');
    const task = (await (await fetch(`${s.url}/tasks/${row.task_id}`)).json()) as Record<string, unknown>;
    expect(task).toMatchObject({ task_id: row.task_id, split: 'wiring', index: 0, toolset: 'gridsim', max_turns: 4 });
    expect(task.messages).toEqual([
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'user', content: row.turns[0] },
    ]);
    expect(JSON.stringify(task)).not.toContain('optimal_schedule');
  });

  it('the wiring tasks score 1.0 / 0.2 / 0 / 0 end to end', async () => {
    const play = async (row: WiringRow) => {
      const c = await WsClient.open(s.url);
      try {
        const r = await c.reset({ task_id: row.task_id });
        expect(r.type).toBe('observation');
        expect(r.data.observation.messages[1].content).toBe(row.turns[0]);
        let end;
        switch (row.meta.wiring) {
          case 'optimal':
            end = await c.call('submit_schedule', { schedule: row.data.optimal_schedule });
            break;
          case 'idle':
            end = await c.call('submit_schedule', { schedule: zeros() });
            break;
          case 'infeasible':
            end = await c.call('submit_schedule', { schedule: infeasible() });
            break;
          case 'no_submit':
            expect((await c.call('get_situation', {})).data.done).toBe(false);
            end = await c.call('end_turn', { answer: 'no schedule' });
            break;
        }
        return {
          kind: row.meta.wiring,
          done: end.data.done,
          reward: end.data.reward,
          scores: end.data.observation.scores,
          end_reason: end.data.observation.end_reason,
        };
      } finally {
        await c.close();
      }
    };
    const results = await Promise.all(wiring.map(play));
    expect(results).toEqual([
      { kind: 'optimal', done: true, reward: 1, scores: { schedule: 1 }, end_reason: 'finished' },
      { kind: 'idle', done: true, reward: 0.2, scores: { schedule: 0.2 }, end_reason: 'finished' },
      { kind: 'infeasible', done: true, reward: 0, scores: { schedule: 0 }, end_reason: 'finished' },
      { kind: 'no_submit', done: true, reward: 0, scores: { schedule: 0 }, end_reason: 'turns_ended' },
    ]);
  });

  it("refuses a 4th check_schedule and a second submit; a malformed schedule is the model's error", async () => {
    const row = byKind('idle');
    const c = await WsClient.open(s.url);
    await c.reset({ task_id: row.task_id });

    const malformed = await c.call('check_schedule', { schedule: [1, 2, 3] });
    expect(malformed.data.done).toBe(false);
    // the tool's own error is the model's to read: in the result, flagged is_error
    expect(malformed.data.observation.error).toBeNull();
    expect(malformed.data.observation.result.is_error).toBe(true);
    expect(malformed.data.observation.result.content[0].text).toMatch(/exactly 24 entries.*got 3/);

    for (let i = 1; i <= 3; i++) {
      const ok = await c.call('check_schedule', { schedule: zeros() });
      expect(ok.data.observation.error).toBeNull();
      expect(ok.data.observation.result.content[0].text).toContain(`Check ${i} of 3`);
      expect(ok.data.observation.result.data.checks_left).toBe(3 - i);
    }
    const fourth = await c.call('check_schedule', { schedule: zeros() });
    expect(fourth.data.done).toBe(false);
    expect(fourth.data.observation.result.is_error).toBe(true);
    expect(fourth.data.observation.result.content[0].text).toMatch(/at most 3 times/);

    const badSubmit = await c.call('submit_schedule', { schedule: zeros().map((_, i) => (i === 0 ? 99 : 0)) });
    expect(badSubmit.data.done).toBe(false);
    expect(badSubmit.data.observation.result.is_error).toBe(true);
    expect(badSubmit.data.observation.result.content[0].text).toMatch(/hour 1: 99 is out of bounds/);

    const submit = await c.call('submit_schedule', { schedule: JSON.stringify(row.data.optimal_schedule) });
    expect(submit.data).toMatchObject({ done: true, reward: 1 });
    const again = await c.call('submit_schedule', { schedule: zeros() });
    expect(again).toMatchObject({ type: 'error', data: { code: 'EXECUTION_ERROR', reason: 'episode_done' } });
    expect((await c.state()).data).toMatchObject({ done: true, phase: 'done' });
    await c.close();
  });
});
