import { afterEach, describe, expect, it, vi } from 'vitest';
import type { AgentUser } from '../../../src/container/index.js';
import { HarnessTask, type HarnessRun } from '../../../src/episodes/harness-task.js';
import { EnvToolsPlay } from '../../../src/episodes/plays/env-tools.js';
import { HarnessRunPlay } from '../../../src/episodes/plays/harness-run.js';
import type { HarnessManifest } from '../../../src/bundle/index.js';
import type { ResetObservation, StepOutcome } from '../../../src/protocol/observations.js';
import type { ContainerExec } from '../../../src/sandbox/container-exec.js';
import { bundle, fakeHost, playEnvOf, scoringEnv, task } from './host.js';

const SPEC = { command: ['run-agent'], env: {} } as HarnessManifest;
const container = { exec: {} as ContainerExec, agentUser: { get: async () => '1000:1000' } as unknown as AgentUser };
const PROGRESS = { turn: 1, running: false, elapsed_s: 2, model_calls: 1, model_tokens: 10, ended: 'exited' as const, exit_code: 0, output_tail: 'ok' };

async function harnessPlay(run: Promise<HarnessRun>) {
  vi.spyOn(HarnessTask.prototype, 'runTurn').mockReturnValue(run);
  vi.spyOn(HarnessTask.prototype, 'progress').mockReturnValue(PROGRESS);
  const rig = scoringEnv(task({ turns: ['do it'] }), 1);
  const ran: HarnessRun[] = [];
  rig.host.harnessRan = (r) => ran.push(r);
  const play = new HarnessRunPlay(rig.host, SPEC, new EnvToolsPlay(rig.host));
  await play.attach(playEnvOf(container));
  return { ...rig, play, ran };
}

afterEach(() => vi.restoreAllMocks());

describe('HarnessRunPlay', () => {
  it("its one tool is wait; it needs the env's container; its reset says it is a harness episode", async () => {
    const { host } = fakeHost(task(), bundle());
    const play = new HarnessRunPlay(host, SPEC, new EnvToolsPlay(host));
    expect(play.tools.map((t) => t.name)).toEqual(['wait']);
    expect(play.clocked).toBe(false);
    await expect(play.attach(playEnvOf())).rejects.toThrow("task t1 names a harness, but the sandbox gives no access to its env's container");
    const reset = { observation: {}, reward: null, done: false } as StepOutcome<ResetObservation>;
    play.onReset(reset);
    expect(reset.observation.harness).toBe(true);
  });

  it('refuses other tools and bad wait arguments', async () => {
    const { play } = await harnessPlay(new Promise(() => undefined));
    expect((await play.step({ type: 'call_tool', tool_name: 'echo', arguments: {} })).observation).toEqual({
      tool_name: 'echo',
      result: null,
      error: { error_type: 'tool_not_found', message: 'a harness episode is run by the server: its one tool is wait (no "echo")' },
    });
    const bad = await play.step({ type: 'call_tool', tool_name: 'wait', arguments: { timeout_s: 'soon' } });
    expect(bad.observation).toMatchObject({ error: { error_type: 'invalid_args' } });
    expect((await play.step({ type: 'list_tools' })).observation).toEqual({ tools: play.tools });
  });

  it("runs the harness once running; its run's end is scored by the inner play; wait then tells the ending", async () => {
    const run: HarnessRun = { turn: 1, ended: 'exited', exitCode: 0, durationMs: 1500, output: { text: 'ok' } as HarnessRun['output'] };
    const { play, state, ran, caller } = await harnessPlay(Promise.resolve(run));
    play.onRunning();
    await vi.waitFor(() => expect(state.done).toBe(true));
    expect(ran).toEqual([run]);
    expect(caller.calls.map((c) => c.path)).toEqual(['/reset', '/finish']);
    const out = await play.step({ type: 'call_tool', tool_name: 'wait', arguments: {} });
    expect(out).toMatchObject({ done: true, reward: 1, observation: { tool_name: 'wait', error: null, end_reason: 'turns_ended', scores: { score: 1 } } });
    expect(out.observation).toMatchObject({ result: { data: PROGRESS } });
    expect(play.progress()).toEqual(PROGRESS);
  });

  it("a harness that cannot run is the env's failure", async () => {
    const { play, state } = await harnessPlay(Promise.reject(new Error('no python')));
    play.onRunning();
    await vi.waitFor(() => expect(state.done).toBe(true));
    expect(state.failure).toMatchObject({ phase: 'tool', message: "the harness could not run in the env's container: no python (the env exited)" });
  });
});
