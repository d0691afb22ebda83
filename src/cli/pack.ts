/** `openenv-bundle pack DIR [-o OUT]`: the bundle as a .tar.gz named with its content hash. */
import { BundleError } from '../bundle/index.js';
import { BUNDLE_IGNORE_FILE, PackError, packBundle } from '../authoring/pack.js';
import { EXIT, UsageError, type CliIo, type Subcommand } from './command.js';
import { HELP_FLAG, flagLines, parseFlags, type Flag } from './flags.js';

const FLAGS: Flag[] = [
  { name: 'out', short: 'o', value: 'OUT', help: 'a folder to write <name>-<version>-<hash>.tar.gz into, or a file path ending in .tar.gz (default: .)' },
  { name: 'json', help: 'print the archive path, its sha256 and its files as one JSON object on stdout' },
  HELP_FLAG,
];

export const PACK_USAGE = [
  'Usage: openenv-bundle pack DIR [options]',
  '',
  'Packs a bundle folder (checked as the server loads it) into a .tar.gz that `openenv-bundle',
  'serve` loads directly, named <name>-<version>-<12 hex of its sha256>.tar.gz. Leaves out what',
  `${BUNDLE_IGNORE_FILE} at the bundle's root and each env's .dockerignore exclude (Docker's syntax);`,
  'refuses symbolic links and anything but files and folders. The same files give the same archive.',
  '',
  'Options:',
  ...flagLines(FLAGS),
].join('\n');

export async function runPack(argv: string[], io: CliIo): Promise<number> {
  let dir: string;
  let out: string | undefined;
  let json: boolean;
  try {
    const { positionals, values } = parseFlags(argv, FLAGS, { min: 1, max: 1, names: 'the bundle folder (DIR)' });
    dir = positionals[0] as string;
    out = values.out as string | undefined;
    json = values.json === true;
  } catch (e) {
    if (e instanceof UsageError) {
      io.stderr.write(`error: ${e.message}\n\n${PACK_USAGE}\n`);
      return EXIT.usage;
    }
    throw e;
  }
  try {
    const packed = await packBundle(dir, out);
    io.stdout.write(
      json
        ? `${JSON.stringify(packed)}\n`
        : `packed ${packed.files.length} file(s), ${packed.bytes} bytes: ${packed.file}\n  sha256 ${packed.sha256}\n  serve it: openenv-bundle serve ${packed.file}\n`,
    );
    return EXIT.ok;
  } catch (e) {
    if (e instanceof PackError || e instanceof BundleError) {
      io.stderr.write(`error: ${e.message}\n`);
      return EXIT.problems;
    }
    throw e;
  }
}

export const packCommand: Subcommand = {
  name: 'pack',
  summary: 'pack a bundle folder into a .tar.gz named with its content hash',
  usage: PACK_USAGE,
  run: runPack,
};
