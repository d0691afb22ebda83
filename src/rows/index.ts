/**
 * The row writer: reads a bundle server's splits, tasks and toolsets and writes one slime prompt
 * row per task to OUT/<split>.jsonl and OUT/all.jsonl.
 */
import type { RowsArgs } from './args.js';
import { promptRow, serverSettings, type PromptRow } from './build.js';
import { BundleServerClient, RowsError } from './server.js';
import { prepareOut, writeAtomically, type OutFile } from './write.js';

export { UsageError } from '../cli/command.js';
export { parseRowsArgs, ROWS_USAGE, type RowsArgs } from './args.js';
export { promptRow, functionTool, type PromptRow, type FunctionTool, type ServerSettings } from './build.js';
export { BundleServerClient, RowsError, PAGE_LIMIT } from './server.js';
export { writeAtomically, prepareOut } from './write.js';

export interface Progress {
  /** `done` of `total` tasks of `split` read */
  update(split: string, done: number, total: number): void;
  end(): void;
}

export interface WriteRowsResult {
  out: string;
  /** file names written, sorted */
  files: string[];
  /** rows per split */
  counts: Record<string, number>;
}

/** Shows progress on a terminal (stderr), one rewritten line; nothing when it is not a TTY. */
export function ttyProgress(stream: NodeJS.WriteStream | { isTTY?: boolean; write(s: string): unknown }): Progress {
  if (!stream.isTTY) return { update() {}, end() {} };
  let shown = false;
  return {
    update(split, done, total) {
      shown = true;
      const pct = total ? Math.floor((done / total) * 100) : 100;
      stream.write(`\r\x1b[2Kreading ${split}: ${done}/${total} tasks (${pct}%)`);
    },
    end() {
      if (shown) stream.write('\r\x1b[2K');
    },
  };
}

export async function writeRows(args: RowsArgs, env: NodeJS.ProcessEnv, progress: Progress = ttyProgress({ write: () => true })): Promise<WriteRowsResult> {
  let token: string | null = null;
  if (args.tokenVar) {
    token = env[args.tokenVar] ?? null;
    if (!token) throw new RowsError(`--token-var ${args.tokenVar}: the environment variable ${args.tokenVar} is not set or empty`);
  }
  await prepareOut(args.out);
  const client = new BundleServerClient({ url: args.url, token, tokenVar: args.tokenVar });
  const bundle = await client.bundle();
  const available = Object.keys(bundle.splits);
  const splits = args.splits ?? available;
  const unknown = splits.filter((s) => !available.includes(s));
  if (unknown.length) throw new RowsError(`${args.url} serves no split ${unknown.map((s) => `"${s}"`).join(', ')}; its splits: ${available.join(', ')}`);
  for (const s of splits) {
    if (s === 'all' || !/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(s)) throw new RowsError(`split "${s}" cannot be written as ${s}.jsonl beside all.jsonl`);
  }
  const toolsets = await client.toolsets();
  const server = serverSettings(args.url, args);
  const bySplit: Record<string, PromptRow[]> = {};
  try {
    for (const split of [...new Set(splits)]) {
      const tasks = await client.tasks(split, (done, total) => progress.update(split, done, total));
      bySplit[split] = tasks.map((t) => {
        const tools = toolsets[t.toolset];
        if (!tools) throw new RowsError(`task "${t.task_id}" uses toolset "${t.toolset}", which GET /toolsets does not list`);
        return promptRow(t, tools, server);
      });
    }
  } finally {
    progress.end();
  }
  const files: OutFile[] = Object.entries(bySplit).map(([split, rows]) => ({ name: `${split}.jsonl`, lines: rows.map((r) => JSON.stringify(r)) }));
  files.push({ name: 'all.jsonl', lines: files.flatMap((f) => f.lines) });
  await writeAtomically(args.out, files);
  return {
    out: args.out,
    files: files.map((f) => f.name).sort(),
    counts: Object.fromEntries(Object.entries(bySplit).map(([s, r]) => [s, r.length])),
  };
}
