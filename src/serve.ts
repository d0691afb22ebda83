#!/usr/bin/env node
/** `node dist/serve.js BUNDLE [options]`: the server, exactly as `openenv-bundle serve` (src/cli/serve.ts). */
import { runCommandAsProcess } from './cli/command.js';
import { serveCommand } from './cli/serve.js';

runCommandAsProcess(serveCommand, 'node dist/serve.js');
