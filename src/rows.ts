#!/usr/bin/env node
/** `node dist/rows.js URL OUT [options]`: the prompt-row writer, exactly as `openenv-bundle rows` (src/cli/rows.ts). */
import { runCommandAsProcess } from './cli/command.js';
import { rowsCommand } from './cli/rows.js';

runCommandAsProcess(rowsCommand, 'node dist/rows.js');
