import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { SHELL_TOOLS } from '../../../src/defaults.js';
import { argumentsProblem, BASH_ARGS, READ_FILE_ARGS, SHELL_TOOL_SPECS, WRITE_FILE_ARGS } from '../../../src/tools/shell/specs.js';
import { ShellToolset } from '../../../src/tools/shell/toolset.js';
import type { ContainerExec } from '../../../src/sandbox/container-exec.js';

/** the JSON Schemas tools/list advertised when they were written by hand: the generated ones must not differ */
const ADVERTISED: Record<string, unknown> = {
  bash: {
    type: 'object',
    properties: {
      command: {
        type: 'string',
        minLength: 1,
        description: 'the command line(s) to run, as you would type them',
      },
      timeout_s: {
        type: 'number',
        exclusiveMinimum: 0,
        maximum: 3600,
        description: 'seconds before the command is killed (default 120, at most 3600)',
      },
    },
    required: ['command'],
    additionalProperties: false,
  },
  read_file: {
    type: 'object',
    properties: {
      path: {
        type: 'string',
        minLength: 1,
        description: 'the file to read',
      },
      offset: {
        type: 'integer',
        minimum: 0,
        description: 'the first byte to read (default 0)',
      },
      limit: {
        type: 'integer',
        minimum: 1,
        maximum: 1048576,
        description: 'how many bytes to read at most (default 65536, at most 1048576)',
      },
    },
    required: ['path'],
    additionalProperties: false,
  },
  write_file: {
    type: 'object',
    properties: {
      path: {
        type: 'string',
        minLength: 1,
        description: 'the file to write',
      },
      content: {
        type: 'string',
        description: 'the complete new content of the file',
      },
    },
    required: ['path', 'content'],
    additionalProperties: false,
  },
};

const problem = (schema: z.ZodTypeAny, args: unknown): string | null => {
  const r = schema.safeParse(args);
  return r.success ? null : argumentsProblem(r.error);
};

