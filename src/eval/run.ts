/**
 * `openenv-bundle eval`: reads the split's tasks and tools from a running server (as the row
 * writer does), plays them `--concurrency` at a time with the model, appends each finished episode
 * to OUT/episodes.jsonl as it ends, and writes OUT/summary.json. An abort (Ctrl-C) stops starting
 * episodes, closes every session playing (the server tears their envs down) and still writes the
 * summary of what finished.
 */
import { appendFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { EvalArgs } from './args.js';
import { ChatModel } from './model.js';
import { playEpisode, type EpisodeRecord } from './play.js';
import { summarize, type EvalSummary } from './summary.js';
import { promptRow, serverSettings } from '../rows/build.js';
import { BundleServerClient, RowsError } from '../rows/server.js';
import { prepareOut, writeAtomically } from '../rows/write.js';

/** A failure of the run itself (not of one episode): one line, exit 1. */
export class EvalError extends Error {
  override readonly name = 'EvalError';
}

export interface EvalProgress {
  start(total: number): void;
  /** after each finished episode */
  update(done: number, total: number, scored: number, meanReward: number | null, failures: number): void;
  end(): void;
}

export const NO_PROGRESS: EvalProgress = { start() {}, update() {}, end() {} };

/** A progress bar on a terminal (stderr), one rewritten line; nothing when it is not a TTY. */
export function ttyEvalProgress(stream: { isTTY?: boolean; write(s: string): unknown }): EvalProgress {
  if (!stream.isTTY) return NO_PROGRESS;
  const width = 30;
  let shown = false;
  const draw = (done: number, total: number, tail: string) => {
    shown = true;
    const filled = total ? Math.round((done / total) * width) : width;
    stream.write(`\r\x1b[2K[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total}${tail}`);
  };
  return {
    start: (total) => draw(0, total, ''),
    update: (done, total, scored, mean, failures) => draw(done, total, `  mean ${mean === null ? '–' : mean.toFixed(3)} over ${scored}  failures ${failures}`),
    end() {
      if (shown) stream.write('\r\x1b[2K');
    },
  };
}

export interface EvalResult {
  summary: EvalSummary;
  out: string;
  records: EpisodeRecord[];
}

export function defaultOut(split: string, now = new Date()): string {
  return `eval-${split}-${now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z')}`;
}

function tokenOf(varName: string | null, env: NodeJS.ProcessEnv, what: string): string | null {
  if (!varName) return null;
  const v = env[varName];
  if (!v) throw new EvalError(`${what} ${varName}: the environment variable ${varName} is not set or empty`);
  return v;
}

export async function runEval(args: EvalArgs, env: NodeJS.ProcessEnv, signal: AbortSignal, progress: EvalProgress = NO_PROGRESS): Promise<EvalResult> {
  const started = Date.now();
  const token = tokenOf(args.tokenVar, env, '--token-var');
  const apiKey = tokenOf(args.modelKeyVar, env, '--model-key-var');
  const client = new BundleServerClient({ url: args.url, token, tokenVar: args.tokenVar });
  let bundle, toolsets, tasks;
  try {
    bundle = await client.bundle();
    if (!Object.hasOwn(bundle.splits, args.split)) {
      throw new EvalError(`${args.url} serves no split "${args.split}"; its splits: ${Object.keys(bundle.splits).join(', ')}`);
    }
    toolsets = await client.toolsets();
    tasks = await client.tasks(args.split);
  } catch (e) {
    if (e instanceof RowsError) throw new EvalError(e.message);
    throw e;
  }
  const selected = args.tasks === 'all' ? tasks : tasks.slice(0, args.tasks);
  const out = args.out ?? defaultOut(args.split);
  try {
    await prepareOut(out);
    // created, never truncated: an earlier run's episodes are not lost to a repeated --out
    await writeFile(path.join(out, 'episodes.jsonl'), '', { flag: 'wx' });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') {
      throw new EvalError(`${out} holds an earlier run's episodes.jsonl: pass another --out (or move that folder away); nothing was changed`);
    }
    throw new EvalError((e as Error).message);
  }
  const settings = serverSettings(args.url, args);
  const rows = selected.map((t) => {
    const tools = toolsets[t.toolset];
    if (!tools) throw new EvalError(`task "${t.task_id}" uses toolset "${t.toolset}", which GET /toolsets does not list`);
    return { task: t, row: promptRow(t, tools, settings) };
  });
  const model = new ChatModel({
    url: args.modelUrl,
    model: args.model,
    apiKey,
    temperature: args.temperature,
    maxTokens: args.maxTokens,
    chatTemplateKwargs: args.chatTemplateKwargs,
    timeoutMs: args.modelTimeout * 1000,
  });
  const play = { url: args.url, token, maxTurns: args.maxTurns, toolTimeoutMs: args.toolTimeout * 1000, resetTimeoutMs: args.resetTimeout * 1000 };

  const records: EpisodeRecord[] = [];
  let scoredSum = 0;
  let scoredN = 0;
  let next = 0;
  // lines are appended one at a time, in the order episodes end
  let writes = Promise.resolve();
  progress.start(rows.length);
  const worker = async () => {
    while (!signal.aborted && next < rows.length) {
      const { task, row } = rows[next++]!;
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
      progress.update(records.length, rows.length, scoredN, scoredN ? scoredSum / scoredN : null, records.length - scoredN);
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(args.concurrency, rows.length) }, worker));
    await writes;
  } finally {
    progress.end();
  }
  const summary = summarize(records, {
    server: args.url,
    bundle: bundle.name,
    split: args.split,
    model: args.model,
    modelUrl: args.modelUrl,
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
  return { summary, out, records };
}
