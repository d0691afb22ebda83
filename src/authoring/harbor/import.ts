/**
 * `openenv-bundle import harbor SRC… --out DIR`: Harbor tasks (a task folder, or a dataset folder
 * of them) written as an ordinary bundle (docs/harbor.md, "import"), in named steps: read (read.ts:
 * the task folders, their solutions, the images the engine has) → map (map.ts, pure: a typed draft
 * of the bundle, draft.ts) → write → verify (write.ts: written to a temporary folder beside DIR,
 * loaded as the server loads it, then renamed into place once whole).
 */
import { mkdir, readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { NAME_PATTERN } from '../../bundle/index.js';
import { aggregate, evalSet, mapTasks, slug } from './map.js';
import { ImportError, type ImportOptions, type ImportResult } from './options.js';
import { isDir, missingImages, readSolutions, readTasks } from './read.js';
import { placeBundle, verifyBundle, writeDraft } from './write.js';

export { ImportError, type AggregatedNote, type ImportOptions, type ImportResult } from './options.js';

/** DIR must be new, empty, or (--force) a bundle to replace */
async function checkOut(out: string, given: string, force: boolean): Promise<void> {
  if (await isDir(out)) {
    const entries = await readdir(out);
    if (entries.length > 0 && !(force && entries.includes('bundle.json'))) {
      throw new ImportError(`${given} exists and is not empty${entries.includes('bundle.json') ? ': it holds a bundle; --force replaces it' : ''}`);
    }
  } else if (await stat(out).catch(() => null)) {
    throw new ImportError(`${given} exists and is not a folder`);
  }
}

export async function importHarbor(opts: ImportOptions): Promise<ImportResult> {
  const name = opts.name ?? slug(path.basename(path.resolve(opts.out)));
  if (!NAME_PATTERN.test(name)) throw new ImportError(`the bundle name ${JSON.stringify(name)} must match ${NAME_PATTERN.source}: give --name`);
  const out = path.resolve(opts.out);
  await checkOut(out, opts.out, opts.force);

  // read
  const { tasks: read, engineAnswers } = await readTasks(opts);
  const refused = read.filter((r) => r.task.refusals.length > 0).map((r) => ({ id: r.task.id, findings: r.task.refusals }));
  const accepted = read.filter((r) => r.task.refusals.length === 0);
  const notes = aggregate(accepted.map((r) => r.task));
  const base: Omit<ImportResult, 'missingImages' | 'written' | 'tasks'> = { out, bundle: name, refused, notes };
  const missing = await missingImages(
    accepted.map((r) => r.task),
    opts,
    engineAnswers,
  );
  if ((refused.length > 0 && !opts.skipRefused) || accepted.length === 0) {
    return { ...base, tasks: [], missingImages: missing, written: false };
  }
  const evalIds = evalSet(
    accepted.map((r) => r.task.id),
    opts,
  );
  for (const r of accepted) r.solutions = await readSolutions(r.task.turns);

  // map: the typed draft, without a disk
  const draft = mapTasks(accepted, {
    name,
    ...(opts.version !== undefined ? { version: opts.version } : {}),
    sources: opts.sources.map((s) => path.basename(path.resolve(s))),
    evalIds,
    ...(opts.agent !== undefined ? { agent: opts.agent } : {}),
    buildWithNetwork: opts.buildWithNetwork === true,
  });

  // write, verify, put in place
  const tmp = path.join(path.dirname(out), `.${path.basename(out)}.import-${process.pid}-${Date.now()}`);
  await mkdir(tmp, { recursive: true });
  try {
    await writeDraft(draft, tmp);
    await verifyBundle(tmp);
    await placeBundle(tmp, out);
    return { ...base, notes: [...notes, ...draft.notes], tasks: draft.tasks, missingImages: missing, written: true };
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}
