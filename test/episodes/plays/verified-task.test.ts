import { afterEach, describe, expect, it, vi } from 'vitest';
import type { AgentUser } from '../../../src/container/index.js';
import { EnvToolsPlay } from '../../../src/episodes/plays/env-tools.js';
import { TurnSetupError } from '../../../src/episodes/plays/play.js';
import { VerifiedTaskPlay } from '../../../src/episodes/plays/verified-task.js';
import { TaskVerification, type TurnEndOutcome } from '../../../src/episodes/verified-task.js';
import type { ContainerExec } from '../../../src/sandbox/container-exec.js';
import type { EnvShell } from '../../../src/sandbox/sandbox.js';
import { bundle, ECHO, fakeHost, playEnvOf, scoringEnv, task } from './host.js';

const container = { exec: {} as ContainerExec, shell: {} as EnvShell, agentUser: {} as AgentUser };

/** a verified play over an env whose /finish scores 0.75, its verifier's turn ends answered by `ends` */
async function verified(ends: TurnEndOutcome[]) {
  vi.spyOn(TaskVerification.prototype, 'start').mockResolvedValue({ ok: true });
  const turnEnded = vi.spyOn(TaskVerification.prototype, 'turnEnded');
  for (const e of ends) turnEnded.mockResolvedValueOnce(e);
  const rig = scoringEnv(task({ verifier: { tests: 'tests' } } as never), 0.75);
  const play = new VerifiedTaskPlay(rig.host, new EnvToolsPlay(rig.host));
  await play.attach(playEnvOf(container));
  return { ...rig, play, turnEnded };
}

describe('VerifiedTaskPlay', () => {
  afterEach(() => vi.restoreAllMocks());

  it("needs the env's container, and a first turn whose setup passes", async () => {
    const { host } = fakeHost(task(), bundle());
    const play = new VerifiedTaskPlay(host, new EnvToolsPlay(host));
    expect(play.tools).toEqual([ECHO]);
    await expect(play.attach(playEnvOf())).rejects.toThrow("task t1 is verified in its env's container, but the sandbox gives no access to it");
    vi.spyOn(TaskVerification.prototype, 'start').mockResolvedValue({ ok: false, message: 'setup.sh failed', output: 'tail' });
    const failed = play.attach(playEnvOf(container));
    await expect(failed).rejects.toThrow(TurnSetupError);
    await expect(failed).rejects.toMatchObject({ message: 'setup.sh failed', output: 'tail' });
  });

  it("end_turn: the next turn's prompt after its verifier, then the scores with the episode's end", async () => {
    const { play, state, turnEnded } = await verified([{ kind: 'next' }, { kind: 'scored', scores: { score: 1 }, stoppedEarly: null }]);
    expect((await play.endTurn(null)).observation).toMatchObject({ tool_name: 'end_turn', turn: 2 });
    const last = await play.endTurn('done');
    expect(last).toMatchObject({ done: true, reward: 1, observation: { tool_name: 'end_turn', error: null, scores: { score: 1 }, end_reason: 'turns_ended' } });
    expect(last.observation).toMatchObject({ result: { content: [{ text: 'The last turn ended; the episode is scored.' }] } });
    expect(turnEnded.mock.calls).toEqual([
      [0, 'end_turn'],
      [1, 'end_turn'],
    ]);
    expect(state.endReason).toBe('turns_ended');
  });

  it('a turn scored under its min_reward ends the episode early, and says so', async () => {
    const { play } = await verified([{ kind: 'scored', scores: { score: 0 }, stoppedEarly: 'under 0.5' }]);
    expect((await play.endTurn(null)).observation).toMatchObject({
      result: { content: [{ text: 'The turn scored under its min_reward: the episode ends here and is scored.' }] },
    });
  });

  it("a failed verifier fails the episode with its tail; a failed turn's setup as setup_failed", async () => {
    const failed = await verified([{ kind: 'failed', reason: 'verifier_timeout', message: 'too slow', tail: 'out' }]);
    const out = await failed.play.endTurn(null);
    expect(out.observation).toMatchObject({ tool_name: 'end_turn', error: { message: 'too slow' } });
    expect(failed.state.failure).toEqual({ reason: 'verifier_timeout', phase: 'finish', message: 'too slow', extra: { log_tail: 'out' } });
    vi.restoreAllMocks();
    const setup = await verified([{ kind: 'setup_failed', message: 'ready check failed', output: 'o' }]);
    await setup.play.budgetPassed('end_turn');
    expect(setup.state.failure).toEqual({ reason: 'setup_failed', phase: 'reset', message: 'ready check failed', extra: { log_tail: 'o' } });
  });

  it('an unverified end is scored by the env; max steps end the episode at its verifier', async () => {
    const { play, state, caller, turnEnded } = await verified([{ kind: 'unverified' }]);
    expect(await play.finish('max_steps')).toMatchObject({ done: true, reward: 0.75 });
    expect(turnEnded.mock.calls).toEqual([[0, 'episode_end']]);
    expect(caller.calls.map((c) => c.path)).toEqual(['/reset', '/finish']);
    expect(state.endReason).toBe('max_steps');
  });

  it("a turn's end that throws is the env's failure", async () => {
    const { play, state, turnEnded } = await verified([]);
    turnEnded.mockRejectedValueOnce(new Error('exec failed'));
    await play.runEnded('end_turn');
    expect(state.failure).toMatchObject({
      reason: 'env_crashed',
      phase: 'finish',
      message: "the end of turn 1 failed in the env's container: exec failed (the env exited)",
    });
  });
});
