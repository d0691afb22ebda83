/**
 * A full episode over /ws, and every row of the bad-input table, with the envs as processes
 * (ws.docker.test.ts plays the episode once on real containers).
 */
import { describe, expect, it } from 'vitest';
import { processSuiteServer } from '../support/process-server.js';
import { waitFor } from '../../scripts/lib/wait.js';
import { playTwoTurnEpisode } from '../support/two-turn-scenario.js';
import { WsClient } from '../../scripts/lib/ws-client.js';

describe('WS /ws sessions', () => {
  const s = processSuiteServer({ maxConcurrentEnvs: 4 });

  it('plays a two-turn task by task_id: list_tools, call_tool, end_turn twice, reward from scores', async () => {
    await playTwoTurnEpisode(s.url);
  });

  it('resets by split + index, answers bad arguments and unknown tools without ending the episode', async () => {
    const c = await WsClient.open(s.url);
    const r = await c.reset({ split: 'eval', index: 0 });
    expect(r.data.observation).toMatchObject({ task_id: 'fx-eval-0', split: 'eval', index: 0 });

    const asString = await c.call('echo', '{"text":"hi"}');
    expect(asString.data.done).toBe(false);
    expect(asString.data.observation.result).toBeNull();
    expect(asString.data.observation.error.error_type).toBe('invalid_args');
    expect(asString.data.observation.error.message).toMatch(/JSON object/);
    for (const bad of [[1, 2], null]) {
      const o = await c.call('echo', bad);
      expect(o.data.observation.error.error_type).toBe('invalid_args');
    }
    // the tool's own error stays in the result, flagged, for the model to read
    const failed = await c.call('fail', { message: 'oops' });
    expect(failed.data.done).toBe(false);
    expect(failed.data.observation.error).toBeNull();
    expect(failed.data.observation.result).toMatchObject({ is_error: true, content: [{ type: 'text', text: expect.stringContaining('oops') }] });
    const unknown = await c.call('no_such_tool', {});
    expect(unknown.data.observation.error.error_type).toBe('tool_not_found');
    expect(unknown.data.done).toBe(false);

    const fin = await c.call('finish_now', { score: 0.25 });
    expect(fin.data).toMatchObject({ done: true, reward: 0.25 });
    expect(fin.data.observation).toMatchObject({ end_reason: 'finished', scores: { quality: 0.25 } });
    await c.close();
  });

  it('answers malformed frames with OpenEnv codes and keeps the session', async () => {
    const c = await WsClient.open(s.url);
    const send = (text: string) => {
      const p = c.next();
      c.sendRaw(text);
      return p;
    };
    expect((await send('{not json')).data.code).toBe('INVALID_JSON');
    expect((await send('[1,2]')).data.code).toBe('VALIDATION_ERROR');
    expect((await send('{"type":"dance"}')).data.code).toBe('UNKNOWN_TYPE');
    expect((await send('{"type":"reset","data":{},"extra":1}')).data.code).toBe('VALIDATION_ERROR');
    expect((await send('{"type":"step","data":{"type":"call_tool"}}')).data.code).toBe('VALIDATION_ERROR');
    expect((await c.reset({ task_id: 'nope' })).data.code).toBe('VALIDATION_ERROR');
    expect((await c.reset({ split: 'nope' })).data.code).toBe('VALIDATION_ERROR');
    expect((await c.reset({ split: 'eval', index: 99 })).data.code).toBe('VALIDATION_ERROR');
    expect((await c.reset({ index: -1 })).data.code).toBe('VALIDATION_ERROR');
    const noEp = await c.call('echo', { text: 'x' });
    expect(noEp.data).toMatchObject({ code: 'EXECUTION_ERROR', reason: 'no_episode' });
    expect((await c.state()).data).toMatchObject({ phase: 'idle', episode_id: null });
    // unknown reset fields are ignored, as OpenEnv clients pass arbitrary kwargs
    const ok = await c.reset({ task_id: 'fx-echo-0', temperature: 1.1 });
    expect(ok.type).toBe('observation');
    await c.close();
  });

  it('buffers frames sent while the reset deploys: every frame gets its reply, in order', async () => {
    const c = await WsClient.open(s.url);
    const replies = [c.next(), c.next(), c.next(), c.next()];
    c.sendRaw(JSON.stringify({ type: 'reset', data: { task_id: 'fx-echo-1' } }));
    c.sendRaw(JSON.stringify({ type: 'step', data: { type: 'call_tool', tool_name: 'echo', arguments: { text: 'one' } } }));
    c.sendRaw(JSON.stringify({ type: 'step', data: { type: 'call_tool', tool_name: 'echo', arguments: { text: 'two' } } }));
    c.sendRaw(JSON.stringify({ type: 'state' }));
    const [r, a, b, st] = await Promise.all(replies);
    expect(r.type).toBe('observation');
    expect(a.data.observation.result.content[0].text).toBe('one');
    expect(b.data.observation.result.content[0].text).toBe('two');
    expect(st.data).toMatchObject({ step_count: 2, phase: 'running' });
    await c.close();
  });

  it('a reset with no task picks one of the default split, by seed when given', async () => {
    const c = await WsClient.open(s.url);
    const a = await c.reset({ seed: 3 });
    const b = await c.reset({ seed: 3 }); // tears the first down before the second
    expect(a.data.observation.split).toBe('train');
    expect(a.data.observation.index).toBe(3 % 6);
    expect(b.data.observation.task_id).toBe(a.data.observation.task_id);
    expect(b.data.observation.episode_id).not.toBe(a.data.observation.episode_id);
    await c.close();
  });

  it('closes a frame over 4 MiB with 1009 and tears its episode down', async () => {
    const c = await WsClient.open(s.url);
    await c.reset({ task_id: 'fx-echo-0' });
    c.sendRaw(JSON.stringify({ type: 'step', data: { type: 'call_tool', tool_name: 'echo', arguments: { text: 'x'.repeat(4 * 1024 * 1024 + 10) } } }));
    const closed = await c.closed;
    expect(closed.code).toBe(1009);
    await waitFor(() => s.sandbox.held().length === 0, 30_000, 'the episode torn down');
  });

  it('reports invalid scores as env_failed with reward null, never as a reward', async () => {
    const c = await WsClient.open(s.url);
    await c.reset({ task_id: 'fx-bad-scores' });
    const end = await c.call('end_turn', {});
    expect(end.data).toMatchObject({ done: true, reward: null });
    expect(end.data.observation).toMatchObject({ end_reason: 'env_failed', failure: { reason: 'invalid_scores', retryable: false, phase: 'finish' } });
    await c.close();
  });
});
