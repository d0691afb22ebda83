/**
 * `node dist/rows.js URL OUT [options]`: the command line of the prompt-row writer.
 */
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { UsageError } from '../cli/command.js';

/**
 * The options of how a rollout plays an episode, shared by the row writer (which records them in
 * each row for slime's generate function) and `openenv-bundle eval` (which plays that way itself):
 * one spelling, one default, one parser.
 */
export const ROLLOUT_USAGE_LINES = [
  '  --max-turns N        model turns a rollout may take (default 4)',
  '  --tool-timeout S     seconds a rollout waits for one tool call (default 60)',
  '  --reset-timeout S    seconds a rollout waits for a slot and a deploy (default 600)',
  '  --model-timeout S    seconds a rollout waits for the model (default 600)',
  "  --token-var NAME     the environment variable holding the server's token (default: no token);",
];

/** node:util parseArgs options of the rollout settings */
export const ROLLOUT_ARG_OPTIONS = {
  'max-turns': { type: 'string' },
  'tool-timeout': { type: 'string' },
  'reset-timeout': { type: 'string' },
  'model-timeout': { type: 'string' },
  'token-var': { type: 'string' },
} as const;

export const ROWS_USAGE = [
  'Usage: node dist/rows.js URL OUT [options]',
  '',
  "Writes a bundle server's tasks as slime prompt rows: OUT/<split>.jsonl for each split and",
  'OUT/all.jsonl, one row per task ({"messages", "tools", "metadata"}), for',
  '`--input-key messages --metadata-key metadata`. Reads GET /bundle, /tasks and /toolsets;',
  'no env is deployed.',
  '',
  'Options:',
  ...ROLLOUT_USAGE_LINES,
  '                       the rows record its name, never the token',
  '  --split S            only this split (repeatable); default: every split',
  '  --help               print this help',
].join('\n');

export const positiveNumber = (name: string, def: number) =>
  z.coerce
    .number({ invalid_type_error: `--${name} must be a number` })
    .positive(`--${name} must be greater than 0`)
    .finite(`--${name} must be finite`)
    .default(def);

/** An http(s):// address, trailing slashes dropped; `what` names it in the message. */
export const httpUrl = (what: string, example: string) =>
  z
    .string()
    .url(`${what} must be an http:// or https:// address, e.g. ${example}`)
    .refine((u) => /^https?:\/\//i.test(u), `${what} must start with http:// or https://`)
    .transform((u) => u.replace(/\/+$/, ''));

export const envVarName = (flag: string) =>
  z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, `--${flag} must be an environment variable name such as AGENTENV_TOKEN`)
    .nullable()
    .default(null);

/** The rollout settings' fields, for a command's own schema. */
export const ROLLOUT_FIELDS = {
  maxTurns: z.coerce.number().int('--max-turns must be an integer').positive('--max-turns must be at least 1').default(4),
  toolTimeout: positiveNumber('tool-timeout', 60),
  resetTimeout: positiveNumber('reset-timeout', 600),
  modelTimeout: positiveNumber('model-timeout', 600),
  tokenVar: envVarName('token-var'),
};

export type RolloutSettings = z.output<z.ZodObject<typeof ROLLOUT_FIELDS>>;

/** parseArgs' values of ROLLOUT_ARG_OPTIONS → the input of ROLLOUT_FIELDS */
export function rolloutValues(v: Partial<Record<keyof typeof ROLLOUT_ARG_OPTIONS, string>>) {
  return {
    maxTurns: v['max-turns'],
    toolTimeout: v['tool-timeout'],
    resetTimeout: v['reset-timeout'],
    modelTimeout: v['model-timeout'],
    tokenVar: v['token-var'] ?? null,
  };
}

const RowsArgsSchema = z.object({
  url: httpUrl('URL', 'http://127.0.0.1:8200'),
  out: z.string().min(1, 'OUT must be a folder path'),
  ...ROLLOUT_FIELDS,
  splits: z.array(z.string().min(1)).nullable().default(null),
});

export type RowsArgs = z.output<typeof RowsArgsSchema>;

export function parseRowsArgs(argv: string[]): RowsArgs | 'help' {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        ...ROLLOUT_ARG_OPTIONS,
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
    ...rolloutValues(v),
    splits: v.split ?? null,
  });
  if (!r.success) throw new UsageError(r.error.issues.map((i) => i.message).join('; '));
  return r.data;
}
