/**
 * The step machine on its own: a fake sandbox and fake env (test/support/fake-sandbox.ts) and a
 * fake clock, so every answer, every timing and every timeout is the test's to set. What a client
 * sees of each (observations, failures, timings) is asserted exactly.
 */
import { describe, expect, it, vi } from 'vitest';
import { isAbortError } from '../../src/util/abort.js';
import { DIAGNOSE_RETRY } from '../../src/episodes/diagnosis.js';
import { DeployFailedError, EpisodeStateError } from '../../src/errors.js';
import { EnvCallError } from '../../src/episodes/env-client.js';
import { Episode, type EpisodeObserver } from '../../src/episodes/episode.js';
import type { CallObservation, Ending } from '../../src/protocol/observations.js';
import { SandboxError } from '../../src/sandbox/sandbox.js';
import { gate, makeRig, metricValue, onRigClock, type Rig } from '../support/fake-sandbox.js';

async function episodeOf(rig: Rig, taskId: string, seed: number | null = null, queueTimeoutMs = 10_000): Promise<Episode> {
  return new Episode(rig.deps, rig.bundle.byId.get(taskId)!, seed, 'ws', queueTimeoutMs);
}

/** lets the microtasks of already-settled steps run, with the fake clock standing still */
const settle = () => vi.advanceTimersByTimeAsync(0);

