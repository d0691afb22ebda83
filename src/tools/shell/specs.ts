/**
 * The built-in shell toolset as models and clients see it: its tools' names, descriptions and
 * arguments (clients and tests rely on these names), and the system prompt that says how the tools
 * work. Each tool's arguments are declared once, as a zod schema: the toolset parses a call's
 * arguments with it (its messages are what the model reads of a mistake), and the JSON Schema that
 * tools/list advertises is generated from it. Pure data: the bundle's loader serves it without
 * touching Docker.
 */
import { z } from 'zod';
import { SHELL_TOOLS } from '../../defaults.js';
import { toJsonSchema } from '../../protocol/json-schema.js';

/** The name a toolset's `builtin` list gives this toolset in bundle.json. */
export const SHELL_BUILTIN = 'shell';

export const BASH_TOOL = 'bash';
export const READ_FILE_TOOL = 'read_file';
export const WRITE_FILE_TOOL = 'write_file';

const KIB = (n: number) => `${n / 1024} KiB`;

/** every issue a schema's own checks raise says `message`, whatever the check (the value shown as `got`) */
const says = (message: (got: string) => string): z.RawCreateParams => ({
  errorMap: (_issue, ctx) => ({ message: message(JSON.stringify(ctx.data)) }),
});

/** an optional argument: absent or null both mean its default (models send null for "none") */
const optional = <T extends z.ZodTypeAny>(schema: T) => z.preprocess((v) => v ?? undefined, schema.optional());

/**
 * A tool's arguments: an object of exactly these keys. A key it does not take is the first thing
 * said (`unknown argument "cwd"; the arguments are command, timeout_s`): see argumentsProblem.
 */
function toolArguments<S extends z.ZodRawShape>(shape: S) {
  const names = Object.keys(shape).join(', ');
  return z.strictObject(shape, {
    errorMap: (issue, ctx) =>
      issue.code === 'unrecognized_keys'
        ? { message: `unknown argument${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}; the arguments are ${names}` }
        : { message: ctx.defaultError },
  });
}

const pathArg = (what: string) => {
  const message = `"path" must be a non-empty string: ${what}`;
  return z
    .string(says(() => message))
    .min(1, message)
    .refine((p) => !p.includes('\0'), message)
    .describe(what);
};

const COMMAND_REQUIRED = '"command" must be a non-empty string: the command line to run';

export const BASH_ARGS = toolArguments({
  command: z
    .string(says(() => COMMAND_REQUIRED))
    .min(1, COMMAND_REQUIRED)
    .refine((c) => c.trim() !== '', COMMAND_REQUIRED)
    .refine((c) => !c.includes('\0'), '"command" holds a NUL byte, which no shell command can')
    .refine(
      (c) => Buffer.byteLength(c) <= SHELL_TOOLS.maxCommandBytes,
      `"command" is longer than ${SHELL_TOOLS.maxCommandBytes} bytes; write long content with write_file`,
    )
    .describe('the command line(s) to run, as you would type them'),
  timeout_s: optional(
    z
      .number(says((got) => `"timeout_s" must be a number of seconds above 0 and at most ${SHELL_TOOLS.maxTimeoutS}, got ${got}`))
      .positive()
      .max(SHELL_TOOLS.maxTimeoutS)
      .describe(`seconds before the command is killed (default ${SHELL_TOOLS.defaultTimeoutS}, at most ${SHELL_TOOLS.maxTimeoutS})`),
  ),
});

export const READ_FILE_ARGS = toolArguments({
  path: pathArg('the file to read'),
  offset: optional(
    z
      .number(says((got) => `"offset" must be a whole number ≥ 0, got ${got}`))
      .int()
      .min(0)
      .describe('the first byte to read (default 0)'),
  ),
  limit: optional(
    z
      .number(says((got) => `"limit" must be a whole number from 1 to ${SHELL_TOOLS.readMaxBytes}, got ${got}`))
      .int()
      .min(1)
      .max(SHELL_TOOLS.readMaxBytes)
      .describe(`how many bytes to read at most (default ${SHELL_TOOLS.readDefaultBytes}, at most ${SHELL_TOOLS.readMaxBytes})`),
  ),
});

export const WRITE_FILE_ARGS = toolArguments({
  path: pathArg('the file to write'),
  content: z
    .string(says(() => '"content" must be a string: the complete new content of the file'))
    .refine(
      (c) => Buffer.byteLength(c, 'utf8') <= SHELL_TOOLS.writeMaxBytes,
      (c) => ({ message: `"content" is ${Buffer.byteLength(c, 'utf8')} bytes, more than the ${SHELL_TOOLS.writeMaxBytes} write_file takes` }),
    )
    .describe('the complete new content of the file'),
});

export type BashArgs = z.output<typeof BASH_ARGS>;
export type ReadFileArgs = z.output<typeof READ_FILE_ARGS>;
export type WriteFileArgs = z.output<typeof WRITE_FILE_ARGS>;

/**
 * What is wrong with a call's arguments, said as the model reads it: a key the tool does not take
 * first, else the first argument's problem (in the order the tool declares them).
 */
export function argumentsProblem(err: z.ZodError): string {
  const issue = err.issues.find((i) => i.code === 'unrecognized_keys') ?? err.issues[0];
  return issue?.message ?? 'the arguments do not match the tool';
}

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
    input_schema: toJsonSchema(BASH_ARGS),
  },
  {
    name: READ_FILE_TOOL,
    description:
      'Read a file of the container, exactly as it is. Text comes back as it is; a file that is not UTF-8 text comes back base64-encoded, said so. ' +
      `At most limit bytes (default ${KIB(SHELL_TOOLS.readDefaultBytes)}) from byte offset; the reply says where to continue. ` +
      "A relative path is relative to the shell's working directory.",
    input_schema: toJsonSchema(READ_FILE_ARGS),
  },
  {
    name: WRITE_FILE_TOOL,
    description:
      'Write a file of the container: its whole content is replaced by `content`, exactly (UTF-8, no newline added). ' +
      'Missing folders are created; an existing file keeps its permissions. ' +
      `At most ${KIB(SHELL_TOOLS.writeMaxBytes)}. A relative path is relative to the shell's working directory.`,
    input_schema: toJsonSchema(WRITE_FILE_ARGS),
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
