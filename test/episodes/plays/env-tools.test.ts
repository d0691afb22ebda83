import { describe, expect, it } from 'vitest';
import { EnvCallError } from '../../../src/episodes/env-client.js';
import { EnvToolsPlay } from '../../../src/episodes/plays/env-tools.js';
import { bundle, ECHO, fakeCaller, fakeHost, playEnvOf, task } from './host.js';

const ok = (body: unknown) => () => ({ status: 200, body });

/** an attached play over an env answering `answers` (its /reset: 200) */
async function attached(answers: Parameters<typeof fakeCaller>[0]) {
  const caller = fakeCaller({ '/reset': ok({}), ...answers });
  const rig = fakeHost(task(), bundle(), caller);
  const play = new EnvToolsPlay(rig.host);
  await play.attach(playEnvOf());
  return { ...rig, play, caller };
}

describe('EnvToolsPlay', () => {
  it("lists the toolset's tools and resets an http env with the task's data and seed", async () => {
    const caller = fakeCaller({ '/reset': ok({}) });
    const { host } = fakeHost(task(), bundle(), caller);
    const play = new EnvToolsPlay(host);
    expect(play.tools).toEqual([ECHO]);
    await play.attach(playEnvOf());
    expect(caller.calls).toEqual([{ path: '/reset', body: { task_id: 't1', data: { x: 1 }, seed: 7 } }]);
  });

  it('a /reset answered with an error status is a bad response; a shell env has no /reset', async () => {
    const caller = fakeCaller({ '/reset': () => ({ status: 500, body: { error: 'boom' } }) });
    const failing = new EnvToolsPlay(fakeHost(task(), bundle(), caller).host);
    await expect(failing.attach(playEnvOf())).rejects.toThrow(EnvCallError);
    const shell = new EnvToolsPlay(fakeHost(task(), bundle({ kind: 'shell' }), caller).host);
    await shell.attach(playEnvOf());
    expect(caller.calls).toHaveLength(1);
  });

  it("calls a tool through the env: its text, its refusal, its done reply's scores", async () => {
    const { play, state } = await attached({
      '/tools/call': (body) => {
        const { arguments: args } = body as { arguments: { mode: string } };
        if (args.mode === 'missing') return { status: 404, body: { message: 'no such tool' } };
        if (args.mode === 'done') return { status: 200, body: { text: 'bye', done: true, scores: { score: 0.5 } } };
        return { status: 200, body: { result: 'hi' } };
      },
    });
    expect((await play.call('echo', { mode: 'plain' })).observation).toMatchObject({ tool_name: 'echo', result: { data: 'hi' }, error: null });
    expect((await play.call('echo', { mode: 'missing' })).observation).toEqual({
      tool_name: 'echo',
      result: null,
      error: { error_type: 'tool_not_found', message: 'no such tool' },
    });
    const done = await play.call('echo', { mode: 'done' });
    expect(done).toMatchObject({ reward: 0.5, done: true, observation: { tool_name: 'echo', end_reason: 'finished', scores: { score: 0.5 } } });
    expect(state.endReason).toBe('finished');
  });

  it("a call the env does not answer fails the episode with the env's verdict", async () => {
    const { play, state } = await attached({
      '/tools/call': () => {
        throw new EnvCallError('unreachable', 'socket hang up');
      },
    });
    const out = await play.call('echo', {});
    expect(out.done).toBe(true);
    expect(state.failure).toMatchObject({ reason: 'env_crashed', phase: 'tool', message: 'tool `echo` failed: socket hang up (the env exited)' });
  });

  it("end_turn: the next turn's prompt, then after the last turn the env's scores", async () => {
    const { play, state } = await attached({ '/finish': ok({ scores: { score: 1 } }) });
    expect((await play.endTurn('a')).observation).toMatchObject({ tool_name: 'end_turn', turn: 2, result: { data: { turn: 2, prompt: 'second' } } });
    const last = await play.endTurn('b');
    expect(last).toMatchObject({ done: true, reward: 1, observation: { tool_name: 'end_turn', error: null, end_reason: 'turns_ended', scores: { score: 1 } } });
    expect(last.observation).toMatchObject({ result: { content: [{ text: 'The last turn ended; the episode is scored.' }], data: { answer: 'b' } } });
    expect(state.turn).toBe(2);
  });

  it('a /finish without scores fails invalid_scores; a time budget ends the turn, or on the last turn the episode', async () => {
    const { play, state } = await attached({ '/finish': ok({ nothing: true }) });
    expect((await play.budgetPassed('end_turn')).done).toBe(false);
    expect(state.turn).toBe(2);
    const out = await play.budgetPassed('end_turn');
    expect(out.done).toBe(true);
    expect(state.failure).toMatchObject({ reason: 'invalid_scores', phase: 'finish', message: 'the env answered /finish with HTTP 200 and no scores object' });
  });

  it('a harness run ended: the env scores the episode', async () => {
    const { play, state } = await attached({ '/finish': ok({ scores: { score: 0.25 } }) });
    expect(await play.runEnded()).toMatchObject({ done: true, reward: 0.25 });
    expect(state.endReason).toBe('turns_ended');
    expect(play.progress()).toBeNull();
  });
});
