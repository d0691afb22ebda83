/** A folder of this machine as a tar archive for the engine's archive API, its entries under a prefix, streamed. */
import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import * as tar from 'tar';
import type { ContainerExec } from '../sandbox/container-exec.js';
import { runTrusted } from './run.js';

/** every entry of `dir`, relative, sorted; symbolic links and special files are refused (naming them) */
async function entries(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (rel: string): Promise<void> => {
    for (const name of (await readdir(path.join(dir, rel))).sort()) {
      const r = rel ? `${rel}/${name}` : name;
      const st = await lstat(path.join(dir, r));
      if (st.isDirectory()) {
        out.push(r);
        await walk(r);
      } else if (st.isFile()) {
        out.push(r);
      } else {
        throw new Error(`${path.join(dir, r)} is neither a file nor a folder (symbolic links are not copied into a container)`);
      }
    }
  };
  await walk('');
  return out;
}

/**
 * `dir`'s files and folders as a tar stream, `prefix/…` entries (or at the archive's root for
 * prefix ''), modes kept, owned by root. Streamed as the engine takes it: a large folder (a task's
 * tests with their data) is never held in memory whole.
 */
export async function packFolder(dir: string, prefix: string): Promise<NodeJS.ReadableStream> {
  const list = await entries(dir);
  // an empty archive: two zero blocks
  if (list.length === 0) return Readable.from([Buffer.alloc(1024)]);
  return tar.c({ cwd: dir, portable: true, noDirRecurse: true, follow: false, ...(prefix ? { prefix } : {}) }, list) as unknown as NodeJS.ReadableStream;
}

/** a stream's bytes, at most `max` (more is an error saying what) */
async function collect(stream: NodeJS.ReadableStream, max: number, what: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of stream as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > max) throw new Error(`${what} is larger than ${max} bytes`);
    chunks.push(c);
  }
  return Buffer.concat(chunks);
}

/** the most a folder copied into a container as a user may hold (a turn's upload, a harness's files) */
export const USER_COPY_MAX_BYTES = 256 * 1024 * 1024;

/**
 * Copies `local`'s files into the folder `dir` of the container (made if missing) as `user`
 * (uid:gid, or '0'): the toolbox's tar extracts them, so the kernel checks every write as it would
 * the user's own, and a link the agent left in `dir` leads nowhere the user could not write
 * anyway. (The engine's archive API writes as root, following such links.)
 */
export async function copyInAs(exec: ContainerExec, local: string, dir: string, user: string | null): Promise<void> {
  const archive = await collect(await packFolder(local, ''), USER_COPY_MAX_BYTES, `the folder ${local}`);
  const r = await runTrusted(exec, 'openenv-copy-in', 'mkdir -p -- "$1" && cd -- "$1" && tar -x -f -', [dir], {
    ...(user === null ? { imageUser: true } : { user }),
    stdin: archive,
  });
  if (r.exitCode !== 0) throw new Error(`could not copy ${local} into ${dir} in the container: ${r.stderr || `exit code ${r.exitCode}`}`);
}
