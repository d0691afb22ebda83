/**
 * One slime prompt row per task: the chat messages a rollout starts from, the task's tools as
 * OpenAI function tools, and metadata telling the generate function which episode to play where.
 */
import { END_TURN_TOOL } from '../bundle/index.js';
import type { RolloutSettings } from './args.js';
import type { TaskRow as ServerTaskRow, ToolSpec as ServerToolSpec } from '../protocol/bundle.js';

export interface ServerSettings {
  url: string;
  max_turns: number;
  tool_timeout: number;
  reset_timeout: number;
  model_timeout: number;
  /** the name of the variable holding the token, never the token */
  token_var: string | null;
}

/** The rollout settings of a command line as a row records them. */
export function serverSettings(url: string, r: RolloutSettings): ServerSettings {
  return {
    url,
    max_turns: r.maxTurns,
    tool_timeout: r.toolTimeout,
    reset_timeout: r.resetTimeout,
    model_timeout: r.modelTimeout,
    token_var: r.tokenVar,
  };
}

export interface FunctionTool {
  type: 'function';
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

export interface PromptRow {
  messages: { role: string; content: string }[];
  tools: FunctionTool[];
  metadata: {
    split: string;
    index: number;
    task_id: string;
    toolset: string;
    tools: string[];
    server: ServerSettings;
  };
}

export function functionTool(t: ServerToolSpec): FunctionTool {
  return { type: 'function', function: { name: t.name, description: t.description, parameters: t.input_schema } };
}

/** A toolset's tools with end_turn, which every task offers, last and once. */
export function withEndTurn(tools: readonly ServerToolSpec[]): ServerToolSpec[] {
  if (tools.some((t) => t.name === END_TURN_TOOL.name)) return [...tools];
  return [...tools, END_TURN_TOOL as ServerToolSpec];
}

export function promptRow(task: ServerTaskRow, toolsetTools: readonly ServerToolSpec[], server: ServerSettings): PromptRow {
  const tools = withEndTurn(toolsetTools);
  return {
    // the system prompt and the first user prompt; later turns come from end_turn's results
    messages: task.messages.slice(0, 2).map((m) => ({ role: m.role, content: m.content })),
    tools: tools.map(functionTool),
    metadata: {
      split: task.split,
      index: task.index,
      task_id: task.task_id,
      toolset: task.toolset,
      tools: tools.map((t) => t.name),
      server,
    },
  };
}
