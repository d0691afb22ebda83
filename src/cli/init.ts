/** `openenv-bundle init NAME [--env node|python] [--dir D]`: a new bundle that serves and scores as it is. */
import path from 'node:path';
import { z } from 'zod';
import { BASE_IMAGE_ARG, ENV_LANGUAGES, initBundle, PACKAGE_ROOT } from '../authoring/init.js';
import { defineCommand, EXIT } from './command.js';

/** A path as a person pastes it into a shell: quoted when it holds anything but plain characters. */
export function shellWord(s: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

export const initCommand = defineCommand({
  name: 'init',
  summary: 'write a new bundle (node or python env) that serves and scores as it is',
  synopsis: 'NAME [options]',
  about: [
    'Writes a new bundle that serves and scores as it is: bundle.json, a README saying what to',
    'change, train and eval tasks with golden solutions, one toolset of two tools, and an env',
    '(its server and a Dockerfile building FROM a public base image, swappable by a build argument',
    'for offline machines). Never overwrites anything. Ends with the commands to run next.',
  ],
  positionals: { name: { name: 'NAME', schema: z.string().min(1), help: 'the bundle name: lower case letters, digits, . _ -' } },
  options: {
    env: { schema: z.enum(ENV_LANGUAGES).default('node'), value: ENV_LANGUAGES.join('|'), help: "the env's language" },
    dir: { schema: z.string().min(1).optional(), value: 'D', help: 'the folder to write, which must not exist or be empty', shownDefault: './NAME' },
    json: { schema: z.boolean().default(false), help: 'print what was written as one JSON object on stdout' },
  },
  footer: ['Exit codes: 0 written, 1 the folder or the name cannot be used (nothing written), 2 a command line to fix.'],
  async run({ name, env, dir = name, json }, io) {
    const files = await initBundle(name, env, dir);
    const next = nextSteps(name, dir, env, process.cwd());
    if (json) {
      io.stdout.write(`${JSON.stringify({ name, env, dir, files, build_arg: BASE_IMAGE_ARG[env].arg, next })}\n`);
      return EXIT.ok;
    }
    io.stdout.write(
      [
        `wrote bundle ${name} (${env} env) to ${dir}:`,
        ...files.map((f) => `  ${f}`),
        '',
        'Next:',
        `  ${next.check}   # builds the env, plays golden and empty solutions`,
        `  ${next.serve}   # serves it on 127.0.0.1:8200; Ctrl-C stops it`,
        `  ${next.play}   # in another shell: play a task by hand`,
        'Offline (no registry): build the local base image once, then add its build argument:',
        `  ${next.offlineBase}`,
        `  ${next.offlineCheck}`,
        `  ${next.offlineServe}`,
        '',
      ].join('\n'),
    );
    return EXIT.ok;
  },
});

/**
 * What to run next, each a command that runs as printed in a shell at `cwd` (the folder init ran
 * in; the tests run them so): `npx openenv-bundle` inside this package's clone, where npx finds
 * it, else node and the path of this very command; the offline base script likewise.
 */
export function nextSteps(name: string, dir: string, env: (typeof ENV_LANGUAGES)[number], cwd: string) {
  const base = BASE_IMAGE_ARG[env];
  const inClone = !path.relative(PACKAGE_ROOT, cwd).startsWith('..');
  const cmd = inClone ? 'npx openenv-bundle' : `node ${shellWord(path.join(PACKAGE_ROOT, 'dist/cli/openenv-bundle.js'))}`;
  const script = inClone ? path.relative(cwd, path.join(PACKAGE_ROOT, base.script)) : path.join(PACKAGE_ROOT, base.script);
  const d = shellWord(dir);
  const offline = `--build-arg ${base.arg}=${base.local}`;
  return {
    check: `${cmd} check ${d}`,
    serve: `${cmd} serve ${d}`,
    play: `${cmd} play http://127.0.0.1:8200 --task ${name}-train-0`,
    offlineBase: `bash ${shellWord(script)}`,
    offlineCheck: `${cmd} check ${d} ${offline}`,
    offlineServe: `${cmd} serve ${d} ${offline}`,
  };
}
