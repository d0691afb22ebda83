/** `openenv-bundle rows URL OUT [options]`: a running server's tasks as slime prompt rows (as `node dist/rows.js`). */
import { main } from '../rows.js';
import { ROWS_USAGE } from '../rows/index.js';
import type { Subcommand } from './command.js';

export const rowsCommand: Subcommand = {
  name: 'rows',
  summary: "write a running server's tasks as slime prompt rows",
  usage: ROWS_USAGE.replace('node dist/rows.js', 'openenv-bundle rows'),
  run: (argv, io) => main(argv, io),
};
