/** `openenv-bundle serve DIR [options]`: the server, exactly as `node dist/serve.js DIR [options]`. */
import { helpText, serveMain } from '../serve.js';
import type { Subcommand } from './command.js';

export const serveCommand: Subcommand = {
  name: 'serve',
  summary: 'serve a bundle (folder or .tar.gz) as an OpenEnv environment',
  get usage() {
    return helpText('openenv-bundle serve');
  },
  run: (argv) => serveMain(argv),
};
