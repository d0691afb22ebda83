/**
 * `node dist/rows.js URL OUT [options]`: the command line of the prompt-row writer.
 */
import { parseArgs } from 'node:util';
import { z } from 'zod';

export const ROWS_USAGE = [
  'Usage: node dist/rows.js URL OUT [options]',
  '',
  "Writes a bundle server's tasks as slime prompt rows: OUT/<split>.jsonl for each split and",
  'OUT/all.jsonl, one row per task ({"messages", "tools", "metadata"}), for',
  '`--input-key messages --metadata-key metadata`. Reads GET /bundle, /tasks and /toolsets;',
  'no env is deployed.',
  '',
  'Options:',
  '  --max-turns N        model turns a rollout may take (default 4)',
  '  --tool-timeout S     seconds a rollout waits for one tool call (default 60)',
  '  --reset-timeout S    seconds a rollout waits for a slot and a deploy (default 600)',
  '  --model-timeout S    seconds a rollout waits for the model (default 600)',
  "  --token-var NAME     the environment variable holding the server's token; the rows record",
  '                       its name, never the token (default: no token)',
  '  --split S            only this split (repeatable); default: every split',
  '  --help               print this help',
].join('\n');

const positiveNumber = (name: string, def: number) =>
  z.coerce
    .number({ invalid_type_error: `--${name} must be a number` })
    .positive(`--${name} must be greater than 0`)
    .finite(`--${name} must be finite`)
    .default(def);

const RowsArgsSchema = z.object({
  url: z
    .string()
    .url('URL must be an http:// or https:// address, e.g. http://127.0.0.1:8200')
    .refine((u) => /^https?:\/\//i.test(u), 'URL must start with http:// or https://')
    .transform((u) => u.replace(/\/+$/, '')),
  out: z.string().min(1, 'OUT must be a folder path'),
  maxTurns: z.coerce.number().int('--max-turns must be an integer').positive('--max-turns must be at least 1').default(4),
  toolTimeout: positiveNumber('tool-timeout', 60),
  resetTimeout: positiveNumber('reset-timeout', 600),
  modelTimeout: positiveNumber('model-timeout', 600),
  tokenVar: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, '--token-var must be an environment variable name such as AGENTENV_TOKEN')
    .nullable()
    .default(null),
  splits: z.array(z.string().min(1)).nullable().default(null),
});

export type RowsArgs = z.output<typeof RowsArgsSchema>;

/** Thrown for a command line the user must fix (exit 2). */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export function parseRowsArgs(argv: string[]): RowsArgs | 'help' {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        'max-turns': { type: 'string' },
        'tool-timeout': { type: 'string' },
        'reset-timeout': { type: 'string' },
        'model-timeout': { type: 'string' },
        'token-var': { type: 'string' },
        split: { type: 'string', multiple: true },
        help: { type: 'boolean' },
      },
    });
  } catch (e) {
    throw new UsageError(`${(e as Error).message}; run with --help for the options`);
  }
  const v = parsed.values;
  if (v.help) return 'help';
  if (parsed.positionals.length !== 2) {
    throw new UsageError(`expected URL and OUT, got ${parsed.positionals.length} argument(s): node dist/rows.js URL OUT [options]`);
  }
  const r = RowsArgsSchema.safeParse({
    url: parsed.positionals[0],
    out: parsed.positionals[1],
    maxTurns: v['max-turns'],
    toolTimeout: v['tool-timeout'],
    resetTimeout: v['reset-timeout'],
    modelTimeout: v['model-timeout'],
    tokenVar: v['token-var'] ?? null,
    splits: v.split ?? null,
  });
  if (!r.success) throw new UsageError(r.error.issues.map((i) => i.message).join('; '));
  return r.data;
}
