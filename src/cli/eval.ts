/**
 * `openenv-bundle eval SERVER_URL --model-url URL --model NAME [options]`: a split of a running
 * server played by a model behind an OpenAI-compatible endpoint (src/eval/). Ctrl-C (SIGINT) stops
 * the run: the sessions playing are closed, so the server tears their envs down, and what finished
 * is written; a second Ctrl-C leaves at once.
 */
import { z } from 'zod';
import { defaultOut, runEval } from '../eval/run.js';
import { formatSummary } from '../eval/summary.js';
import { defineCommand, EXIT, stopOnInterrupt } from './command.js';
import { exitWith } from './process-entry.js';
import { progressBar } from './progress.js';
import { httpUrl, ROLLOUT_OPTIONS, rolloutSettings, secretFrom, variableName } from './rollout-options.js';
import { visible } from './terminal-text.js';

const DEFAULT_SPLIT = 'eval';

const jsonObject = z.string().transform((text, ctx) => {
  try {
    const v: unknown = JSON.parse(text);
    if (typeof v === 'object' && v !== null && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    // reported below
  }
  ctx.addIssue({ code: z.ZodIssueCode.custom, message: '--chat-template-kwargs must be a JSON object, e.g. {"enable_thinking": false}' });
  return z.NEVER;
});

export const evalCommand = defineCommand({
  name: 'eval',
  summary: "play a running server's split with a model behind an OpenAI-compatible endpoint",
  synopsis: 'SERVER_URL [--model-url URL --model NAME] [options]',
  about: [
    "Plays a split of a running bundle server's tasks with a model behind any OpenAI-compatible",
    "chat-completions endpoint (vLLM, SGLang, a hosted API), as slime's rollouts play them: the",
    "task row's messages and tools, each tool call a step over /ws, a reply without a tool call",
    'ending the turn. Asks the endpoint for its models before anything is deployed. Writes',
    'OUT/episodes.jsonl (one line per episode) and OUT/summary.json, and prints the mean reward',
    'with its standard error and each score beside it, the share of zeros, failures by reason',
    "with each one's first message, and the means per task group. An env failure or a model",
    'failure is reported apart, never as 0. A harness task (its row says harness: true) is played',
    "by the server's harness, whose model is the server's gateway upstream (serve --model-url):",
    'eval only waits and records its model calls and tokens; a split of harness tasks needs no',
    '--model-url or --model.',
  ],
  positionals: {
    url: { name: 'SERVER_URL', schema: httpUrl('SERVER_URL', 'http://127.0.0.1:8200'), help: 'the running bundle server, e.g. http://127.0.0.1:8200' },
  },
  options: {
    modelUrl: {
      schema: httpUrl('--model-url', 'http://127.0.0.1:30000/v1').optional(),
      value: 'URL',
      help: "the OpenAI-compatible endpoint the client plays ordinary tasks with, e.g. http://127.0.0.1:30000/v1 (…/chat/completions is added); required unless every task played is a harness task, whose harness calls the server's gateway upstream (serve --model-url), never this",
      shownDefault: 'none (harness tasks only)',
    },
    model: {
      schema: z.string().min(1).optional(),
      value: 'NAME',
      help: 'the model name the endpoint serves; required with --model-url',
      shownDefault: 'none (harness tasks only)',
    },
    split: { schema: z.string().min(1).default(DEFAULT_SPLIT), value: 'S', help: 'the split to play' },
    tasks: {
      schema: z.union([z.literal('all'), z.coerce.number().int().positive()]).default('all'),
      value: 'N|all',
      help: 'the first N tasks of the split, or all of them',
    },
    concurrency: { schema: z.coerce.number().int().positive().default(4), value: 'N', help: 'episodes played at once' },
    temperature: {
      schema: z.coerce.number().min(0).finite().optional(),
      value: 'T',
      help: 'sampling temperature sent to the model',
      shownDefault: "the endpoint's",
    },
    maxTokens: { schema: z.coerce.number().int().positive().optional(), value: 'N', help: 'most tokens per model reply', shownDefault: "the endpoint's" },
    chatTemplateKwargs: {
      schema: jsonObject.optional(),
      value: 'JSON',
      help: "sent as chat_template_kwargs (SGLang, vLLM), e.g. '{\"enable_thinking\": false}' as slime's --apply-chat-template-kwargs gives Qwen3 thinking off",
    },
    ...ROLLOUT_OPTIONS,
    modelKeyVar: { schema: variableName('model-key-var'), value: 'NAME', help: "the environment variable holding the endpoint's API key" },
    out: { schema: z.string().min(1).optional(), value: 'DIR', help: 'where to write', shownDefault: 'eval-<split>-<UTC time>' },
  },
  refine(a, ctx) {
    if ((a.modelUrl === undefined) !== (a.model === undefined)) {
      const missing = a.modelUrl === undefined ? 'modelUrl' : 'model';
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: [missing],
        message:
          missing === 'model'
            ? '--model is required with --model-url: the model name the endpoint serves'
            : '--model-url and --model go together: give both, or neither for a split of harness tasks',
      });
    }
  },
  footer: [
    'Exit codes: 0 every episode was scored; 1 an episode failed, the run was interrupted (Ctrl-C',
    'writes what finished and tears every episode down), or the server or the model endpoint could',
    'not be used; 2 a command line to fix.',
  ],
  async run(a, io) {
    const secrets = { token: secretFrom(a.tokenVar, io.env, 'token-var'), apiKey: secretFrom(a.modelKeyVar, io.env, 'model-key-var') };
    const stop = stopOnInterrupt(io, (second) => {
      if (second) exitWith(130);
      io.stderr.write('\ninterrupted: closing the episodes in play and writing what finished (Ctrl-C again to leave at once)\n');
    });
    const bar = progressBar(io.stderr);
    try {
      const r = await runEval(
        {
          url: a.url,
          modelUrl: a.modelUrl ?? null,
          model: a.model ?? null,
          split: a.split,
          tasks: a.tasks,
          concurrency: a.concurrency,
          temperature: a.temperature ?? null,
          maxTokens: a.maxTokens ?? null,
          chatTemplateKwargs: a.chatTemplateKwargs ?? null,
          out: a.out ?? defaultOut(a.split),
          ...rolloutSettings(a),
        },
        secrets,
        stop.signal,
        (done, total, scored, mean, failures) =>
          bar.update(done, total, `episodes  mean ${mean === null ? '–' : mean.toFixed(3)} over ${scored}  failures ${failures}`),
      );
      bar.end();
      for (const n of r.notes) io.stderr.write(`note: ${n}\n`);
      io.stdout.write(`${visible(formatSummary(r.summary))}\n  wrote ${r.out}/episodes.jsonl and ${r.out}/summary.json\n`);
      return r.summary.interrupted || r.summary.failures.total > 0 ? EXIT.problems : EXIT.ok;
    } finally {
      bar.end();
      stop.dispose();
    }
  },
});
