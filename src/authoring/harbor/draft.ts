/**
 * The typed draft of an imported bundle: what the map (map.ts) makes of the read tasks and the
 * write (write.ts) puts on disk. Its manifest, rows and their parts are the bundle format's own
 * input types (src/bundle/schema.ts), so a field the format does not have is a type error here.
 */
import type { z } from 'zod';
import type {
  EnvManifestSchema,
  GoldenStepSchema,
  ManifestSchema,
  SidecarSchema,
  TaskLineSchema,
  TurnSpecSchema,
  VerifierSchema,
} from '../../bundle/schema.js';
import type { AggregatedNote, ImportedTask } from './options.js';

/** the bundle format's schemas of what the import writes, by the part they declare */
interface DraftSchemas {
  /** bundle.json */
  manifest: typeof ManifestSchema;
  /** one env of bundle.json */
  env: typeof EnvManifestSchema;
  /** one sidecar of an env */
  sidecar: typeof SidecarSchema;
  /** one row of a split's JSONL file */
  row: typeof TaskLineSchema;
  verifier: typeof VerifierSchema;
  turn: typeof TurnSpecSchema;
  golden: typeof GoldenStepSchema;
}

/** a part of the bundle as written: its schema's input type (defaults left to the loader) */
export type Draft<K extends keyof DraftSchemas> = z.input<DraftSchemas[K]>;

/**
 * A folder of the task copied into the bundle: `from` copied to `to` (a new folder), or the
 * `merge` folders copied one over another into `to` (later ones' files over earlier ones').
 * Paths: `from`/`merge` absolute (the task's), `to` relative to the bundle's folder.
 */
export type FolderCopy = { to: string; from: string } | { to: string; merge: string[] };

/** a text file of the bundle: its path relative to the bundle's folder */
export interface FileDraft {
  path: string;
  text: string;
}

export interface ImportDraft {
  manifest: Draft<'manifest'>;
  /** split name → its rows, in the order written */
  rows: Record<'train' | 'eval', Draft<'row'>[]>;
  /** folders copied in, before the files are written (a Dockerfile written over a copied context's) */
  copies: FolderCopy[];
  /** the files written after the copies: the mapped Dockerfiles, the splits, bundle.json, README.md */
  files: FileDraft[];
  tasks: ImportedTask[];
  /** the notes the map adds to the read ones: a task left without a golden solution, the multi-step caveat */
  notes: AggregatedNote[];
}
