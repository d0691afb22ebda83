/**
 * One path of a container read through the engine's archive API, from the host: what the path is
 * (the engine archives a link, a pipe or a folder as what it is, never following or opening it)
 * and, for a regular file, its first bytes. For what the server must read whatever the processes
 * in the container did to it (a verifier's reward file): nothing in the container runs to read it,
 * a FIFO cannot block it, a link cannot send it elsewhere, a huge file costs only its first bytes.
 */
import * as tar from 'tar';
import type { ContainerExec } from '../sandbox/container-exec.js';

export type EntryKind = 'file' | 'dir' | 'symlink' | 'fifo' | 'other';

export interface ArchivedPath {
  kind: EntryKind;
  /** its size, for a file */
  size: number;
  /** a file's first `max` bytes (empty for anything else) */
  data: Buffer;
}

/** what a tar entry of this type is (node-tar's type names) */
export function entryKind(type: string): EntryKind {
  if (type === 'File' || type === 'OldFile' || type === 'ContiguousFile') return 'file';
  if (type === 'Directory') return 'dir';
  if (type === 'SymbolicLink' || type === 'Link') return 'symlink';
  if (type === 'FIFO') return 'fifo';
  return 'other';
}

/** What is at `p` and, for a file, its first `max` bytes; null when nothing is there. */
export async function readArchivedPath(exec: ContainerExec, p: string, max: number): Promise<ArchivedPath | null> {
  if ((await exec.stat(p)) === null) return null;
  const archive = await exec.getArchive(p);
  return new Promise<ArchivedPath | null>((resolve, reject) => {
    let settled = false;
    const chunks: Buffer[] = [];
    let got = 0;
    let found: ArchivedPath | null = null;
    const settle = (e?: Error) => {
      if (settled) return;
      settled = true;
      archive.destroy();
      if (e) reject(e);
      else resolve(found ? { ...found, data: Buffer.concat(chunks) } : null);
    };
    const parser = new tar.Parser({
      onReadEntry: (entry) => {
        if (found) {
          // only the first entry is the path itself (a folder's contents follow it)
          settle();
          return;
        }
        found = { kind: entryKind(entry.type), size: entry.size, data: Buffer.alloc(0) };
        if (found.kind !== 'file') {
          settle();
          return;
        }
        entry.on('data', (c: Buffer) => {
          if (got < max) chunks.push(Buffer.from(c.subarray(0, max - got)));
          got += c.length;
          if (got >= max) settle();
        });
        entry.on('end', () => settle());
      },
    });
    parser.on('error', (e: Error) => settle(e));
    parser.on('end', () => settle());
    archive.on('error', (e: Error) => settle(e));
    archive.on('end', () => parser.end());
    archive.on('data', (c: Buffer) => {
      if (!settled) parser.write(c);
    });
  });
}
