/**
 * The import's last steps: write (a typed draft, draft.ts, put in a folder: its copies, then its
 * files) and verify (the folder loaded as the server loads it), then the folder put in DIR's place.
 */
import { cp, mkdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { loadBundle } from '../../bundle/index.js';
import type { ImportDraft } from './draft.js';
import { isDir } from './read.js';

/** writes the draft into `dir`: the folders copied in first, then the files (a mapped Dockerfile over its context's) */
export async function writeDraft(draft: ImportDraft, dir: string): Promise<void> {
  for (const c of draft.copies) {
    const to = path.join(dir, c.to);
    if ('from' in c) {
      await cp(c.from, to, { recursive: true, verbatimSymlinks: true });
      continue;
    }
    // several folders into one, later ones' files over earlier ones'
    await mkdir(to, { recursive: true });
    for (const f of c.merge) await cp(f, to, { recursive: true, force: true, verbatimSymlinks: true });
  }
  for (const f of draft.files) {
    const to = path.join(dir, f.path);
    await mkdir(path.dirname(to), { recursive: true });
    await writeFile(to, f.text);
  }
}

/** the bundle in `dir` must load as the server loads it before it takes DIR's place */
export async function verifyBundle(dir: string): Promise<void> {
  const loaded = await loadBundle(dir);
  await loaded.cleanup();
}

/** puts the written folder in `out`'s place (replacing the bundle there, --force) */
export async function placeBundle(dir: string, out: string): Promise<void> {
  if (await isDir(out)) await rm(out, { recursive: true, force: true });
  await rename(dir, out);
}
