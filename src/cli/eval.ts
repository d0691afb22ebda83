/**
 * `openenv-bundle eval SERVER_URL --model-url URL --model NAME [options]`: a split of a running
 * server played by a model behind an OpenAI-compatible endpoint (src/eval/). Ctrl-C (SIGINT) or
 * SIGTERM stops the run: the sessions playing are closed, so the server tears their envs down, and what finished
 * is written; a second Ctrl-C leaves at once.
 */
import { EVAL_USAGE, parseEvalArgs } from '../eval/args.js';
import { EvalError, runEval, ttyEvalProgress } from '../eval/run.js';
import { formatSummary } from '../eval/summary.js';
import { EXIT, UsageError, type CliIo, type Subcommand } from './command.js';
import { exitWith } from './process-entry.js';

export interface EvalRunOptions {
  /** aborts the run as Ctrl-C does (tests); the process's SIGINT is listened to besides */
  signal?: AbortSignal;
}

export async function evalMain(argv: string[], io: CliIo, opts: EvalRunOptions = {}): Promise<number> {
  let args;
  try {
    args = parseEvalArgs(argv);
  } catch (e) {
    if (e instanceof UsageError) {
      io.stderr.write(`error: ${e.message}\n`);
      return EXIT.usage;
    }
    throw e;
  }
  if (args === 'help') {
    io.stdout.write(`${EVAL_USAGE}\n`);
    return EXIT.ok;
  }
  const stop = new AbortController();
  // SIGTERM (a scheduler stopping the job) as Ctrl-C: the summary of what finished is written
  const onSignal = (signal: NodeJS.Signals) => {
    if (stop.signal.aborted) exitWith(signal === 'SIGTERM' ? 143 : 130);
    io.stderr.write(
      `\n${signal === 'SIGTERM' ? 'terminated' : 'interrupted'}: closing the episodes in play and writing what finished (Ctrl-C again to leave at once)\n`,
    );
    stop.abort(new Error('interrupted'));
  };
  const onOuter = () => stop.abort(opts.signal?.reason);
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  opts.signal?.addEventListener('abort', onOuter, { once: true });
  try {
    const r = await runEval(args, io.env, stop.signal, ttyEvalProgress(io.stderr));
    io.stdout.write(`${formatSummary(r.summary)}\n  wrote ${r.out}/episodes.jsonl and ${r.out}/summary.json\n`);
    return r.summary.interrupted || r.summary.failures.total > 0 ? EXIT.problems : EXIT.ok;
  } catch (e) {
    io.stderr.write(`error: ${e instanceof EvalError ? e.message : ((e as Error)?.message ?? String(e))}\n`);
    return EXIT.problems;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    opts.signal?.removeEventListener('abort', onOuter);
  }
}

export const evalCommand: Subcommand = {
  name: 'eval',
  summary: "play a running server's split with a model behind an OpenAI-compatible endpoint",
  usage: EVAL_USAGE,
  run: (argv, io) => evalMain(argv, io),
};