describe('Episode', () => {
  onRigClock();

  it('waits for its slot, deploys, resets the env with the task data and seed, and answers the reset observation with the clock’s timings', async () => {
    const rig = await makeRig({ capacity: 1 });
    const holder = await rig.admission.acquire({ timeoutMs: 1000 });
    const deploying = gate();
    rig.sandbox.beforeDeploy = () => deploying.promise;
    const ep = await episodeOf(rig, 'fx-two-turn', 7);
    const started = ep.start();
    await settle();
    expect(ep.phase).toBe('waiting');
    expect(rig.admission.waitingCount).toBe(1);
    await vi.advanceTimersByTimeAsync(2000);
    holder.release();
    await settle();
    expect(ep.phase).toBe('deploying');
    await vi.advanceTimersByTimeAsync(3000);
    deploying.open();
    const out = await started;
    expect(ep.phase).toBe('running');
    expect(out).toEqual({
      observation: {
        episode_id: ep.id,
        task_id: 'fx-two-turn',
        split: 'train',
        index: 4,
        seed: 7,
        toolset: 'echo',
        messages: [
          { role: 'system', content: 'You are testing an echo env across two turns.' },
          { role: 'user', content: 'first prompt' },
        ],
        tools: rig.bundle.toolsets.echo,
        turn: 1,
        turns: 2,
        max_turns: 4,
        timings: { queued_s: 2, deploy_s: 3, running_s: 0 },
      },
      reward: null,
      done: false,
    });
    expect(rig.sandbox.deployed).toEqual([ep.id]);
    expect(rig.sandbox.calls.map((c) => [c.path, c.body])).toEqual([['/reset', { task_id: 'fx-two-turn', data: { finish_score: 0.5 }, seed: 7 }]]);
    expect(await metricValue(rig.metrics.queueWait, { lane: 'normal' }, '_sum')).toBe(2);
    expect(await metricValue(rig.metrics.deploy, {}, '_sum')).toBe(3);
    await ep.close();
  });

  it('runs steps one at a time in arrival order, each answer before the next call starts', async () => {
    const rig = await makeRig();
    const first = gate();
    let inFlight = 0;
    let most = 0;
    rig.sandbox.behaviour = async (call) => {
      inFlight++;
      most = Math.max(most, inFlight);
      if (call.path === '/tools/call' && call.body.arguments.text === 'one') await first.promise;
      inFlight--;
      return rig.sandbox.answer(call);
    };
    const ep = await episodeOf(rig, 'fx-echo-0');
    await ep.start();
    const a = ep.step({ type: 'call_tool', tool_name: 'echo', arguments: { text: 'one' } });
    const b = ep.step({ type: 'call_tool', tool_name: 'echo', arguments: { text: 'two' } });
    await settle();
    expect(rig.sandbox.calls.filter((c) => c.path === '/tools/call').map((c) => c.body.arguments.text)).toEqual(['one']);
    first.open();
    const [ra, rb] = await Promise.all([a, b]);
    expect((ra.observation as CallObservation).result!.content[0]!.text).toBe('one');
    expect((rb.observation as CallObservation).result!.content[0]!.text).toBe('two');
    expect(most).toBe(1);
    expect(ep.steps).toBe(2);
    await ep.close();
  });

  it('turns: end_turn moves to the next prompt; the last one asks /finish, the scores become the reward, the env goes and the slot is freed', async () => {
    const rig = await makeRig({ capacity: 1 });
    const seen: string[] = [];
    rig.deps.observer = {
      onCreated: () => seen.push('created'),
      onReset: () => seen.push('reset'),
      onStep: (_ep, a) => seen.push(a.type === 'call_tool' ? a.tool_name : a.type),
      onEnded: () => seen.push('ended'),
    };
    const ep = await episodeOf(rig, 'fx-two-turn');
    await ep.start();
    await vi.advanceTimersByTimeAsync(4000);
    const next = await ep.step({ type: 'call_tool', tool_name: 'end_turn', arguments: {} });
    expect(next).toEqual({
      observation: {
        tool_name: 'end_turn',
        result: {
          content: [{ type: 'text', text: 'second prompt' }],
          structured_content: { turn: 2, prompt: 'second prompt' },
          data: { turn: 2, prompt: 'second prompt' },
          is_error: false,
        },
        error: null,
        turn: 2,
      },
      reward: null,
      done: false,
    });
    const last = await ep.step({ type: 'call_tool', tool_name: 'end_turn', arguments: { answer: 'done' } });
    expect(last.done).toBe(true);
    expect(last.reward).toBe(0.25);
    expect(last.observation).toMatchObject({
      done: true,
      end_reason: 'turns_ended',
      scores: { quality: 0.5, steps: 0 },
      timings: { queued_s: 0, deploy_s: 0, running_s: 4 },
    });
    expect(ep.state()).toEqual({ episode_id: ep.id, task_id: 'fx-two-turn', step_count: 2, turn: 2, done: true, phase: 'done' });
    await ep.tornDown;
    expect(rig.sandbox.tornDown).toEqual([ep.id]);
    expect(rig.admission.activeCount).toBe(0);
    expect(rig.sandbox.calls.map((c) => c.path)).toEqual(['/reset', '/finish']);
    expect(seen).toEqual(['created', 'reset', 'end_turn', 'ended', 'end_turn']);
    expect(await metricValue(rig.metrics.episodesEnded, { end_reason: 'turns_ended' })).toBe(1);
    expect(await ep.step({ type: 'list_tools' }).catch((e: unknown) => e)).toBeInstanceOf(EpisodeStateError);
  });

  it('the model’s mistakes are tool errors and the episode goes on: arguments that are no object or nest too deep, an unknown tool; the env’s 400 and 404 too', async () => {
    const rig = await makeRig();
    const ep = await episodeOf(rig, 'fx-echo-0');
    await ep.start();
    const errorOf = async (tool: string, args: unknown) =>
      ((await ep.step({ type: 'call_tool', tool_name: tool, arguments: args })).observation as CallObservation).error;
    expect(await errorOf('echo', '{"text":"x"}')).toEqual({
      error_type: 'invalid_args',
      message: "arguments must be a JSON object of the tool's parameters, got a string (pass the object itself, not a JSON string of it)",
    });
    let deep: unknown = {};
    for (let i = 0; i < 100; i++) deep = { d: deep };
    expect((await errorOf('echo', deep))!.error_type).toBe('invalid_args');
    expect((await errorOf('nope', {}))!.error_type).toBe('tool_not_found');
    rig.sandbox.behaviour = async (call) =>
      call.path === '/tools/call' ? { status: 400, body: { error: 'bad', message: 'text is required' } } : rig.sandbox.answer(call);
    expect(await errorOf('echo', {})).toEqual({ error_type: 'invalid_args', message: 'text is required' });
    expect(ep.phase).toBe('running');
    expect(ep.steps).toBe(4);
    // none of them reached the env but the last
    expect(rig.sandbox.calls.filter((c) => c.path === '/tools/call')).toHaveLength(1);
    await ep.close();
  });

  it('--max-steps: the step that reaches it is answered and scored by /finish', async () => {
    const rig = await makeRig({ settings: { maxSteps: 2 } });
    const ep = await episodeOf(rig, 'fx-echo-0');
    await ep.start();
    expect((await ep.step({ type: 'call_tool', tool_name: 'echo', arguments: { text: 'a' } })).done).toBe(false);
    const out = await ep.step({ type: 'call_tool', tool_name: 'echo', arguments: { text: 'b' } });
    expect(out.done).toBe(true);
    expect(out.observation).toMatchObject({ tool_name: 'echo', end_reason: 'max_steps', reward: 0.25 });
    await ep.tornDown;
  });

  it('no --max-steps: a task without a time budget is bounded at MAX_STEPS.calls (maxStepsFor)', async () => {
    const rig = await makeRig({ settings: { maxSteps: undefined } });
    const ep = await episodeOf(rig, 'fx-echo-0');
    await ep.start();
    for (let i = 1; i < 64; i++) expect((await ep.step({ type: 'call_tool', tool_name: 'echo', arguments: { text: `${i}` } })).done).toBe(false);
    const out = await ep.step({ type: 'call_tool', tool_name: 'echo', arguments: { text: 'last' } });
    expect(out.observation).toMatchObject({ end_reason: 'max_steps' });
    await ep.tornDown;
  });

  it('a call that times out while the env runs ends the episode tool_timeout; one whose env exited ends env_crashed with its exit code and log tail', async () => {
    const rig = await makeRig();
    rig.sandbox.behaviour = async (call) => {
      if (call.path === '/tools/call') throw new EnvCallError('timeout', 'env did not answer /tools/call in time');
      return rig.sandbox.answer(call);
    };
    const slow = await episodeOf(rig, 'fx-echo-0');
    await slow.start();
    const out = await slow.step({ type: 'call_tool', tool_name: 'echo', arguments: { text: 'x' } });
    expect(out.observation).toMatchObject({
      tool_name: 'echo',
      result: null,
      error: { error_type: 'timeout' },
      end_reason: 'env_failed',
      failure: { reason: 'tool_timeout', phase: 'tool', retryable: true, message: 'tool `echo` did not answer within tool_timeout (5 s)' },
    });

    const crashed = await episodeOf(rig, 'fx-echo-1');
    await crashed.start();
    rig.sandbox.behaviour = async (call) => {
      if (call.path !== '/tools/call') return rig.sandbox.answer(call);
      rig.sandbox.kill(crashed.envId, { exitCode: 137, logTail: 'Segmentation fault' });
      throw new EnvCallError('timeout', 'env did not answer /tools/call in time');
    };
    const died = await crashed.step({ type: 'call_tool', tool_name: 'echo', arguments: { text: 'x' } });
    expect((died.observation as Ending).failure).toMatchObject({ reason: 'env_crashed', exit_code: 137, log_tail: 'Segmentation fault' });
    expect((died.observation as CallObservation).error!.error_type).toBe('transport_error');
    await Promise.all([slow.tornDown, crashed.tornDown]);
    expect(await metricValue(rig.metrics.envFailures, { reason: 'tool_timeout' })).toBe(1);
    expect(await metricValue(rig.metrics.envFailures, { reason: 'env_crashed' })).toBe(1);
  });

  it('an env that drops a call but still runs is looked at again for DIAGNOSE_RETRY before it is called unreachable', async () => {
    const rig = await makeRig();
    rig.sandbox.behaviour = async (call) => {
      if (call.path === '/tools/call') throw new EnvCallError('unreachable', 'env unreachable on /tools/call: ECONNRESET');
      return rig.sandbox.answer(call);
    };
    const ep = await episodeOf(rig, 'fx-echo-0');
    await ep.start();
    let answered = false;
    const step = ep.step({ type: 'call_tool', tool_name: 'echo', arguments: { text: 'x' } }).finally(() => (answered = true));
    await vi.advanceTimersByTimeAsync(DIAGNOSE_RETRY.delayMs * (DIAGNOSE_RETRY.attempts - 1) - 1);
    expect(answered).toBe(false);
    await vi.advanceTimersByTimeAsync(DIAGNOSE_RETRY.delayMs);
    const out = await step;
    expect((out.observation as Ending).failure).toMatchObject({ reason: 'env_unreachable', phase: 'tool' });
    expect(rig.sandbox.diagnoses).toBe(DIAGNOSE_RETRY.attempts);
    await ep.tornDown;
  });

  it('a death between calls ends the episode at once; the next step is told how it ended', async () => {
    const rig = await makeRig();
    const ep = await episodeOf(rig, 'fx-echo-0');
    await ep.start();
    rig.sandbox.kill(ep.envId, { oomKilled: true, exitCode: 137 });
    await settle();
    expect(ep.done).toBe(true);
    expect(ep.failure).toMatchObject({ reason: 'env_oom', phase: 'tool', exit_code: 137 });
    await ep.tornDown;
    expect(rig.admission.activeCount).toBe(0);
  });

  it('--episode-timeout ends a running episode between steps; the next step is told once, later ones are refused', async () => {
    const rig = await makeRig({ settings: { episodeTimeoutMs: 30_000 } });
    const ep = await episodeOf(rig, 'fx-echo-0');
    await ep.start();
    await vi.advanceTimersByTimeAsync(29_999);
    expect(ep.done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(ep.done).toBe(true);
    await ep.tornDown;
    expect(rig.sandbox.tornDown).toEqual([ep.id]);
    const told = await ep.step({ type: 'call_tool', tool_name: 'echo', arguments: { text: 'late' } });
    expect(told).toMatchObject({
      done: true,
      reward: null,
      observation: {
        tool_name: 'echo',
        end_reason: 'env_failed',
        failure: { reason: 'episode_timeout', message: 'the episode ran past --episode-timeout (30 s)' },
      },
    });
    expect((await ep.step({ type: 'list_tools' }).catch((e: unknown) => e)) as EpisodeStateError).toMatchObject({ reason: 'episode_done' });
  });

  it('closed while it waits for a slot: the reset rejects with an AbortError, it leaves the queue, nothing is deployed', async () => {
    const rig = await makeRig({ capacity: 1 });
    const holder = await rig.admission.acquire({ timeoutMs: 1000 });
    const ep = await episodeOf(rig, 'fx-echo-0');
    const started = ep.start().catch((e: unknown) => e);
    await settle();
    expect(rig.admission.waitingCount).toBe(1);
    await ep.close();
    expect(isAbortError(await started)).toBe(true);
    expect(rig.admission.waitingCount).toBe(0);
    expect(ep.endReason).toBe('closed');
    expect(rig.sandbox.deployed).toEqual([]);
    expect(rig.sandbox.tornDown).toEqual([]);
    holder.release();
    expect(rig.admission.activeCount).toBe(0);
  });

  it('a deploy that fails answers DeployFailedError with the sandbox’s reason; the slot is free again', async () => {
    const rig = await makeRig({ capacity: 1 });
    rig.sandbox.beforeDeploy = async () => {
      throw new SandboxError('not_ready_in_time', 'the env was not ready within 30 s', { exitCode: null, logTail: 'still booting' });
    };
    const ep = await episodeOf(rig, 'fx-echo-0');
    const err = (await ep.start().catch((e: unknown) => e)) as DeployFailedError;
    expect(err).toBeInstanceOf(DeployFailedError);
    expect(err.failure).toEqual({
      reason: 'deploy_timeout',
      phase: 'deploy',
      retryable: true,
      message: 'the env was not ready within 30 s',
      episode_id: ep.id,
      task_id: 'fx-echo-0',
      exit_code: null,
      log_tail: 'still booting',
    });
    await ep.tornDown;
    expect(rig.admission.activeCount).toBe(0);
    expect(ep.endReason).toBe('env_failed');
  });

  it('an observer that throws is logged and ignored: the episode plays on', async () => {
    const observer: EpisodeObserver = {
      onStep: () => {
        throw new Error('observer broke');
      },
    };
    const rig = await makeRig({ observer });
    const ep = await episodeOf(rig, 'fx-echo-0');
    await ep.start();
    const out = await ep.step({ type: 'call_tool', tool_name: 'echo', arguments: { text: 'still here' } });
    expect((out.observation as CallObservation).result!.content[0]!.text).toBe('still here');
    expect(rig.log.lines().filter((l) => l.msg === 'an episode observer threw; ignored')).toHaveLength(1);
    await ep.close();
  });
});
