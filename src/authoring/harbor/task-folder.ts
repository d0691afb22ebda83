/**
 * What the import may read of a Harbor task folder: its own regular files and folders, nothing
 * else. Each path is looked at with lstat, one component at a time from the task folder down,
 * before anything is opened: a symbolic link (wherever it points, even inside the task), a FIFO
 * (opening one for reading waits for a writer), a socket or a device is refused by its path, what
 * a link points to is named (and whether it leaves the task), and nothing under it is read. A file
 * is then opened without following a link or waiting, and read only if the open descriptor is a
 * regular file, so one swapped in after the look is refused, not read.
 */
import { constants } from 'node:fs';
import { lstat, open, readdir, readlink, realpath } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import path from 'node:path';
import type { TaskNote } from './task-config.js';

/** what a path of the task is: `refused` when it, or a folder on its way, is none of the task's own files or folders */
export type EntryKind = 'file' | 'dir' | 'missing' | 'refused';

/** what a special file is, in words */
function specialKind(st: Stats): string {
  if (st.isFIFO()) return 'a FIFO (named pipe)';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  return 'neither a file nor a folder';
}

const isInside = (root: string, p: string) => p === root || p.startsWith(root + path.sep);

/**
 * A regular file's bytes, opened without following a final symbolic link and without blocking
 * (a FIFO would wait for a writer), checked on the open descriptor. Null when it is not one.
 */
export async function readRegular(file: string): Promise<Buffer | null> {
  let fh;
  try {
    fh = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    // ELOOP: a symbolic link under O_NOFOLLOW; ENXIO: a socket
    if (['ELOOP', 'ENXIO', 'ENOENT', 'ENOTDIR'].includes((e as NodeJS.ErrnoException).code ?? '')) return null;
    throw e;
  }
  try {
    if (!(await fh.stat()).isFile()) return null;
    return await fh.readFile();
  } finally {
    await fh.close();
  }
}

export class TaskFolder {
  /** every path refused, in the order found, each once */
  readonly refusals: TaskNote[] = [];
  private readonly refused = new Set<string>();

  private constructor(
    /** the task folder, as given (resolved) */
    readonly dir: string,
    /** its real path: where links must stay to be "inside" */
    private readonly real: string,
  ) {}

  static async open(dir: string): Promise<TaskFolder> {
    const resolved = path.resolve(dir);
    return new TaskFolder(resolved, await realpath(resolved));
  }

  /** `rel`'s absolute path (rel: a path of the task, "/"-separated) */
  abs(rel: string): string {
    return path.join(this.dir, ...rel.split('/'));
  }

  /** `abs` as a path of the task, "/"-separated */
  rel(abs: string): string {
    return path.relative(this.dir, abs).split(path.sep).join('/');
  }

  /** what `rel` is, every component looked at with lstat; a component that is none of the task's own files or folders is refused by its path */
  async kind(rel: string): Promise<EntryKind> {
    const parts = rel.split('/');
    if (parts.some((p) => p === '' || p === '.' || p === '..')) throw new Error(`not a plain path of the task: ${JSON.stringify(rel)}`);
    let at = '';
    for (const [i, part] of parts.entries()) {
      at = at ? `${at}/${part}` : part;
      if (this.refused.has(at)) return 'refused';
      const st = await lstat(this.abs(at)).catch((e: NodeJS.ErrnoException) => {
        if (e.code === 'ENOENT' || e.code === 'ENOTDIR') return null;
        throw e;
      });
      const last = i === parts.length - 1;
      if (st === null) return 'missing';
      if (st.isDirectory()) {
        if (last) return 'dir';
      } else if (st.isFile()) {
        return last ? 'file' : 'missing';
      } else {
        await this.refuse(at, st);
        return 'refused';
      }
    }
    return 'dir';
  }

  /** `rel`'s text when it is a regular file of the task, else null (missing, a folder, or refused) */
  async readText(rel: string): Promise<string | null> {
    const data = await this.read(rel);
    return data === null ? null : data.toString('utf8');
  }

  /** `rel`'s bytes when it is a regular file of the task, else null (missing, a folder, or refused) */
  async read(rel: string): Promise<Buffer | null> {
    if ((await this.kind(rel)) !== 'file') return null;
    const data = await readRegular(this.abs(rel));
    if (data === null) {
      // it changed between the look and the open: look again, to say what it is now
      const st = await lstat(this.abs(rel)).catch(() => null);
      if (st && !st.isFile()) await this.refuse(rel, st);
    }
    return data;
  }

  /**
   * The regular files under the folder `rel` (paths relative to it, sorted); every link or special
   * file there is refused by its path and left out. [] when `rel` is not a folder of the task.
   */
  async files(rel: string): Promise<string[]> {
    if ((await this.kind(rel)) !== 'dir') return [];
    const out: string[] = [];
    const walk = async (sub: string): Promise<void> => {
      for (const name of (await readdir(this.abs(sub ? `${rel}/${sub}` : rel))).sort()) {
        const r = sub ? `${sub}/${name}` : name;
        const st = await lstat(this.abs(`${rel}/${r}`));
        if (st.isDirectory()) await walk(r);
        else if (st.isFile()) out.push(r);
        else await this.refuse(`${rel}/${r}`, st);
      }
    };
    await walk('');
    return out;
  }

  private async refuse(rel: string, st: Stats): Promise<void> {
    if (this.refused.has(rel)) return;
    this.refused.add(rel);
    this.refusals.push({
      field: rel,
      message: st.isSymbolicLink() ? await this.linkMessage(rel) : `${specialKind(st)}: the import reads regular files and folders only`,
    });
  }

  /** where a link points, and whether that leaves the task */
  private async linkMessage(rel: string): Promise<string> {
    const abs = this.abs(rel);
    const target = await readlink(abs);
    const resolved = await realpath(abs).catch(() => null);
    if (resolved === null) return `a symbolic link to ${target}, which does not exist: the import copies files and folders only, never links`;
    const shown = resolved === path.resolve(path.dirname(abs), target) ? target : `${target} (${resolved})`;
    if (!isInside(this.real, resolved)) {
      return `a symbolic link to ${shown}, outside the task folder: the import reads only the task's own files and folders`;
    }
    return `a symbolic link to ${shown}, inside the task: the import copies files and folders only, never links; put the file or folder itself there`;
  }
}
