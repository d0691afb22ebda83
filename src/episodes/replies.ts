/**
 * What an episode's steps answer about its turns and its end, built from its state alone (pure):
 * the ending (scored, failed or closed) and a call's reply that carries it, the next turn's
 * prompt, the notice that a turn's time budget ended the turn a call was made in, and what is
 * wrong with a call's arguments. The reset reply, a tool's result and a tool error: outcomes.ts.
 */
import { MAX_ARGUMENT_DEPTH } from '../defaults.js';
import { toolErrorType } from '../failures.js';
import { jsonDepthExceeds } from '../util/json.js';
import type { HarnessProgress } from '../protocol/harness.js';
import type { CallObservation, EndReason, Ending, Failure, StepOutcome, Timings } from '../protocol/observations.js';
import { seconds3 } from '../util/time.js';
import type { Scores } from './reward.js';
import { textResult } from './outcomes.js';

/** the reply of a step that ended the episode, or found it ended */
export type EndedOutcome = StepOutcome<CallObservation | Ending>;

/** what an ending says of the episode */
export interface EndState {
  reward: number | null;
  endReason: EndReason | null;
  failure: Failure | null;
  scores: Scores | null;
  timings: Timings;
  /** a harness episode's harness, as far as it got */
  harness?: HarnessProgress;
}

/** The ending; with a tool's name, the reply to that call (its error says why the episode ended). */
export function endedOutcome(s: EndState, toolName: string | null): EndedOutcome {
  const ending: Ending = { done: true, reward: s.reward, end_reason: s.endReason ?? 'closed', timings: s.timings };
  if (s.failure) ending.failure = s.failure;
  if (s.scores) ending.scores = s.scores;
  if (s.harness) ending.harness = s.harness;
  const observation = toolName
    ? {
        tool_name: toolName,
        result: null,
        error: { error_type: toolErrorType(s.failure), message: s.failure?.message ?? 'the episode ended' },
        ...ending,
      }
    : ending;
  return { observation, reward: s.reward, done: true };
}

/** The ending of a scored episode. */
export function scoredOutcome(reward: number, scores: Scores, reason: EndReason, timings: Timings): EndedOutcome {
  return { observation: { done: true, reward, scores, end_reason: reason, timings }, reward, done: true };
}

/** A call's own reply with the episode's ending added (the call was its last step). */
export function withEnding(outcome: StepOutcome<CallObservation | Ending>, ended: EndedOutcome): EndedOutcome {
  return { observation: { ...outcome.observation, ...ended.observation }, reward: ended.reward, done: true };
}

/** The next turn's prompt, as the reply to the call that ended the turn before it. */
export function nextTurnOutcome(toolName: string, turn: number, prompt: string): StepOutcome<CallObservation> {
  return {
    observation: { tool_name: toolName, result: textResult(prompt, { turn, prompt }), error: null, turn },
    reward: null,
    done: false,
  };
}

/** The reply to a call made after a turn's time budget ended its turn: the call is not run; the new turn's prompt is the answer. */
export function turnNoticeOutcome(toolName: string, turn: number, prompt: string): StepOutcome<CallObservation> {
  const text = `[turn ${turn - 1}'s time budget passed: the turn ended and this call was not run]\n${prompt}`;
  return {
    observation: { tool_name: toolName, result: textResult(text, { turn, prompt, budget_passed: true }), error: null, turn },
    reward: null,
    done: false,
  };
}

/** What is wrong with a call's arguments (not a JSON object, nested too deep), or null. */
export function argumentsProblem(args: unknown): string | null {
  if (typeof args !== 'object' || args === null || Array.isArray(args)) {
    const got = args === null ? 'null' : Array.isArray(args) ? 'an array' : `a ${typeof args}`;
    return `arguments must be a JSON object of the tool's parameters, got ${got}${typeof args === 'string' ? ' (pass the object itself, not a JSON string of it)' : ''}`;
  }
  if (jsonDepthExceeds(args, MAX_ARGUMENT_DEPTH)) return `arguments are nested deeper than ${MAX_ARGUMENT_DEPTH} levels; no tool takes that`;
  return null;
}

/** the moments of an episode's life, in its clock */
export interface LifeMarks {
  queued?: number;
  running?: number;
  ended?: number;
}

/**
 * Its timings: queued (from its creation), deploying, running, each to `now` while it lasts. With
 * a warm pool (`pooled` not undefined): whether its env came from it, and how long it waited there.
 * When the reset waited for its env's image (`imageWaitedMs` not null): that wait, within queued.
 */
export function timingsOf(createdAt: number, t: LifeMarks, now: number, pooled?: { waitedMs: number } | null, imageWaitedMs: number | null = null): Timings {
  const s = (a?: number, b?: number) => (a === undefined ? 0 : seconds3((b ?? now) - a));
  const timings: Timings = { queued_s: s(createdAt, t.queued), deploy_s: s(t.queued, t.running ?? t.ended), running_s: s(t.running, t.ended) };
  if (pooled !== undefined) {
    timings.pooled = pooled !== null;
    if (pooled) timings.pool_wait_s = seconds3(pooled.waitedMs);
  }
  if (imageWaitedMs !== null) timings.image_wait_s = seconds3(imageWaitedMs);
  return timings;
}
