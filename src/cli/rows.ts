/** `openenv-bundle rows URL OUT [options]` (also `node dist/rows.js`): a running server's tasks as slime prompt rows. */
import { z } from 'zod';
import { writeRows } from '../rows/index.js';
import { defineCommand, EXIT } from './command.js';
import { progressBar } from './progress.js';
import { httpUrl, ROLLOUT_OPTIONS, rolloutSettings, secretFrom } from './rollout-options.js';

export const rowsCommand = defineCommand({
  name: 'rows',
  summary: "write a running server's tasks as slime prompt rows",
  synopsis: 'URL OUT [options]',
  about: [
    "Writes a bundle server's tasks as slime prompt rows: OUT/<split>.jsonl for each split and",
    'OUT/all.jsonl, one row per task ({"messages", "tools", "metadata"}), for',
    '`--input-key messages --metadata-key metadata`. Reads GET /bundle, /tasks and /toolsets;',
    'no env is deployed. Each row records the rollout options below in metadata.server.',
  ],
  positionals: {
    url: { name: 'URL', schema: httpUrl('URL', 'http://127.0.0.1:8200'), help: 'the bundle server, e.g. http://127.0.0.1:8200' },
    out: { name: 'OUT', schema: z.string().min(1), help: 'the folder to write the rows into' },
  },
  options: {
    ...ROLLOUT_OPTIONS,
    split: { schema: z.array(z.string().min(1)).optional(), value: 'S', repeatable: true, help: 'only this split (repeatable)', shownDefault: 'every split' },
  },
  footer: ['Exit codes: 0 written; 1 the server or OUT failed (one line says why), nothing half-written; 2 a command line to fix.'],
  async run(a, io) {
    const token = secretFrom(a.tokenVar, io.env, 'token-var');
    const bar = progressBar(io.stderr);
    let r;
    try {
      r = await writeRows({ url: a.url, out: a.out, splits: a.split ?? null, ...rolloutSettings(a) }, token, (split, done, total) =>
        bar.update(done, total, `tasks of ${split} read`),
      );
    } finally {
      bar.end();
    }
    io.stdout.write(`wrote ${r.files.join(', ')} to ${r.out}\n`);
    return EXIT.ok;
  },
});
