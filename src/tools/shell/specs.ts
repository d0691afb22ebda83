/**
 * The built-in shell toolset as models and clients see it: its tools' names, descriptions and
 * argument schemas (clients and tests rely on these names), and the system prompt that says how
 * the tools work. Pure data: the bundle's loader serves it without touching Docker.
 */
import { SHELL_TOOLS } from '../../defaults.js';

/** The name a toolset's `builtin` list gives this toolset in bundle.json. */
export const SHELL_BUILTIN = 'shell';

export const BASH_TOOL = 'bash';
export const READ_FILE_TOOL = 'read_file';
export const WRITE_FILE_TOOL = 'write_file';

const KIB = (n: number) => `${n / 1024} KiB`;

export const SHELL_TOOL_SPECS = [
  {
    name: BASH_TOOL,
    description:
      "Run a bash command in the task's container; returns its output (stdout and stderr together) and its exit code. " +
      'One shell lasts the whole episode: the working directory and exported variables carry over from call to call ' +
      '(plain variables, functions and aliases do not: export what you need). There is no terminal and stdin is empty, ' +
      'so use the non-interactive form of programs. ' +
      `Long output keeps its first and last ${KIB(SHELL_TOOLS.outputHeadBytes)}. ` +
      `A command still running after timeout_s seconds (default ${SHELL_TOOLS.defaultTimeoutS}) is killed, with everything it started; ` +
      'processes you start in the background (cmd &) keep running.',
    input_schema: {
      type: 'object',
      properties: {
        command: { type: 'string', minLength: 1, description: 'the command line(s) to run, as you would type them' },
        timeout_s: {
          type: 'number',
          exclusiveMinimum: 0,
          maximum: SHELL_TOOLS.maxTimeoutS,
          description: `seconds before the command is killed (default ${SHELL_TOOLS.defaultTimeoutS}, at most ${SHELL_TOOLS.maxTimeoutS})`,
        },
      },
      required: ['command'],
      additionalProperties: false,
    },
  },
  {
    name: READ_FILE_TOOL,
    description:
      'Read a file of the container, exactly as it is. Text comes back as it is; a file that is not UTF-8 text comes back base64-encoded, said so. ' +
      `At most limit bytes (default ${KIB(SHELL_TOOLS.readDefaultBytes)}) from byte offset; the reply says where to continue. ` +
      "A relative path is relative to the shell's working directory.",
    input_schema: {
      type: 'object',
      properties: {
        path: { type: 'string', minLength: 1, description: 'the file to read' },
        offset: { type: 'integer', minimum: 0, description: 'the first byte to read (default 0)' },
        limit: {
          type: 'integer',
          minimum: 1,
          maximum: SHELL_TOOLS.readMaxBytes,
          description: `how many bytes to read at most (default ${SHELL_TOOLS.readDefaultBytes}, at most ${SHELL_TOOLS.readMaxBytes})`,
        },
      },
      required: ['path'],
      additionalProperties: false,
    },
  },
  {
    name: WRITE_FILE_TOOL,
    description:
      'Write a file of the container: its whole content is replaced by `content`, exactly (UTF-8, no newline added). ' +
      'Missing folders are created; an existing file keeps its permissions. ' +
      `At most ${KIB(SHELL_TOOLS.writeMaxBytes)}. A relative path is relative to the shell's working directory.`,
    input_schema: {
      type: 'object',
      properties: {
        path: { type: 'string', minLength: 1, description: 'the file to write' },
        content: { type: 'string', description: 'the complete new content of the file' },
      },
      required: ['path', 'content'],
      additionalProperties: false,
    },
  },
] as const satisfies readonly { name: string; description: string; input_schema: Record<string, unknown> }[];

export type ShellToolName = (typeof SHELL_TOOL_SPECS)[number]['name'];

export const SHELL_TOOL_NAMES: readonly string[] = SHELL_TOOL_SPECS.map((t) => t.name);

/**
 * What a task's system prompt says of the shell toolset (the Harbor import uses it): the tools,
 * what carries over, and that the work is checked after the last turn by tests the model cannot
 * see.
 */
export const SHELL_SYSTEM_PROMPT = [
  'You are working in a Linux container, through tools:',
  `- ${BASH_TOOL} runs a command in one shell that lasts the whole task: the working directory and exported variables carry over between calls; there is no terminal, so use non-interactive commands;`,
  `- ${READ_FILE_TOOL} reads a file and ${WRITE_FILE_TOOL} writes one, exactly.`,
  'The container has no internet access. When you have finished, call end_turn: your work is then checked by tests you cannot see.',
].join('\n');
