/**
 * The /ws client's frames are the protocol's: a ServerSession hands eval and play each frame as
 * ServerFrameSchema parses it, and a frame that is not one (or not JSON) is the server's failure,
 * a SessionError naming what is wrong; the test rig's receive() still sees the wire as it came.
 * Against a scripted WebSocket server on 127.0.0.1 that answers each client frame with the next
 * of its lines.
 */
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { ServerSession, SessionError } from '../../src/client/session.js';

const RESET_OBSERVATION = {
  episode_id: 'ep-1',
  task_id: 't-1',
  split: 'train',
  index: 0,
  seed: null,
  toolset: 'echo',
  messages: [{ role: 'user', content: 'hi' }],
  tools: [],
  turn: 1,
  turns: 1,
  max_turns: 4,
  timings: { queued_s: 0, deploy_s: 0.5, running_s: 0 },
};

let wss: WebSocketServer | null = null;
afterEach(async () => {
  for (const c of wss?.clients ?? []) c.terminate();
  await new Promise((r) => wss?.close(r) ?? r(undefined));
  wss = null;
});

/** a server that answers the n-th client frame with `answers[n]` (text as it is, anything else as JSON) */
async function scripted(answers: unknown[]): Promise<string> {
  wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((r) => wss!.once('listening', r));
  wss.on('connection', (ws) => {
    let n = 0;
    ws.on('message', () => {
      const a = answers[n++];
      if (a !== undefined) ws.send(typeof a === 'string' ? a : JSON.stringify(a));
    });
  });
  return `http://127.0.0.1:${(wss.address() as AddressInfo).port}`;
}

describe('ServerSession', () => {
  it("hands over each frame as the protocol's ServerFrame", async () => {
    const url = await scripted([
      { type: 'observation', data: { observation: RESET_OBSERVATION, reward: null, done: false } },
      { type: 'error', data: { code: 'EXECUTION_ERROR', message: 'episode ep-1 is done', reason: 'episode_done' } },
      { type: 'state', data: { episode_id: 'ep-1', task_id: 't-1', step_count: 0, turn: 1, done: false, phase: 'running' } },
    ]);
    const s = await ServerSession.open(url);
    const reset = await s.reset({ task_id: 't-1' });
    expect(reset.type === 'observation' && 'episode_id' in reset.data.observation && reset.data.observation.episode_id).toBe('ep-1');
    const err = await s.call('echo', { text: 'x' });
    expect(err.type === 'error' && err.data.reason).toBe('episode_done');
    expect(await s.state()).toMatchObject({ type: 'state', data: { phase: 'running' } });
    await s.close();
  });

  it('a frame that is not the protocol’s is a bad_frame SessionError naming the field; receive() gets it as it came', async () => {
    const wrong = { type: 'observation', data: { observation: { ...RESET_OBSERVATION, tools: 'none' }, reward: null, done: false } };
    const url = await scripted([wrong, wrong, '{not json', { type: 'hello', data: {} }]);
    const s = await ServerSession.open(url);
    const e = await s.reset().catch((x: unknown) => x);
    expect(e).toBeInstanceOf(SessionError);
    expect(e).toMatchObject({ reason: 'bad_frame' });
    expect((e as Error).message).toContain('frame.data.observation');
    // the same frame, read as it came
    expect(await s.exchange({ type: 'reset', data: {} })).toEqual(wrong);
    await expect(s.state()).rejects.toMatchObject({ reason: 'bad_frame', message: 'the server sent a frame that is not JSON' });
    await expect(s.state()).rejects.toMatchObject({ reason: 'bad_frame', message: expect.stringContaining('"type":"hello"') });
    await s.close();
  });
});
