import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Task } from '../../src/bundle/index.js';
import { budgetDue, TurnClock } from '../../src/episodes/turn-clock.js';

const task = (over: Partial<Task>) => ({ task_id: 't', turns: ['one', 'two', 'three'], ...over }) as Task;

describe('budgetDue', () => {
  it('none without a task or turn budget', () => {
    expect(budgetDue(task({}), 1, 0, 0, 0)).toBeNull();
  });
  it("the task's budget ends the episode; a turn's, the turn (or on the last turn the episode)", () => {
    expect(budgetDue(task({ time_budget_s: 10 }), 1, 0, 0, 4000)).toEqual({ inMs: 6000, how: 'episode_end' });
    const perTurn = task({ time_budget_s: 10, per_turn: [{ time_budget_s: 3 }, {}, { time_budget_s: 1 }] } as Partial<Task>);
    expect(budgetDue(perTurn, 1, 0, 0, 1000)).toEqual({ inMs: 2000, how: 'end_turn' });
    expect(budgetDue(perTurn, 2, 0, 3000, 4000)).toEqual({ inMs: 6000, how: 'episode_end' });
    expect(budgetDue(perTurn, 3, 0, 5000, 5000)).toEqual({ inMs: 1000, how: 'episode_end' });
  });
  it('a budget already passed is due at once', () => {
    expect(budgetDue(task({ time_budget_s: 1 }), 1, 0, 0, 5000)).toEqual({ inMs: 0, how: 'episode_end' });
  });
});

describe('TurnClock', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  it('fires its budget from the start, and from each new turn; stop() silences it', async () => {
    const passed: string[] = [];
    const t = task({ per_turn: [{ time_budget_s: 2 }, { time_budget_s: 2 }] } as Partial<Task>);
    const clock = new TurnClock(t, Date.now, (how) => passed.push(how));
    clock.start(Date.now(), 1, true);
    await vi.advanceTimersByTimeAsync(1999);
    expect(passed).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(passed).toEqual(['end_turn']);
    clock.newTurn(2);
    await vi.advanceTimersByTimeAsync(1000);
    clock.stop();
    await vi.advanceTimersByTimeAsync(5000);
    expect(passed).toEqual(['end_turn']);
  });

  it('arms nothing when the budgets are not its to keep', async () => {
    const passed: string[] = [];
    const clock = new TurnClock(task({ time_budget_s: 1 }), Date.now, (how) => passed.push(how));
    clock.start(Date.now(), 1, false);
    await vi.advanceTimersByTimeAsync(5000);
    expect(passed).toEqual([]);
  });

  it("answers the next call once with the new turn's prompt after a budget began it", () => {
    const clock = new TurnClock(task({}), Date.now, () => undefined);
    expect(clock.takeNotice('echo', 2)).toBeNull();
    clock.noteTurnBegan(2);
    expect(clock.takeNotice('echo', 2)?.observation).toMatchObject({
      tool_name: 'echo',
      turn: 2,
      result: { data: { turn: 2, prompt: 'two', budget_passed: true } },
    });
    expect(clock.takeNotice('echo', 2)).toBeNull();
  });
});
