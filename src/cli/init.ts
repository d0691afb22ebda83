/** `openenv-bundle init NAME [--env node|python] [--dir D]`: a new bundle that serves and scores as it is. */
import { BASE_IMAGE_ARG, ENV_LANGUAGES, InitError, initBundle, type EnvLanguage } from '../authoring/init.js';
import { EXIT, UsageError, type CliIo, type Subcommand } from './command.js';
import { HELP_FLAG, flagLines, parseFlags, type Flag } from './flags.js';

const FLAGS: Flag[] = [
  { name: 'env', value: 'LANG', help: `the env's language: ${ENV_LANGUAGES.join(' or ')} (default node)` },
  { name: 'dir', value: 'D', help: 'the folder to write, which must not exist or be empty (default ./NAME)' },
  { name: 'json', help: 'print what was written as one JSON object on stdout' },
  HELP_FLAG,
];

export const INIT_USAGE = [
  'Usage: openenv-bundle init NAME [options]',
  '',
  'Writes a new bundle that serves and scores as it is: bundle.json, a README saying what to',
  'change, train and eval tasks with golden solutions, one toolset of two tools, and an env',
  '(its server and a Dockerfile building FROM a public base image, swappable by a build argument',
  'for offline machines). Never overwrites anything. NAME: lower case letters, digits, . _ -',
  '',
  'Options:',
  ...flagLines(FLAGS),
].join('\n');

export async function runInit(argv: string[], io: CliIo): Promise<number> {
  let name: string;
  let env: EnvLanguage;
  let dir: string;
  let json: boolean;
  try {
    const { positionals, values } = parseFlags(argv, FLAGS, { min: 1, max: 1, names: 'the bundle NAME' });
    name = positionals[0] as string;
    const lang = (values.env as string | undefined) ?? 'node';
    if (!(ENV_LANGUAGES as readonly string[]).includes(lang)) throw new UsageError(`--env must be ${ENV_LANGUAGES.join(' or ')}, got ${JSON.stringify(lang)}`);
    env = lang as EnvLanguage;
    dir = (values.dir as string | undefined) ?? name;
    json = values.json === true;
  } catch (e) {
    if (e instanceof UsageError) {
      io.stderr.write(`error: ${e.message}\n\n${INIT_USAGE}\n`);
      return EXIT.usage;
    }
    throw e;
  }
  let files: string[];
  try {
    files = await initBundle(name, env, dir);
  } catch (e) {
    if (e instanceof InitError) {
      io.stderr.write(`error: ${e.message}\n`);
      return EXIT.problems;
    }
    throw e;
  }
  const base = BASE_IMAGE_ARG[env];
  if (json) {
    io.stdout.write(`${JSON.stringify({ name, env, dir, files, build_arg: base.arg })}\n`);
    return EXIT.ok;
  }
  io.stdout.write(
    [
      `wrote bundle ${name} (${env} env) to ${dir}:`,
      ...files.map((f) => `  ${f}`),
      '',
      'Next:',
      `  openenv-bundle check ${dir}        # builds the env, plays golden and empty solutions`,
      `  openenv-bundle serve ${dir}        # then reset task ${name}-train-0 over /ws or /episodes`,
      `Offline (no registry): add --build-arg ${base.arg}=${base.local} to both, after bash ${base.script}`,
      '',
    ].join('\n'),
  );
  return EXIT.ok;
}

export const initCommand: Subcommand = {
  name: 'init',
  summary: 'write a new bundle (node or python env) that serves and scores as it is',
  usage: INIT_USAGE,
  run: runInit,
};
