/** What `import harbor` is asked (ImportOptions) and answers (ImportResult), and the error of a command line or source to fix. */
import type { BaseImageRule } from './dockerfile.js';
import type { ImagesChoice } from './read-task.js';
import type { TaskNote } from './task-config.js';

/** A command line or source to fix: nothing was written. */
export class ImportError extends Error {
  override readonly name = 'ImportError';
}

export interface ImportOptions {
  sources: string[];
  out: string;
  /** the bundle's name; default: DIR's name */
  name?: string;
  version?: string;
  /** the share of tasks put in the eval split (chosen by a hash of their ids) */
  evalShare?: number;
  /** task ids put in the eval split */
  evalTasks?: string[];
  baseImages: BaseImageRule[];
  /** the harness every task runs (the bundle's `harness`: `sh -c AGENT`), making them harness episodes */
  agent?: string;
  ignoreInternet: boolean;
  /** build the tasks' images with the engine's network (their RUN steps download); default: without network */
  buildWithNetwork?: boolean;
  /** import the tasks that can be, leaving out (and listing) the refused ones */
  skipRefused: boolean;
  /** replace DIR when it holds a bundle already */
  force: boolean;
  /** a task with both a docker_image and environment/Dockerfile: which its env is (read-task.ts, IMAGE_CHOICES); default auto */
  images?: ImagesChoice;
  /** which images the engine has; null when no engine answers (nothing checked) */
  hasImages?: (refs: string[]) => Promise<Set<string> | null>;
}

export interface AggregatedNote {
  field: string;
  message: string;
  tasks: string[];
}

/** one imported task, as the import lists it */
export interface ImportedTask {
  id: string;
  split: string;
  turns: number;
  env: string;
  golden: boolean;
  image: 'docker_image' | 'Dockerfile';
}

/** an image the envs need that the engine does not have (`base`: a Dockerfile's FROM; `task`: a task's own docker_image) */
export interface MissingImage {
  image: string;
  kind: 'base' | 'task';
  tasks: string[];
}

export interface ImportResult {
  out: string;
  bundle: string;
  tasks: ImportedTask[];
  refused: { id: string; findings: TaskNote[] }[];
  notes: AggregatedNote[];
  /** images the envs need that the engine does not have; null: not checked (no engine) */
  missingImages: MissingImage[] | null;
  written: boolean;
}
