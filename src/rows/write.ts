/**
 * Writes a set of files into a folder so that a failure leaves no half-written file: each is
 * written in full to a temporary file beside its target, and only when all are written are
 * they renamed into place (a rename is atomic). On failure the temporary files are removed and
 * whatever the folder held before is left as it was.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, open, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';

/** OUT cannot be written: one line (a command exits 1 with it). */
export class OutputError extends Error {
  override readonly name = 'OutputError';
}

export interface OutFile {
  name: string;
  lines: readonly string[];
}

function reason(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  const byCode: Record<string, string> = {
    EACCES: 'permission denied',
    EPERM: 'permission denied',
    EROFS: 'read-only file system',
    ENOTDIR: 'a part of the path is a file, not a folder',
    EISDIR: 'the target is a folder',
    ENOSPC: 'no space left on the device',
    EEXIST: 'it exists and is not a folder',
  };
  return (err.code && byCode[err.code]) ?? err.message;
}

/** Creates OUT if needed and proves it takes files, before anything is fetched. */
export async function prepareOut(out: string): Promise<void> {
  try {
    await mkdir(out, { recursive: true });
    const st = await stat(out);
    if (!st.isDirectory()) throw Object.assign(new Error('not a folder'), { code: 'EEXIST' });
    const probe = path.join(out, `.rows-probe-${process.pid}-${randomBytes(4).toString('hex')}`);
    const fh = await open(probe, 'wx');
    await fh.close();
    await rm(probe, { force: true });
  } catch (e) {
    throw new OutputError(`cannot write to ${out}: ${reason(e)}`);
  }
}

export async function writeAtomically(out: string, files: readonly OutFile[]): Promise<void> {
  const temps: string[] = [];
  try {
    const tag = `${process.pid}-${randomBytes(4).toString('hex')}`;
    for (const f of files) {
      const tmp = path.join(out, `.${f.name}.${tag}.tmp`);
      temps.push(tmp);
      const fh = await open(tmp, 'wx', 0o644);
      try {
        // in chunks: a large split is never one giant string
        for (let i = 0; i < f.lines.length; i += 500) {
          await fh.write(
            f.lines
              .slice(i, i + 500)
              .map((l) => `${l}\n`)
              .join(''),
          );
        }
        await fh.sync();
      } finally {
        await fh.close();
      }
    }
    // a target that is a folder would fail its rename after others succeeded: refuse up front
    for (const f of files) {
      const st = await stat(path.join(out, f.name)).catch(() => null);
      if (st && !st.isFile()) throw Object.assign(new Error(`${f.name} exists and is not a file`), { code: 'EISDIR', path: f.name });
    }
    for (let i = 0; i < files.length; i++) {
      await rename(temps[i]!, path.join(out, files[i]!.name));
    }
  } catch (e) {
    await Promise.all(temps.map((t) => rm(t, { force: true }).catch(() => undefined)));
    const err = e as NodeJS.ErrnoException;
    const which = err.code === 'EISDIR' && typeof err.path === 'string' ? `${path.basename(err.path)}: ` : '';
    throw new OutputError(`cannot write to ${out}: ${which}${reason(e)}; nothing was written`);
  }
}
