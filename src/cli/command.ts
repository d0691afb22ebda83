/**
 * The shape every command has: a name, a one-line summary for the command list, its arguments
 * and options declared once (src/cli/options.ts), and a `run` that gets them parsed and resolves
 * with the exit code. Exit codes are the same for every command: 0 done and nothing wrong, 1
 * problems found (or the work failed), 2 a command line to fix. Every command runs through
 * runCommand, under `openenv-bundle NAME` or a name of its own (`node dist/serve.js`): it prints
 * --help, and catches usage errors and failures once for all of them, never a command itself.
 */
import type { OptionSpec, OptionTable } from '../config.js';
import { optionLines, parseCommandLine, UsageError, type CommandLine, type Parsed, type PositionalTable } from './options.js';
import { runAsProcess } from './process-entry.js';
import { visible } from './terminal-text.js';

export const EXIT = { ok: 0, problems: 1, usage: 2 } as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** Where a command reads and writes: the process's streams in use, buffers in tests. */
export interface CliIo {
  stdout: { isTTY?: boolean; write(s: string): unknown };
  stderr: { isTTY?: boolean; write(s: string): unknown };
  stdin?: NodeJS.ReadableStream & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
  /** stops the command as Ctrl-C does (tests); commands that stop on SIGINT listen to both */
  signal?: AbortSignal;
}

export interface Subcommand {
  /** the word after `openenv-bundle` */
  name: string;
  /** one line for `openenv-bundle --help` */
  summary: string;
  /** its positional arguments' names (`DIR`) and its options, as declared (the docs test reads them: test/docs-reference.test.ts) */
  positionals: readonly string[];
  options: OptionTable;
  /** the environment variables an option is read from */
  envOf(name: string, o: OptionSpec): readonly string[];
  /** the full --help text, under the name it was run as (`openenv-bundle rows`, `node dist/rows.js`) */
  usage(prog: string): string;
  /** parses argv, then runs; resolves with the exit code; a command line to fix throws UsageError */
  run(argv: string[], io: CliIo, prog: string): Promise<number>;
}

export interface CommandSpec<P extends PositionalTable, O extends OptionTable> extends CommandLine<P, O> {
  name: string;
  summary: string;
  /** the usage line after the command's name: `DIR [options]` */
  synopsis: string;
  /** what the command does, as --help says it */
  about: readonly string[];
  /** lines after the options (exit codes, examples) */
  footer?: readonly string[];
  envOf?: (name: string, o: OptionSpec) => readonly string[];
  run(args: Parsed<P, O>, io: CliIo, prog: string): Promise<number>;
}

const declaredEnv = (_name: string, o: OptionSpec): readonly string[] => o.env ?? [];

/** A command as defineCommand makes it: a Subcommand, and its parser on its own (tests). */
export interface Command<P extends PositionalTable, O extends OptionTable> extends Subcommand {
  parse(argv: string[], env?: NodeJS.ProcessEnv): Parsed<P, O>;
}

export function defineCommand<P extends PositionalTable, O extends OptionTable>(spec: CommandSpec<P, O>): Command<P, O> {
  const envOf = spec.envOf ?? declaredEnv;
  return {
    name: spec.name,
    parse: (argv, env = {}) => parseCommandLine(argv, spec, env, envOf),
    summary: spec.summary,
    positionals: Object.values(spec.positionals).map((p) => p.name),
    options: spec.options,
    envOf,
    usage: (prog) =>
      [
        `Usage: ${prog} ${spec.synopsis}`,
        '',
        ...spec.about,
        '',
        'Options:',
        ...optionLines(spec.options, envOf),
        ...(spec.footer ? ['', ...spec.footer] : []),
      ].join('\n'),
    run: (argv, io, prog) => spec.run(parseCommandLine(argv, spec, io.env, envOf), io, prog),
  };
}

/** The process's own streams and environment. */
export function processIo(): CliIo {
  return { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env };
}

/**
 * Stops on Ctrl-C (SIGINT, and SIGTERM) and on `io.signal`: `onStop` runs once, the first time;
 * the returned `signal` is aborted then. `dispose()` stops listening.
 */
export function stopOnInterrupt(io: CliIo, onStop: (second: boolean) => void = () => undefined): { signal: AbortSignal; dispose(): void } {
  const stop = new AbortController();
  const onSignal = () => {
    const second = stop.signal.aborted;
    if (!second) stop.abort(new Error('interrupted'));
    onStop(second);
  };
  const onOuter = () => onSignal();
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  io.signal?.addEventListener('abort', onOuter, { once: true });
  return {
    signal: stop.signal,
    dispose() {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      io.signal?.removeEventListener('abort', onOuter);
    },
  };
}

/** JavaScript's own error types: a bug, printed with its stack so it can be reported. */
const BUG = new Set(['TypeError', 'RangeError', 'ReferenceError', 'SyntaxError']);

/** each of a usage error's lines is a mistake of its own */
const errorLines = (message: string) =>
  message
    .split('\n')
    .map((l) => `error: ${l}`)
    .join('\n');

/**
 * Runs one command as `prog` (the name its messages and --help use); resolves with the exit code.
 * A UsageError is a command line to fix (exit 2); any other failure is printed as what it says
 * (exit 1), with the stack when it is a bug.
 */
export async function runCommand(sub: Subcommand, argv: string[], io: CliIo, prog: string): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    io.stdout.write(`${sub.usage(prog)}\n`);
    return EXIT.ok;
  }
  try {
    return await sub.run(argv, io, prog);
  } catch (e) {
    if (e instanceof UsageError) {
      io.stderr.write(`${visible(errorLines(e.message))}\nRun '${prog} --help' for its arguments and options.\n`);
      return EXIT.usage;
    }
    const err = e instanceof Error ? e : new Error(String(e));
    io.stderr.write(`error: ${visible(BUG.has(err.name) && err.stack ? err.stack : err.message)}\n`);
    return EXIT.problems;
  }
}

/** One command as the process, under a name of its own: the body of an entry shim (src/serve.ts, src/rows.ts). */
export function runCommandAsProcess(sub: Subcommand, prog: string): void {
  runAsProcess(() => runCommand(sub, process.argv.slice(2), processIo(), prog));
}