describe("the shell tools' arguments, declared once as zod schemas", () => {
  it('advertise the same JSON Schema as before, key for key and in the same order', () => {
    for (const t of SHELL_TOOL_SPECS) expect(JSON.stringify(t.input_schema)).toBe(JSON.stringify(ADVERTISED[t.name]));
    expect(SHELL_TOOL_SPECS.map((t) => t.name)).toEqual(Object.keys(ADVERTISED));
  });

  it('take good arguments, absent and null optional ones meaning their default', () => {
    expect(BASH_ARGS.parse({ command: 'ls' })).toEqual({ command: 'ls' });
    expect(BASH_ARGS.parse({ command: 'ls', timeout_s: null })).toEqual({ command: 'ls' });
    expect(BASH_ARGS.parse({ command: 'ls', timeout_s: 2.5 })).toEqual({ command: 'ls', timeout_s: 2.5 });
    expect(READ_FILE_ARGS.parse({ path: 'a', offset: null, limit: 10 })).toEqual({ path: 'a', limit: 10 });
    expect(WRITE_FILE_ARGS.parse({ path: 'a', content: '' })).toEqual({ path: 'a', content: '' });
  });

  it("say a bash call's mistakes as the model has always read them", () => {
    const max = SHELL_TOOLS.maxTimeoutS;
    expect(problem(BASH_ARGS, { command: 'ls', cwd: '/' })).toBe('unknown argument "cwd"; the arguments are command, timeout_s');
    expect(problem(BASH_ARGS, { command: '', cwd: '/', env: {} })).toBe('unknown arguments "cwd", "env"; the arguments are command, timeout_s');
    for (const command of [undefined, '', '  \n', 3, null]) {
      expect(problem(BASH_ARGS, { command })).toBe('"command" must be a non-empty string: the command line to run');
    }
    expect(problem(BASH_ARGS, { command: 'a\0b' })).toBe('"command" holds a NUL byte, which no shell command can');
    expect(problem(BASH_ARGS, { command: 'x'.repeat(SHELL_TOOLS.maxCommandBytes + 1) })).toBe(
      `"command" is longer than ${SHELL_TOOLS.maxCommandBytes} bytes; write long content with write_file`,
    );
    expect(problem(BASH_ARGS, { command: 'x'.repeat(SHELL_TOOLS.maxCommandBytes) })).toBeNull();
    for (const [t, got] of [
      [0, '0'],
      [-1, '-1'],
      [max + 1, String(max + 1)],
      ['5', '"5"'],
      [true, 'true'],
    ] as const) {
      expect(problem(BASH_ARGS, { command: 'ls', timeout_s: t })).toBe(`"timeout_s" must be a number of seconds above 0 and at most ${max}, got ${got}`);
    }
    expect(problem(BASH_ARGS, { command: 'ls', timeout_s: max })).toBeNull();
    // the first argument's problem, in the order the tool declares them
    expect(problem(BASH_ARGS, { command: '', timeout_s: 0 })).toBe('"command" must be a non-empty string: the command line to run');
  });

  it("say read_file's and write_file's mistakes as the model has always read them", () => {
    for (const path of [undefined, '', 'a\0b', 7]) {
      expect(problem(READ_FILE_ARGS, { path })).toBe('"path" must be a non-empty string: the file to read');
      expect(problem(WRITE_FILE_ARGS, { path, content: 'x' })).toBe('"path" must be a non-empty string: the file to write');
    }
    expect(problem(READ_FILE_ARGS, { path: 'a', offset: -1 })).toBe('"offset" must be a whole number ≥ 0, got -1');
    expect(problem(READ_FILE_ARGS, { path: 'a', offset: 1.5 })).toBe('"offset" must be a whole number ≥ 0, got 1.5');
    for (const [limit, got] of [
      [0, '0'],
      [SHELL_TOOLS.readMaxBytes + 1, String(SHELL_TOOLS.readMaxBytes + 1)],
      ['1', '"1"'],
    ] as const) {
      expect(problem(READ_FILE_ARGS, { path: 'a', limit })).toBe(`"limit" must be a whole number from 1 to ${SHELL_TOOLS.readMaxBytes}, got ${got}`);
    }
    expect(problem(READ_FILE_ARGS, { path: 'a', whence: 0 })).toBe('unknown argument "whence"; the arguments are path, offset, limit');
    expect(problem(WRITE_FILE_ARGS, { path: 'a' })).toBe('"content" must be a string: the complete new content of the file');
    const big = 'é'.repeat(SHELL_TOOLS.writeMaxBytes / 2 + 1);
    expect(problem(WRITE_FILE_ARGS, { path: 'a', content: big })).toBe(
      `"content" is ${Buffer.byteLength(big)} bytes, more than the ${SHELL_TOOLS.writeMaxBytes} write_file takes`,
    );
    expect(problem(WRITE_FILE_ARGS, { path: 'a', content: 'x', mode: 420 })).toBe('unknown argument "mode"; the arguments are path, content');
  });

  it('answer a call with bad arguments as invalid_args before anything reaches the container', async () => {
    const untouched = new Proxy(
      {},
      {
        get: () => {
          throw new Error('the container was reached');
        },
      },
    ) as ContainerExec;
    const shell = new ShellToolset(untouched);
    expect(await shell.call('bash', { command: 'ls', cwd: '/' })).toEqual({
      kind: 'invalid_args',
      message: 'unknown argument "cwd"; the arguments are command, timeout_s',
    });
    expect(await shell.call('read_file', { path: '' })).toEqual({ kind: 'invalid_args', message: '"path" must be a non-empty string: the file to read' });
    expect(await shell.call('write_file', { path: 'x' })).toEqual({
      kind: 'invalid_args',
      message: '"content" must be a string: the complete new content of the file',
    });
  });
});
