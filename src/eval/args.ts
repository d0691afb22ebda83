/**
 * `openenv-bundle eval SERVER_URL --model-url URL --model NAME [options]`: the command line. The
 * rollout settings (--max-turns, --tool-timeout, --reset-timeout, --model-timeout, --token-var)
 * are the row writer's, parsed by its code, so a row and an eval play an episode alike.
 */
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { UsageError } from '../cli/command.js';
import { envVarName, httpUrl, ROLLOUT_ARG_OPTIONS, ROLLOUT_FIELDS, ROLLOUT_USAGE_LINES, rolloutValues } from '../rows/args.js';

export const EVAL_DEFAULTS = { split: 'eval', concurrency: 4 } as const;

export const EVAL_USAGE = [
  'Usage: openenv-bundle eval SERVER_URL --model-url URL --model NAME [options]',
  '',
  "Plays a split of a running bundle server's tasks with a model behind any OpenAI-compatible",
  "chat-completions endpoint (vLLM, SGLang, a hosted API), as slime's rollouts play them: the",
  "task row's messages and tools, each tool call a step over /ws, a reply without a tool call",
  'ending the turn. Writes OUT/episodes.jsonl (one line per episode) and OUT/summary.json, and',
  'prints the mean reward with its standard error, the share of zeros, failures by reason, and',
  'the means per task group. An env failure or a model failure is reported apart, never as 0.',
  '',
  'Options:',
  '  --model-url URL      the endpoint, e.g. http://127.0.0.1:30000/v1 (…/chat/completions is added)',
  '  --model NAME         the model name the endpoint serves',
  `  --split S            the split to play (default ${EVAL_DEFAULTS.split})`,
  '  --tasks N|all        the first N tasks of the split, or all of them (default all)',
  `  --concurrency N      episodes played at once (default ${EVAL_DEFAULTS.concurrency})`,
  "  --temperature T      sampling temperature sent to the model (default: the endpoint's)",
  "  --max-tokens N       most tokens per model reply (default: the endpoint's)",
  '  --chat-template-kwargs JSON',
  '                       sent as chat_template_kwargs (SGLang, vLLM), e.g. \'{"enable_thinking": false}\'',
  "                       as slime's --apply-chat-template-kwargs gives Qwen3 thinking off",
  ...ROLLOUT_USAGE_LINES,
  '                       the token is read from it, never from a flag',
  "  --model-key-var NAME the environment variable holding the endpoint's API key (default: none)",
  '  --out DIR            where to write (default eval-<split>-<UTC time>)',
  '  --help               print this help',
  '',
  'Exit codes: 0 every episode was scored; 1 an episode failed, the run was interrupted (Ctrl-C',
  'writes what finished and tears every episode down) or the server could not be read; 2 a',
  'command line to fix.',
].join('\n');

const EvalArgsSchema = z.object({
  url: httpUrl('SERVER_URL', 'http://127.0.0.1:8200'),
  modelUrl: httpUrl('--model-url', 'http://127.0.0.1:30000/v1'),
  model: z.string({ required_error: '--model is required: the model name the endpoint serves' }).min(1, '--model must not be empty'),
  split: z.string().min(1).default(EVAL_DEFAULTS.split),
  tasks: z
    .union([
      z.literal('all'),
      z.coerce.number({ invalid_type_error: '--tasks must be a number or all' }).int('--tasks must be an integer').positive('--tasks must be at least 1'),
    ])
    .default('all'),
  concurrency: z.coerce.number().int('--concurrency must be an integer').positive('--concurrency must be at least 1').default(EVAL_DEFAULTS.concurrency),
  temperature: z.coerce
    .number({ invalid_type_error: '--temperature must be a number' })
    .min(0, '--temperature must be at least 0')
    .finite()
    .nullable()
    .default(null),
  maxTokens: z.coerce.number().int('--max-tokens must be an integer').positive('--max-tokens must be at least 1').nullable().default(null),
  chatTemplateKwargs: z
    .string()
    .transform((text, ctx) => {
      try {
        const v: unknown = JSON.parse(text);
        if (typeof v === 'object' && v !== null && !Array.isArray(v)) return v as Record<string, unknown>;
      } catch {
        // reported below
      }
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: '--chat-template-kwargs must be a JSON object, e.g. {"enable_thinking": false}' });
      return z.NEVER;
    })
    .nullable()
    .default(null),
  ...ROLLOUT_FIELDS,
  modelKeyVar: envVarName('model-key-var'),
  out: z.string().min(1).nullable().default(null),
});

export type EvalArgs = z.output<typeof EvalArgsSchema>;

export function parseEvalArgs(argv: string[]): EvalArgs | 'help' {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        ...ROLLOUT_ARG_OPTIONS,
        'model-url': { type: 'string' },
        model: { type: 'string' },
        split: { type: 'string' },
        tasks: { type: 'string' },
        concurrency: { type: 'string' },
        temperature: { type: 'string' },
        'max-tokens': { type: 'string' },
        'chat-template-kwargs': { type: 'string' },
        'model-key-var': { type: 'string' },
        out: { type: 'string' },
        help: { type: 'boolean' },
      },
    });
  } catch (e) {
    throw new UsageError(`${(e as Error).message}; run with --help for the options`);
  }
  const v = parsed.values;
  if (v.help) return 'help';
  if (parsed.positionals.length !== 1) {
    throw new UsageError(`expected SERVER_URL, got ${parsed.positionals.length} argument(s): openenv-bundle eval SERVER_URL --model-url URL --model NAME`);
  }
  if (v['model-url'] === undefined) throw new UsageError('--model-url is required: the OpenAI-compatible endpoint, e.g. http://127.0.0.1:30000/v1');
  const r = EvalArgsSchema.safeParse({
    url: parsed.positionals[0],
    modelUrl: v['model-url'],
    model: v.model,
    split: v.split,
    tasks: v.tasks,
    concurrency: v.concurrency,
    temperature: v.temperature ?? null,
    maxTokens: v['max-tokens'] ?? null,
    chatTemplateKwargs: v['chat-template-kwargs'] ?? null,
    ...rolloutValues(v),
    modelKeyVar: v['model-key-var'] ?? null,
    out: v.out ?? null,
  });
  if (!r.success) throw new UsageError(r.error.issues.map((i) => i.message).join('; '));
  return r.data;
}
