/**
 * `openenv-bundle init`: writes a new bundle from templates/ (common files, then the chosen
 * language's env), with NAME in place of `{{name}}`. Never overwrites: a folder that exists and
 * holds anything is refused before a byte is written.
 */
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { NAME_PATTERN } from '../bundle/schema.js';
import { LOCAL_BASE_IMAGES } from '../defaults.js';

export const ENV_LANGUAGES = ['node', 'python'] as const;
export type EnvLanguage = (typeof ENV_LANGUAGES)[number];

/** the package's root: two levels above this file in src/ and in dist/ alike */
export const PACKAGE_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** templates/ at the package root */
export const TEMPLATES_DIR = path.join(PACKAGE_ROOT, 'templates');

/** The base image build argument each language's Dockerfile declares, and the offline image for it. */
export const BASE_IMAGE_ARG: Record<EnvLanguage, { arg: string; local: string; script: string }> = {
  node: { arg: 'NODE_IMAGE', local: LOCAL_BASE_IMAGES.NODE_IMAGE!.image, script: LOCAL_BASE_IMAGES.NODE_IMAGE!.script },
  python: { arg: 'PYTHON_IMAGE', local: LOCAL_BASE_IMAGES.PYTHON_IMAGE!.image, script: LOCAL_BASE_IMAGES.PYTHON_IMAGE!.script },
};

export class InitError extends Error {
  override readonly name = 'InitError';
}

async function filesUnder(root: string, rel = ''): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(path.join(root, rel), { withFileTypes: true })) {
    const r = rel === '' ? entry.name : `${rel}/${entry.name}`;
    if (entry.isDirectory()) out.push(...(await filesUnder(root, r)));
    else if (entry.isFile()) out.push(r);
  }
  return out.sort();
}

/** Writes bundle NAME into `dir`; returns the files written, relative to it. */
export async function initBundle(name: string, env: EnvLanguage, dir: string): Promise<string[]> {
  if (!NAME_PATTERN.test(name)) {
    throw new InitError(`the name ${JSON.stringify(name)} must match ${NAME_PATTERN.source} (lower case: it goes into image tags)`);
  }
  const existing = await readdir(dir).catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT') return [];
    throw new InitError(`cannot use ${dir}: ${e.message}`);
  });
  if (existing.length > 0) throw new InitError(`${dir} already exists and is not empty: init never overwrites; pick another --dir or NAME`);
  const sources: { from: string; rel: string }[] = [];
  for (const part of ['common', env]) {
    const root = path.join(TEMPLATES_DIR, part);
    for (const rel of await filesUnder(root)) sources.push({ from: path.join(root, rel), rel });
  }
  for (const { from, rel } of sources) {
    const to = path.join(dir, rel);
    await mkdir(path.dirname(to), { recursive: true });
    const text = (await readFile(from, 'utf8')).replaceAll('{{name}}', name);
    // 'wx': a file that appeared meanwhile is not overwritten either
    await writeFile(to, text, { flag: 'wx' });
  }
  return sources.map((s) => s.rel);
}
