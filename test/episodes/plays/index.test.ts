import { describe, expect, it } from 'vitest';
import { EnvToolsPlay } from '../../../src/episodes/plays/env-tools.js';
import { HarnessRunPlay } from '../../../src/episodes/plays/harness-run.js';
import { choosePlay, playCall } from '../../../src/episodes/plays/index.js';
import { ShellToolsetPlay } from '../../../src/episodes/plays/shell-toolset.js';
import { VerifiedTaskPlay } from '../../../src/episodes/plays/verified-task.js';
import type { CallObservation } from '../../../src/protocol/observations.js';
import { bundle, fakeHost, task } from './host.js';

describe('choosePlay', () => {
  it('the toolset picks env tools or the shell toolset; a verifier wraps it; a harness wraps that', () => {
    expect(choosePlay(fakeHost(task(), bundle()).host)).toBeInstanceOf(EnvToolsPlay);
    expect(choosePlay(fakeHost(task(), bundle()).host)).not.toBeInstanceOf(ShellToolsetPlay);
    expect(choosePlay(fakeHost(task(), bundle({ builtin: true })).host)).toBeInstanceOf(ShellToolsetPlay);
    expect(choosePlay(fakeHost(task({ verifier: { tests: 't' } } as never), bundle()).host)).toBeInstanceOf(VerifiedTaskPlay);
    expect(choosePlay(fakeHost(task({ per_turn: [{ upload: 'u' }] } as never), bundle()).host)).toBeInstanceOf(VerifiedTaskPlay);
    expect(choosePlay(fakeHost(task(), bundle({ harness: { command: 'x' } })).host)).toBeInstanceOf(HarnessRunPlay);
  });
});

describe('playCall', () => {
  const play = () => {
    const seen: unknown[] = [];
    const p = choosePlay(fakeHost(task(), bundle()).host);
    p.call = async (name, args) => (
      seen.push(['call', name, args]),
      { observation: { tool_name: name, result: null, error: null }, reward: null, done: false }
    );
    p.endTurn = async (answer) => (
      seen.push(['end_turn', answer]),
      { observation: { tool_name: 'end_turn', result: null, error: null }, reward: null, done: false }
    );
    return { p, seen };
  };

  it('routes end_turn (with its answer) and a listed tool (no arguments: an empty object)', async () => {
    const { p, seen } = play();
    await playCall(p, 'end_turn', { answer: 42 }, 'main');
    await playCall(p, 'end_turn', { answer: 'yes' }, 'main');
    await playCall(p, 'echo', undefined, 'main');
    expect(seen).toEqual([
      ['end_turn', null],
      ['end_turn', 'yes'],
      ['call', 'echo', {}],
    ]);
  });

  it('refuses bad arguments and an unlisted tool, naming the toolset', async () => {
    const { p, seen } = play();
    expect(((await playCall(p, 'echo', 'text', 'main')).observation as CallObservation).error?.error_type).toBe('invalid_args');
    expect(((await playCall(p, 'nope', {}, 'main')).observation as CallObservation).error).toEqual({
      error_type: 'tool_not_found',
      message: 'no tool "nope" in toolset "main"; tools: echo',
    });
    expect(seen).toEqual([]);
  });
});
