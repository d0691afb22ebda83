/**
 * The flags of the authoring subcommands (init, check, pack), each declared once: the parser
 * and the `--help` lines come from the same table.
 */
import { parseArgs } from 'node:util';
import { UsageError } from './command.js';

export interface Flag {
  name: string;
  /** the value's placeholder (`N`, `DIR`); absent for a switch */
  value?: string;
  short?: string;
  multiple?: boolean;
  /** what `--help` says; ends with the default when there is one */
  help: string;
}

export const HELP_FLAG: Flag = { name: 'help', short: 'h', help: 'print this help' };

/** `  --tasks N            tasks played per split and toolset (default 3)` */
export function flagLines(flags: readonly Flag[]): string[] {
  const label = (f: Flag) => `--${f.name}${f.short ? `, -${f.short}` : ''}${f.value ? ` ${f.value}` : ''}`;
  const width = Math.max(...flags.map((f) => label(f).length)) + 2;
  return flags.map((f) => `  ${label(f).padEnd(width)}${f.help}`);
}

export interface Parsed {
  positionals: string[];
  values: Record<string, string | boolean | string[] | undefined>;
}

/** Parses argv against `flags`; a mistake is a UsageError naming the flag. */
export function parseFlags(argv: string[], flags: readonly Flag[], positionals: { min: number; max: number; names: string }): Parsed {
  const options = Object.fromEntries(
    flags.map((f) => [
      f.name,
      { type: f.value ? ('string' as const) : ('boolean' as const), ...(f.short ? { short: f.short } : {}), ...(f.multiple ? { multiple: true } : {}) },
    ]),
  );
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (e) {
    throw new UsageError((e as Error).message.replace(/\. To specify a positional argument.*$/s, ''));
  }
  if (parsed.positionals.length < positionals.min) throw new UsageError(`missing ${positionals.names}`);
  if (parsed.positionals.length > positionals.max) throw new UsageError(`unexpected argument ${JSON.stringify(parsed.positionals[positionals.max])}`);
  return { positionals: parsed.positionals, values: parsed.values as Parsed['values'] };
}
