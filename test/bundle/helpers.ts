/** Builders for bundles and archives that the bundle tests write into temporary folders. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { Header, Pax } from 'tar';
import { BundleError } from '../../src/bundle/index.js';

export const FIXTURES = path.join(import.meta.dirname, 'fixtures');
export const MINI = path.join(FIXTURES, 'mini');

const made: string[] = [];

/** A fresh temporary folder, removed by `removeTempDirs()`. */
export function tempDir(prefix = 'bundle-test-'): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  made.push(dir);
  return dir;
}

export function removeTempDirs(): void {
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
}

/** A valid manifest: one split, one built env, one toolset with one tool. */
export function baseManifest(): Record<string, unknown> {
  return {
    name: 'test-bundle',
    version: '1.0.0',
    description: 'A bundle written by a test.',
    default_split: 'train',
    splits: { train: 'tasks/train.jsonl' },
    envs: { e: { build: 'envs/e' } },
    toolsets: { ts: { env: 'e', tools: [{ name: 'look', description: 'Look around.', input_schema: { type: 'object' } }] } },
  };
}

/** A valid task row. */
export function row(taskId: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { task_id: taskId, toolset: 'ts', system_prompt: 'You are tested.', turns: ['Go.'], ...extra };
}

export interface BundleSpec {
  /** the manifest as an object, or bundle.json's raw text */
  manifest?: Record<string, unknown> | string;
  /** split file (relative path) → lines: objects are JSON-encoded, strings written as they are */
  tasks?: Record<string, (Record<string, unknown> | unknown[] | string)[]>;
  /** extra files, relative path → content */
  files?: Record<string, string>;
}

/** Writes a bundle folder (default: the valid base bundle with two tasks) and returns its path. */
export function writeBundle(spec: BundleSpec = {}, into = tempDir()): string {
  const manifest = spec.manifest ?? baseManifest();
  const files: Record<string, string> = {
    'bundle.json': typeof manifest === 'string' ? manifest : JSON.stringify(manifest, null, 2),
    'envs/e/Dockerfile': 'FROM scratch\n',
    ...spec.files,
  };
  const tasks = spec.tasks ?? { 'tasks/train.jsonl': [row('t-0'), row('t-1')] };
  for (const [file, lines] of Object.entries(tasks)) {
    files[file] = lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n';
  }
  for (const [rel, content] of Object.entries(files)) {
    const p = path.join(into, rel);
    mkdirSync(path.dirname(p), { recursive: true });
    writeFileSync(p, content);
  }
  return into;
}

/** Awaits a promise that must reject with a BundleError, and returns that error. */
export async function bundleError(p: Promise<unknown>): Promise<BundleError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof BundleError) return err;
    throw err;
  }
  throw new Error('expected a BundleError, but the promise resolved');
}

export interface TarEntry {
  path: string;
  type?: 'File' | 'Directory' | 'SymbolicLink' | 'Link' | 'CharacterDevice' | 'BlockDevice' | 'FIFO' | 'SparseFile' | 'GNUDumpDir';
  /** PAX extended-header fields that override the ustar header's (e.g. a long path) */
  pax?: { path?: string; linkpath?: string };
  body?: string | Buffer;
  linkpath?: string;
  mode?: number;
}

/**
 * A .tar.gz written header by header, so that it can hold what `tar.c` would refuse or rewrite
 * (absolute paths, `..`, links, devices).
 */
export function tarGz(entries: TarEntry[], { truncate = false } = {}): Buffer {
  const blocks: Buffer[] = [];
  for (const e of entries) {
    const type = e.type ?? 'File';
    const body = Buffer.from(e.body ?? '');
    const header = new Header({
      path: e.path,
      type,
      size: type === 'File' ? body.length : 0,
      mode: e.mode ?? (type === 'Directory' ? 0o755 : 0o644),
      uid: 0,
      gid: 0,
      mtime: new Date(0),
      ...(e.linkpath !== undefined ? { linkpath: e.linkpath } : {}),
    });
    if (e.pax) blocks.push(new Pax({ ...e.pax, mtime: new Date(0) }).encode());
    const block = Buffer.alloc(512);
    header.encode(block);
    blocks.push(block);
    if (type === 'File' && body.length > 0) blocks.push(body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  let tar = Buffer.concat(blocks);
  if (truncate) tar = tar.subarray(0, 512 + 100);
  return gzipSync(tar);
}
