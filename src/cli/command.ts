/**
 * The shape every `openenv-bundle` subcommand has: a name, a one-line summary for the command
 * list, its own `--help` text, and a `run` that resolves with the exit code. Exit codes are the
 * same for every subcommand: 0 done and nothing wrong, 1 problems found (or the work failed), 2 a
 * command line to fix.
 */
export const EXIT = { ok: 0, problems: 1, usage: 2 } as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** Where a subcommand reads and writes: the process's streams in use, buffers in tests. */
export interface CliIo {
  stdout: { isTTY?: boolean; write(s: string): unknown };
  stderr: { isTTY?: boolean; write(s: string): unknown };
  env: NodeJS.ProcessEnv;
}

export interface Subcommand {
  /** the word after `openenv-bundle` */
  name: string;
  /** one line for `openenv-bundle --help` */
  summary: string;
  /** the full text `openenv-bundle NAME --help` prints */
  usage: string;
  /** runs with the arguments after NAME; resolves with the exit code */
  run(argv: string[], io: CliIo): Promise<number>;
}

/** Thrown by a subcommand's argument parser for a command line the user must fix (exit 2). */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** The process's own streams and environment. */
export function processIo(): CliIo {
  return { stdout: process.stdout, stderr: process.stderr, env: process.env };
}
