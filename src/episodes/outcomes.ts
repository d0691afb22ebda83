/**
 * What an episode's steps answer, built in one place: the reset observation (the task's prompt
 * and tools), a tool's result, and a tool error (the model's mistake or the env's refusal; the
 * episode goes on).
 */
import { taskRow, type Task, type ToolSpec } from '../bundle/index.js';
import { isPlainObject } from '../util/json.js';
import type { CallObservation, ResetObservation, StepOutcome, Timings, ToolErrorType, ToolResult } from '../protocol/observations.js';

/** The reply to a reset: the task's prompt as its served row has it (system, first turn), the tools, the turns. */
export function resetObservation(episode: { id: string; task: Task; seed: number | null }, tools: ToolSpec[], timings: Timings): StepOutcome<ResetObservation> {
  const row = taskRow(episode.task);
  return {
    observation: {
      episode_id: episode.id,
      task_id: row.task_id,
      split: row.split,
      index: row.index,
      seed: episode.seed,
      toolset: row.toolset,
      messages: row.messages,
      tools,
      turn: 1,
      turns: row.turns,
      max_turns: row.max_turns,
      timings,
    },
    reward: null,
    done: false,
  };
}

/** A tool's answer as the model reads it: `data` whole, and as structured_content when it is an object. */
export function textResult(text: string, data: unknown, isError = false): ToolResult {
  return {
    content: [{ type: 'text', text }],
    structured_content: isPlainObject(data) ? data : null,
    data,
    is_error: isError,
  };
}

/** A call that went wrong around the tool (bad arguments, an unknown tool, the env's refusal): the episode goes on. */
export function toolError(toolName: string, errorType: ToolErrorType, message: string): StepOutcome<CallObservation> {
  return { observation: { tool_name: toolName, result: null, error: { error_type: errorType, message } }, reward: null, done: false };
}
