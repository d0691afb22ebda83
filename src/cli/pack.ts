/** `openenv-bundle pack DIR [-o OUT]`: the bundle as a .tar.gz named with its content hash. */
import { z } from 'zod';
import { BUNDLE_IGNORE_FILE, packBundle } from '../authoring/pack.js';
import { defineCommand, EXIT } from './command.js';

export const packCommand = defineCommand({
  name: 'pack',
  summary: 'pack a bundle folder into a .tar.gz named with its content hash',
  synopsis: 'DIR [options]',
  about: [
    'Packs a bundle folder (checked as the server loads it) into a .tar.gz that `openenv-bundle',
    'serve` loads directly, named <name>-<version>-<12 hex of its sha256>.tar.gz. Leaves out what',
    `${BUNDLE_IGNORE_FILE} at the bundle's root and each env's .dockerignore exclude (Docker's syntax);`,
    'refuses symbolic links and anything but files and folders. The same files give the same archive.',
  ],
  positionals: { dir: { name: 'DIR', schema: z.string().min(1), help: 'the bundle folder' } },
  options: {
    out: {
      schema: z.string().min(1).default('.'),
      value: 'OUT',
      short: 'o',
      help: 'a folder to write <name>-<version>-<hash>.tar.gz into, or a file path ending in .tar.gz',
    },
    json: { schema: z.boolean().default(false), help: 'print the archive path, its sha256 and its files as one JSON object on stdout' },
  },
  footer: ['Exit codes: 0 packed, 1 the bundle does not load or cannot be packed, 2 a command line to fix.'],
  async run({ dir, out, json }, io) {
    const packed = await packBundle(dir, out);
    io.stdout.write(
      json
        ? `${JSON.stringify(packed)}\n`
        : `packed ${packed.files.length} file(s), ${packed.bytes} bytes: ${packed.file}\n  sha256 ${packed.sha256}\n  serve it: npx openenv-bundle serve ${packed.file}\n`,
    );
    return EXIT.ok;
  },
});
