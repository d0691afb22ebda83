/**
 * Every subcommand of `openenv-bundle`, in the order `--help` lists them. A new subcommand is a
 * module exporting a `Subcommand` and one line here.
 */
import { checkCommand } from './check.js';
import type { Subcommand } from './command.js';
import { evalCommand } from './eval.js';
import { importCommand } from './import.js';
import { initCommand } from './init.js';
import { packCommand } from './pack.js';
import { rowsCommand } from './rows.js';
import { serveCommand } from './serve.js';

export const SUBCOMMANDS: readonly Subcommand[] = [serveCommand, initCommand, checkCommand, packCommand, evalCommand, rowsCommand, importCommand];
