/**
 * Every command of `openenv-bundle`, in the order --help lists them. A new command is a module
 * in src/cli/ exporting a defineCommand(...) and one entry here (`import`, harbor's bundle
 * importer, joins after `pack`).
 */
import { buildCommand } from './build.js';
import { checkCommand } from './check.js';
import type { Subcommand } from './command.js';
import { evalCommand } from './eval.js';
import { importCommand } from './import.js';
import { initCommand } from './init.js';
import { packCommand } from './pack.js';
import { playCommand } from './play.js';
import { rowsCommand } from './rows.js';
import { serveCommand } from './serve.js';

export const SUBCOMMANDS: readonly Subcommand[] = [
  serveCommand,
  initCommand,
  checkCommand,
  packCommand,
  buildCommand,
  importCommand,
  playCommand,
  evalCommand,
  rowsCommand,
];
