#!/usr/bin/env node
/**
 * `node dist/rows.js URL OUT [--max-turns 4] [--tool-timeout 60] [--reset-timeout 600]
 * [--model-timeout 600] [--token-var NAME] [--split S]`: writes a bundle server's tasks as slime
 * prompt rows (see src/rows/). Exit 0 when written, 1 when the server or OUT fails (one line
 * says why), 2 for a command line to fix.
 */
import { parseRowsArgs, ROWS_USAGE, RowsError, ttyProgress, UsageError, writeRows } from './rows/index.js';
import { isEntryPoint, runAsProcess } from './cli/process-entry.js';

export interface RowsIo {
  stdout: { write(s: string): unknown };
  stderr: { isTTY?: boolean; write(s: string): unknown };
  env: NodeJS.ProcessEnv;
}

/** Runs the command; resolves with its exit code. */
export async function main(argv: string[], io: RowsIo): Promise<number> {
  let args;
  try {
    args = parseRowsArgs(argv);
  } catch (e) {
    if (e instanceof UsageError) {
      io.stderr.write(`error: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  if (args === 'help') {
    io.stdout.write(`${ROWS_USAGE}\n`);
    return 0;
  }
  try {
    const r = await writeRows(args, io.env, ttyProgress(io.stderr));
    io.stdout.write(`wrote ${r.files.join(', ')} to ${r.out}\n`);
    return 0;
  } catch (e) {
    if (e instanceof RowsError) {
      io.stderr.write(`error: ${e.message}\n`);
      return 1;
    }
    io.stderr.write(`error: ${(e as Error)?.message ?? String(e)}\n`);
    return 1;
  }
}

if (isEntryPoint(import.meta.url)) runAsProcess(() => main(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env }));
