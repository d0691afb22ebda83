/**
 * The one command-line parser. A command declares its positional arguments and its options as
 * OptionSpecs (src/config.ts: type and default as a zod schema, help, spelling); from that one
 * declaration come node:util's parseArgs table, the environment variables read, the validation
 * (zod, every message naming the flag) and the --help lines.
 */
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { kebab, optionShape, shownDefault, type OptionShape, type OptionSpec, type OptionTable } from '../config.js';

/** A command line the user must fix (exit 2): thrown by the parser, and by a command that finds one. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** A positional argument: its placeholder in the usage line and its type. */
export interface PositionalSpec {
  /** `DIR`, `URL` */
  name: string;
  schema: z.ZodTypeAny;
  /** what it is, for "missing DIR (the bundle folder)" */
  help: string;
  /** the last positional only: it takes every argument left, as a list (`SRC...`) */
  variadic?: boolean;
}

export type PositionalTable = Record<string, PositionalSpec>;

export type Parsed<P extends PositionalTable, O extends OptionTable> = z.output<z.ZodObject<OptionShape<P> & OptionShape<O>>>;

export interface CommandLine<P extends PositionalTable, O extends OptionTable> {
  positionals: P;
  options: O;
  /** checks across options (a zod refinement of the whole); issues name their option by path */
  refine?: (args: Parsed<P, O>, ctx: z.RefinementCtx) => void;
}

/** `--max-turns`, `--out, -o` */
function label(name: string, o: OptionSpec): string {
  return `--${kebab(name)}${o.short ? `, -${o.short}` : ''}${o.value ? ` ${o.value}` : ''}`;
}

/** the width --help wraps its option texts to */
const HELP_WIDTH = 100;

/** `text` in lines of at most `width` characters, broken between words */
function wrap(text: string, width: number): string[] {
  const out: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line && line.length + 1 + word.length > width) {
      out.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) out.push(line);
  return out.length ? out : [''];
}

/**
 * The options' --help lines: the flag and what it does (wrapped under itself), then its default
 * (and the environment variables it is read from) on the line below.
 */
export function optionLines(options: OptionTable, envOf: (name: string, o: OptionSpec) => readonly string[] = (_n, o) => o.env ?? []): string[] {
  const entries = Object.entries(options);
  const width = Math.max(...entries.map(([n, o]) => label(n, o).length), '--help, -h'.length) + 3;
  const lines: string[] = [];
  const textWidth = Math.max(40, HELP_WIDTH - 2 - width);
  for (const [name, o] of entries) {
    const env = envOf(name, o);
    const def = o.value || o.shownDefault ? `default: ${shownDefault(o)}` : '';
    const tail = [def, env.length ? `env: ${env.join(', ')}` : ''].filter(Boolean).join('; ');
    const text = [...wrap(o.help, textWidth), ...(tail ? wrap(tail, textWidth) : [])];
    text.forEach((t, i) => lines.push(`  ${(i === 0 ? label(name, o) : '').padEnd(width)}${t}`));
  }
  lines.push(`  ${'--help, -h'.padEnd(width)}print this help`);
  return lines;
}

/** The name a person typed for a key of the parsed object: `--max-turns`, or `DIR`. */
function nameOf(key: string, positionals: PositionalTable): string {
  return Object.hasOwn(positionals, key) ? positionals[key]!.name : `--${kebab(key)}`;
}

function messageOf(issue: z.ZodIssue, line: CommandLine<PositionalTable, OptionTable>): string {
  const key = String(issue.path[0] ?? '');
  if (!key) return issue.message;
  const name = nameOf(key, line.positionals);
  if (issue.code === z.ZodIssueCode.invalid_type && issue.received === 'undefined') {
    const spec = line.options[key] ?? line.positionals[key];
    return `${name} is required${spec ? `: ${spec.help}` : ''}`;
  }
  // a message that names its option already reads as a sentence of its own
  return issue.message.includes(name) ? issue.message : `${name}: ${issue.message}`;
}

/**
 * Parses argv (and `env`, for options that name variables) against the declaration; every
 * mistake is a UsageError whose message names the flag or argument and what is wrong.
 */
export function parseCommandLine<P extends PositionalTable, O extends OptionTable>(
  argv: string[],
  line: CommandLine<P, O>,
  env: NodeJS.ProcessEnv = {},
  envOf: (name: string, o: OptionSpec) => readonly string[] = (_n, o) => o.env ?? [],
): Parsed<P, O> {
  const table = Object.fromEntries(
    Object.entries(line.options).map(([name, o]) => [
      kebab(name),
      { type: o.value ? ('string' as const) : ('boolean' as const), ...(o.short ? { short: o.short } : {}), ...(o.repeatable ? { multiple: true } : {}) },
    ]),
  );
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: table, allowPositionals: true, strict: true });
  } catch (e) {
    throw new UsageError((e as Error).message.replace(/\. To specify a positional argument.*$/s, ''));
  }
  const names = Object.keys(line.positionals);
  const variadic = names.length > 0 && line.positionals[names[names.length - 1]!]!.variadic === true;
  if (!variadic && parsed.positionals.length > names.length) {
    throw new UsageError(`unexpected argument ${JSON.stringify(parsed.positionals[names.length])}`);
  }
  const raw: Record<string, unknown> = {};
  names.forEach((key, i) => {
    if (variadic && i === names.length - 1) {
      if (parsed.positionals.length > i) raw[key] = parsed.positionals.slice(i);
    } else if (i < parsed.positionals.length) raw[key] = parsed.positionals[i];
  });
  for (const [name, o] of Object.entries(line.options)) {
    const fromFlag = (parsed.values as Record<string, unknown>)[kebab(name)];
    if (fromFlag !== undefined) {
      raw[name] = fromFlag;
      continue;
    }
    for (const variable of envOf(name, o)) {
      const v = env[variable];
      if (v === undefined || v === '') continue;
      raw[name] = o.repeatable ? v.split(/\s+/).filter(Boolean) : v;
      break;
    }
  }
  const missing = names.find((key) => raw[key] === undefined && !line.positionals[key]!.schema.isOptional());
  if (missing) throw new UsageError(`missing ${line.positionals[missing]!.name} (${line.positionals[missing]!.help})`);
  let schema: z.ZodTypeAny = z.object({ ...optionShape(line.positionals), ...optionShape(line.options) });
  if (line.refine) schema = schema.superRefine(line.refine as (a: unknown, ctx: z.RefinementCtx) => void);
  const r = schema.safeParse(raw);
  if (!r.success) throw new UsageError(r.error.issues.map((i) => messageOf(i, line as CommandLine<PositionalTable, OptionTable>)).join('\n'));
  return r.data as Parsed<P, O>;
}
