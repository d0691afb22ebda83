/** Bundles for the authoring tests: fresh `init` output in a temporary folder, edited into broken copies. */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { initBundle, type EnvLanguage } from '../../src/authoring/init.js';
import type { CliIo } from '../../src/cli/command.js';
import { cli } from '../../src/cli/openenv-bundle.js';

/** `openenv-bundle NAME …` in-process, as the dispatcher runs it */
export const run = (name: string) => (argv: string[], io: CliIo) => cli([name, ...argv], io);

export interface TempBundle {
  dir: string;
  /** replaces `from` (which must occur) with `to` in a file of the bundle */
  edit(rel: string, from: string | RegExp, to: string): Promise<void>;
  remove(): Promise<void>;
}

export async function initTemp(name = 'probe-v1', env: EnvLanguage = 'node'): Promise<TempBundle> {
  const parent = await mkdtemp(path.join(tmpdir(), 'openenv-authoring-'));
  const dir = path.join(parent, name);
  await initBundle(name, env, dir);
  return {
    dir,
    async edit(rel, from, to) {
      const file = path.join(dir, rel);
      const text = await readFile(file, 'utf8');
      const next = text.replace(from, to);
      if (next === text) throw new Error(`${rel}: ${String(from)} not found`);
      await writeFile(file, next);
    },
    remove: () => rm(parent, { recursive: true, force: true }),
  };
}

export function bufferIo(env: NodeJS.ProcessEnv = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIo = { stdout: { write: (s: string) => out.push(s) }, stderr: { write: (s: string) => err.push(s) }, env };
  return { io, out: () => out.join(''), err: () => err.join('') };
}
