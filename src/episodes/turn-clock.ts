/**
 * An episode's turn clock: when its turn began, the timer of the task's or the turn's time budget
 * (whichever passes first), and the notice a call gets after a turn's time budget ended its turn
 * between steps (the call is not run; the new turn's prompt is its answer). The episode
 * (episode.ts) decides what a passed budget ends; when it passes is decided here (budgetDue, pure).
 */
import type { Task } from '../bundle/index.js';
import type { CallObservation, StepOutcome } from '../protocol/observations.js';
import { turnNoticeOutcome } from './replies.js';
import type { TurnEnd } from './verified-task.js';

/** How long until a time budget passes, and what it ends; null when the task and the turn have none. */
export function budgetDue(task: Task, turn: number, runningAt: number, turnStartedAt: number, now: number): { inMs: number; how: TurnEnd } | null {
  const taskBudget = task.time_budget_s;
  const turnBudget = task.per_turn?.[turn - 1]?.time_budget_s;
  const taskLeft = taskBudget === undefined ? Infinity : runningAt + taskBudget * 1000 - now;
  const turnLeft = turnBudget === undefined ? Infinity : turnStartedAt + turnBudget * 1000 - now;
  const left = Math.min(taskLeft, turnLeft);
  if (left === Infinity) return null;
  const how: TurnEnd = taskLeft <= turnLeft || turn === task.turns.length ? 'episode_end' : 'end_turn';
  return { inMs: Math.max(0, left), how };
}

export class TurnClock {
  private timer: NodeJS.Timeout | null = null;
  private runningAt: number | null = null;
  private turnStartedAt = 0;
  /** the prompt of a turn its predecessor's time budget began between steps: the next call's answer */
  private notice: string | null = null;

  constructor(
    private readonly task: Task,
    private readonly now: () => number,
    /** a time budget passed (called from its timer) */
    private readonly onPassed: (how: TurnEnd) => void,
  ) {}

  /** the episode runs from `at` (its first turn begins); `arm`: its budget is the clock's to keep */
  start(at: number, turn: number, arm: boolean): void {
    this.runningAt = at;
    this.turnStartedAt = at;
    if (arm) this.arm(turn);
  }

  /** a new turn begins now: its budget runs from now */
  newTurn(turn: number): void {
    this.turnStartedAt = this.now();
    this.arm(turn);
  }

  /** The task's or the current turn's time budget, whichever passes first, from now on. */
  private arm(turn: number): void {
    this.stop();
    const due = budgetDue(this.task, turn, this.runningAt ?? this.now(), this.turnStartedAt, this.now());
    if (!due) return;
    this.timer = setTimeout(() => this.onPassed(due.how), due.inMs);
    this.timer.unref?.();
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  /** a budget began `turn` between steps: the next call is answered with its prompt */
  noteTurnBegan(turn: number): void {
    this.notice = this.task.turns[turn - 1]!;
  }

  /** the notice for the call `toolName` (made in turn `turn`), once; null when there is none */
  takeNotice(toolName: string, turn: number): StepOutcome<CallObservation> | null {
    const prompt = this.notice;
    if (prompt === null) return null;
    this.notice = null;
    return turnNoticeOutcome(toolName, turn, prompt);
  }
}
