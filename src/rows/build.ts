/**
 * One slime prompt row per task: the chat messages a rollout starts from, the task's tools as
 * OpenAI function tools, and metadata telling the generate function which episode to play where,
 * with the task's groups (for per-group logging) and its tools' definitions under `tools`, where
 * slime's loader looks for them (its --tool-key default).
 */
import { END_TURN_TOOL } from '../bundle/index.js';
import type { TaskRow as ServerTaskRow, ToolSpec as ServerToolSpec } from '../protocol/bundle.js';
import { WAIT_TOOL } from '../protocol/harness.js';

/**
 * How a rollout plays an episode, shared by the row writer (which records it in each row for
 * slime's generate function) and `openenv-bundle eval` (which plays that way itself).
 */
export interface RolloutSettings {
  /** model replies a rollout may ask for (each a chat completion); not a task's max_turns, which bounds its prompts */
  maxTurns: number;
  /** seconds */
  toolTimeout: number;
  resetTimeout: number;
  modelTimeout: number;
  /** the name of the environment variable holding the server's token */
  tokenVar: string | null;
}

export interface ServerSettings {
  url: string;
  /** model replies a rollout may ask for (--max-turns), under the name slime's generate function reads */
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

/** A tool's definition as a chat template takes it: its name, description and arguments' JSON Schema. */
export interface ToolDefinition {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

export interface FunctionTool {
  type: 'function';
  function: ToolDefinition;
}

export interface PromptRow {
  messages: { role: string; content: string }[];
  tools: FunctionTool[];
  metadata: {
    split: string;
    index: number;
    task_id: string;
    toolset: string;
    /** group name → this task's value (GET /tasks' `groups`; {} when the bundle declares none) */
    groups: Record<string, string>;
    /** the tools' definitions (those of `tools`, unwrapped), under the key slime's loader reads them from */
    tools: ToolDefinition[];
    /**
     * a harness episode (docs/gateway.md): the server runs the task's harness, which calls the
     * model through the gateway; the client only waits (tool `wait`). Absent: an ordinary task
     */
    harness?: true;
    server: ServerSettings;
  };
}

export function toolDefinition(t: ServerToolSpec): ToolDefinition {
  return { name: t.name, description: t.description, parameters: t.input_schema };
}

export function functionTool(t: ServerToolSpec): FunctionTool {
  return { type: 'function', function: toolDefinition(t) };
}

/** A toolset's tools with end_turn, which every task offers, last and once. */
export function withEndTurn(tools: readonly ServerToolSpec[]): ServerToolSpec[] {
  if (tools.some((t) => t.name === END_TURN_TOOL.name)) return [...tools];
  return [...tools, END_TURN_TOOL as ServerToolSpec];
}

/**
 * A task's row. A harness task's row is what its episode offers: the instruction its harness gets
 * (the first turn's user message, without the bundle's system prompt, which the harness never
 * sees: it brings its own) and the one tool `wait`, with `harness: true`.
 */
export function promptRow(task: ServerTaskRow, toolsetTools: readonly ServerToolSpec[], server: ServerSettings): PromptRow {
  const tools = task.harness ? [WAIT_TOOL] : withEndTurn(toolsetTools);
  return {
    // the system prompt and the first user prompt; later turns come from end_turn's results
    messages: (task.harness ? task.messages.slice(1, 2) : task.messages.slice(0, 2)).map((m) => ({ role: m.role, content: m.content })),
    tools: tools.map(functionTool),
    metadata: {
      split: task.split,
      index: task.index,
      task_id: task.task_id,
      toolset: task.toolset,
      groups: task.groups,
      tools: tools.map(toolDefinition),
      ...(task.harness ? { harness: true as const } : {}),
      server,
    },
  };
}
