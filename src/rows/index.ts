/**
 * The row writer: reads a bundle server's splits, tasks and toolsets and writes one slime prompt
 * row per task to OUT/<split>.jsonl and OUT/all.jsonl. The command line is src/cli/rows.ts.
 */
import { BundleServerClient, ServerReadError } from '../client/http.js';
import { promptRow, serverSettings, type PromptRow, type RolloutSettings } from './build.js';
import { prepareOut, writeAtomically, type OutFile } from './write.js';

export interface RowsSettings extends RolloutSettings {
  /** the server, e.g. http://127.0.0.1:8200 */
  url: string;
  /** the folder to write */
  out: string;
  /** only these splits; null: every split */
  splits: string[] | null;
}

export interface WriteRowsResult {
  out: string;
  /** file names written, sorted */
  files: string[];
  /** rows per split */
  counts: Record<string, number>;
}

/**
 * Writes the rows. `token` is the server's token (read from the variable `tokenVar` names);
 * `onProgress(split, done, total)` after each page of tasks read.
 */
export async function writeRows(
  args: RowsSettings,
  token: string | null,
  onProgress: (split: string, done: number, total: number) => void = () => undefined,
): Promise<WriteRowsResult> {
  await prepareOut(args.out);
  const client = new BundleServerClient({ url: args.url, token, tokenVar: args.tokenVar });
  const bundle = await client.bundle();
  const available = Object.keys(bundle.splits);
  const splits = args.splits ?? available;
  const unknown = splits.filter((s) => !available.includes(s));
  if (unknown.length) throw new ServerReadError(`${args.url} serves no split ${unknown.map((s) => `"${s}"`).join(', ')}; its splits: ${available.join(', ')}`);
  for (const s of splits) {
    if (s === 'all' || !/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(s)) throw new ServerReadError(`split "${s}" cannot be written as ${s}.jsonl beside all.jsonl`);
  }
  const toolsets = await client.toolsets();
  const server = serverSettings(args.url, args);
  const bySplit: Record<string, PromptRow[]> = {};
  for (const split of [...new Set(splits)]) {
    const tasks = await client.tasks(split, (done, total) => onProgress(split, done, total));
    bySplit[split] = tasks.map((t) => {
      const tools = toolsets[t.toolset];
      if (!tools) throw new ServerReadError(`task "${t.task_id}" uses toolset "${t.toolset}", which GET /toolsets does not list`);
      return promptRow(t, tools, server);
    });
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
