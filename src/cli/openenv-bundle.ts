#!/usr/bin/env node
/**
 * `openenv-bundle <command> [args]`: one command line for serving, authoring and evaluating
 * bundles. `openenv-bundle --help` lists the commands; `openenv-bundle NAME --help` prints one's
 * options. Exit codes: 0 ok, 1 problems found, 2 a command line to fix.
 */
import { EXIT, processIo, runCommand, type CliIo } from './command.js';
import { SUBCOMMANDS } from './commands.js';
import { isEntryPoint, runAsProcess } from './process-entry.js';
import { visible } from './terminal-text.js';

export function overview(): string {
  const width = Math.max(...SUBCOMMANDS.map((c) => c.name.length)) + 2;
  return [
    'Usage: openenv-bundle <command> [arguments]',
    '',
    'Commands:',
    ...SUBCOMMANDS.map((c) => `  ${c.name.padEnd(width)}${c.summary}`),
    '',
    "Run 'openenv-bundle <command> --help' for a command's options.",
    'Exit codes: 0 ok, 1 problems found, 2 a command line to fix.',
  ].join('\n');
}

/** Dispatches argv (without node and the script) to its command; resolves with the exit code. */
export async function cli(argv: string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    const topic = name === 'help' ? rest[0] : undefined;
    const sub = topic === undefined ? undefined : SUBCOMMANDS.find((c) => c.name === topic);
    if (topic !== undefined && !sub) {
      io.stderr.write(`error: unknown command '${visible(topic)}'\n\n${overview()}\n`);
      return EXIT.usage;
    }
    (name === undefined ? io.stderr : io.stdout).write(`${sub ? sub.usage(`openenv-bundle ${sub.name}`) : overview()}\n`);
    return name === undefined ? EXIT.usage : EXIT.ok;
  }
  const sub = SUBCOMMANDS.find((c) => c.name === name);
  if (!sub) {
    io.stderr.write(`error: unknown command '${visible(name)}'\n\n${overview()}\n`);
    return EXIT.usage;
  }
  return runCommand(sub, rest, io, `openenv-bundle ${name}`);
}

if (isEntryPoint(import.meta.url)) runAsProcess(() => cli(process.argv.slice(2), processIo()));
