/**
 * `openenv-bundle eval`: reads the split's tasks and tools from a running server (as the row
 * writer does), checks the model endpoint answers (before anything is deployed), plays the tasks
 * `concurrency` at a time with the model, appends each finished episode to OUT/episodes.jsonl as
 * it ends, and writes OUT/summary.json. An abort (Ctrl-C) stops starting episodes, closes every
 * session playing (the server tears their envs down) and still writes the summary of what
 * finished. The command line is src/cli/eval.ts.
 */
import { appendFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { BundleServerClient } from '../client/http.js';
import { promptRow, serverSettings, type RolloutSettings } from '../rows/build.js';
import { prepareOut, writeAtomically } from '../rows/write.js';
import { forEachAtMost } from '../util/work-pool.js';
import { ChatModel, ModelError } from './model.js';
import { playEpisode, type EpisodeRecord } from './play.js';
import { summarize, type EvalSummary } from './summary.js';

/** what the summary names as the model and its endpoint when every task played was a harness task */
export const HARNESS_MODEL = "the server's gateway upstream";
export const HARNESS_MODEL_URL = 'serve --model-url';

/** A failure of the run itself (not of one episode): one line, exit 1. */
export class EvalError extends Error {
  override readonly name = 'EvalError';
}

export interface EvalSettings extends RolloutSettings {
  /** the bundle server */
  url: string;
  /**
   * the OpenAI-compatible endpoint's base (…/v1) and its model, for the tasks the client plays;
   * null when every task played is a harness task (its model is the server's gateway upstream)
   */
  modelUrl: string | null;
  model: string | null;
  split: string;
  /** the first N tasks of the split */
  tasks: number | 'all';
  concurrency: number;
  temperature: number | null;
  maxTokens: number | null;
  chatTemplateKwargs: Record<string, unknown> | null;
  /** where to write */
  out: string;
}

export interface EvalSecrets {
  /** the server's token */
  token: string | null;
  /** the endpoint's API key */
  apiKey: string | null;
}

/** After each finished episode: how many of how many, how many were scored, their mean reward so far, the failures so far. */
export type EvalProgress = (done: number, total: number, scored: number, meanReward: number | null, failures: number) => void;

export interface EvalResult {
  summary: EvalSummary;
  out: string;
  records: EpisodeRecord[];
  /** what the run did not use of what it was given, for a person */
  notes: string[];
}

export function defaultOut(split: string, now = new Date()): string {
  return `eval-${split}-${now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z')}`;
}

export async function runEval(args: EvalSettings, secrets: EvalSecrets, signal: AbortSignal, progress: EvalProgress = () => undefined): Promise<EvalResult> {
  const started = Date.now();
  const { token, apiKey } = secrets;
  const client = new BundleServerClient({ url: args.url, token, tokenVar: args.tokenVar });
  const bundle = await client.bundle();
  if (!Object.hasOwn(bundle.splits, args.split)) {
    throw new EvalError(`${args.url} serves no split "${args.split}"; its splits: ${Object.keys(bundle.splits).join(', ')}`);
  }
  const toolsets = await client.toolsets();
  const tasks = await client.tasks(args.split);
  const selected = args.tasks === 'all' ? tasks : tasks.slice(0, args.tasks);
  const settings = serverSettings(args.url, args);
  const rows = selected.map((t) => {
    const tools = toolsets[t.toolset];
    if (!tools) throw new EvalError(`task "${t.task_id}" uses toolset "${t.toolset}", which GET /toolsets does not list`);
    return { task: t, row: promptRow(t, tools, settings) };
  });
  // a harness task's model is the server's gateway upstream (serve --model-url): only the others need one here
  const played = rows.filter((r) => !r.task.harness);
  if (played.length > 0 && (args.modelUrl === null || args.model === null)) {
    throw new EvalError(
      `${played.length} of the ${rows.length} task(s) (first: ${played[0]!.task.task_id}) are not harness tasks: the client plays them with a model, so give --model-url and --model (harness tasks need neither: their model is the server's, serve --model-url)`,
    );
  }
  const model =
    played.length > 0 && args.modelUrl !== null && args.model !== null
      ? new ChatModel({
          url: args.modelUrl,
          model: args.model,
          apiKey,
          temperature: args.temperature,
          maxTokens: args.maxTokens,
          chatTemplateKwargs: args.chatTemplateKwargs,
          timeoutMs: args.modelTimeout * 1000,
        })
      : null;
  try {
    await model?.checkEndpoint(signal);
  } catch (e) {
    if (e instanceof ModelError) throw new EvalError(`${e.message} (${e.reason}; nothing was deployed)`);
    throw e;
  }
  const out = args.out;
  await prepareOut(out);
  // created, never truncated: an earlier run's episodes are not lost to a repeated --out
  await writeFile(path.join(out, 'episodes.jsonl'), '', { flag: 'wx' }).catch((e: NodeJS.ErrnoException) => {
    throw e.code === 'EEXIST'
      ? new EvalError(`${out} holds an earlier run's episodes.jsonl: pass another --out (or move that folder away); nothing was changed`)
      : e;
  });
  const play = { url: args.url, token, maxTurns: args.maxTurns, toolTimeoutMs: args.toolTimeout * 1000, resetTimeoutMs: args.resetTimeout * 1000 };

  const records: EpisodeRecord[] = [];
  let scoredSum = 0;
  let scoredN = 0;
  // lines are appended one at a time, in the order episodes end
  let writes = Promise.resolve();
  progress(0, rows.length, 0, null, 0);
  await forEachAtMost(
    rows,
    args.concurrency,
    async ({ task, row }) => {
      let rec: EpisodeRecord;
      try {
        rec = await playEpisode(task, row, model, play, signal);
      } catch (e) {
        if (signal.aborted) return;
        throw e;
      }
      records.push(rec);
      if (rec.failure === null && rec.reward !== null) {
        scoredSum += rec.reward;
        scoredN++;
      }
      writes = writes.then(() => appendFile(path.join(out, 'episodes.jsonl'), `${JSON.stringify(rec)}\n`));
      progress(records.length, rows.length, scoredN, scoredN ? scoredSum / scoredN : null, records.length - scoredN);
    },
    signal,
  );
  await writes;
  const summary = summarize(records, {
    server: args.url,
    bundle: bundle.name,
    split: args.split,
    model: model ? args.model! : HARNESS_MODEL,
    modelUrl: model ? args.modelUrl! : HARNESS_MODEL_URL,
    tasks: rows.length,
    groupNames: Object.keys(bundle.groups),
    baselines: bundle.baselines[args.split] ?? {},
    interrupted: signal.aborted,
    wallS: Math.round((Date.now() - started) / 100) / 10,
    settings: {
      max_turns: args.maxTurns,
      tool_timeout: args.toolTimeout,
      reset_timeout: args.resetTimeout,
      model_timeout: args.modelTimeout,
      temperature: args.temperature,
      max_tokens: args.maxTokens,
      chat_template_kwargs: args.chatTemplateKwargs,
      concurrency: args.concurrency,
    },
  });
  await writeAtomically(out, [{ name: 'summary.json', lines: [JSON.stringify(summary, null, 2)] }]);
  const notes =
    model === null && args.modelUrl !== null
      ? [
          `--model-url ${args.modelUrl} was not used: every task played is a harness task, whose harness calls the server's gateway upstream (serve --model-url)`,
        ]
      : [];
  return { summary, out, records, notes };
}
