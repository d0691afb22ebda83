/**
 * The agent's trajectory in ATIF (src/verifier/trajectory.ts): built from a transcript's events,
 * only the model's prompt and its tool calls (with the replies it got) become steps, numbered
 * from 1, each call's observation tied to its call id; a verifier's output, the env's model calls,
 * list_tools and the end never appear. The log keeps payloads bounded as the transcript does.
 */
import { describe, expect, it } from 'vitest';
import type { TranscriptEvent } from '../../src/protocol/console.js';
import { ATIF_SCHEMA_VERSION, TrajectoryLog, buildTrajectory } from '../../src/verifier/trajectory.js';

const at = '2026-01-01T00:00:00.000Z';

const EVENTS: TranscriptEvent[] = [
  {
    kind: 'reset',
    at,
    messages: [
      { role: 'system', content: 'You have a shell.' },
      { role: 'user', content: [{ type: 'text', text: 'Sum the numbers.' }] },
    ],
    tools: ['bash', 'end_turn'],
    turns: 1,
    max_turns: 1,
  },
  { kind: 'list_tools', at, ms: 1 },
  { kind: 'tool_call', at, step: 1, turn: 1, tool_name: 'bash', arguments: { command: 'cat numbers.txt' }, result: '4\n15\n23\n', error: null, ms: 3 },
  {
    kind: 'tool_call',
    at,
    step: 2,
    turn: 1,
    tool_name: 'read_file',
    arguments: { path: '/nope' },
    result: null,
    error: { type: 'tool_error', message: 'no such file' },
    ms: 1,
  },
  {
    kind: 'verifier',
    at,
    turn: 1,
    scope: 'task',
    mode: 'clean',
    status: 'scored',
    tampered: [],
    scores: { reward: 1 },
    exit_code: 0,
    duration_s: 0.2,
    agent_processes_killed: 0,
    output: 'SECRET EXPECTED 42',
    output_bytes: 18,
    dropped_bytes: 0,
  },
];

describe('buildTrajectory', () => {
  it('the prompt and the tool calls as ATIF steps, in order; nothing of the verifier', () => {
    const t = buildTrajectory(EVENTS, { id: 'ep-1' });
    expect(t.schema_version).toBe(ATIF_SCHEMA_VERSION);
    expect(t.session_id).toBe('ep-1');
    expect(t.agent).toEqual({ name: 'openenv-bundle', version: '1' });
    expect(t.steps).toEqual([
      { step_id: 1, timestamp: at, source: 'system', message: 'You have a shell.' },
      { step_id: 2, timestamp: at, source: 'user', message: 'Sum the numbers.' },
      {
        step_id: 3,
        timestamp: at,
        source: 'agent',
        message: '',
        tool_calls: [{ tool_call_id: 'call_1', function_name: 'bash', arguments: { command: 'cat numbers.txt' } }],
        observation: { results: [{ source_call_id: 'call_1', content: '4\n15\n23\n' }] },
        extra: { turn: 1 },
      },
      {
        step_id: 4,
        timestamp: at,
        source: 'agent',
        message: '',
        tool_calls: [{ tool_call_id: 'call_2', function_name: 'read_file', arguments: { path: '/nope' } }],
        observation: { results: [{ source_call_id: 'call_2', content: '{"type":"tool_error","message":"no such file"}' }] },
        extra: { turn: 1, error: true },
      },
    ]);
    expect(t.final_metrics).toEqual({ total_steps: 4 });
    expect(JSON.stringify(t)).not.toContain('SECRET');
  });

  it('no events: a valid trajectory with no steps', () => {
    expect(buildTrajectory([], { id: 'x', model: 'm' })).toEqual({
      schema_version: ATIF_SCHEMA_VERSION,
      session_id: 'x',
      agent: { name: 'openenv-bundle', version: '1', model_name: 'm' },
      steps: [],
      final_metrics: { total_steps: 0 },
    });
  });

  it('a result that is no string is given as its JSON; arguments that are no object are wrapped', () => {
    const t = buildTrajectory([{ kind: 'tool_call', at, step: 1, turn: 2, tool_name: 'f', arguments: [1, 2], result: { ok: true }, error: null, ms: 0 }], {
      id: 'y',
    });
    expect(t.steps[0]).toMatchObject({
      tool_calls: [{ function_name: 'f', arguments: { value: [1, 2] } }],
      observation: { results: [{ content: '{"ok":true}' }] },
      extra: { turn: 2 },
    });
  });
});

describe('TrajectoryLog', () => {
  it('records a reset and calls as the transcript does, and builds from them', () => {
    const log = new TrajectoryLog(() => new Date(at));
    log.reset({ messages: [{ role: 'user', content: 'Go.' }], tools: [{ name: 'bash' }] });
    log.call({ step: 1, turn: 1, tool: 'bash', arguments: { command: 'ls' }, observation: { result: 'a\n' } });
    log.call({ step: 2, turn: 1, tool: 'bash', arguments: undefined, observation: { error: 'boom' } });
    const t = log.build({ id: 'ep' });
    expect(t.steps.map((s) => [s.source, s.message, s.tool_calls?.[0]?.arguments, s.observation?.results[0]?.content])).toEqual([
      ['user', 'Go.', undefined, undefined],
      ['agent', '', { command: 'ls' }, 'a\n'],
      ['agent', '', {}, 'boom'],
    ]);
  });

  it('a payload past the transcript bound is kept as its mark, not whole', () => {
    const log = new TrajectoryLog(() => new Date(at));
    const huge = 'x'.repeat(2_000_000);
    log.call({ step: 1, turn: 1, tool: 'bash', arguments: { command: 'yes' }, observation: { result: huge } });
    const content = log.build({ id: 'ep' }).steps[0]!.observation!.results[0]!.content;
    expect(content.length).toBeLessThan(100_000);
    expect(JSON.parse(content)).toMatchObject({ truncated: true, original_bytes: huge.length + 2 });
  });

  it("past the transcript's total bound, every later payload is a mark with no head", () => {
    const log = new TrajectoryLog(() => new Date(at));
    const chunk = 'y'.repeat(200 * 1024);
    for (let i = 1; i <= 45; i++) log.call({ step: i, turn: 1, tool: 'bash', arguments: { command: 'cat big' }, observation: { result: chunk } });
    const contents = log.build({ id: 'ep' }).steps.map((s) => s.observation!.results[0]!.content);
    expect(contents[0]).toBe(chunk);
    const last = JSON.parse(contents[44]!) as { truncated: boolean; head: string; original_bytes: number };
    expect(last).toEqual({ truncated: true, original_bytes: chunk.length + 2, head: '' });
    expect(contents.filter((c) => c === chunk).length).toBeGreaterThanOrEqual(40);
  });
});
