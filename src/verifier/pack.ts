/** A folder of this machine as a tar archive for the engine's archive API, its entries under a prefix. */
import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';
import * as tar from 'tar';

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

/** `dir`'s files and folders, as `prefix/…` entries (or at the archive's root for prefix ''), modes kept, owned by root */
export async function packFolder(dir: string, prefix: string): Promise<Buffer> {
  const list = await entries(dir);
  // an empty archive: two zero blocks
  if (list.length === 0) return Buffer.alloc(1024);
  const chunks: Buffer[] = [];
  const stream = tar.c({ cwd: dir, portable: true, noDirRecurse: true, follow: false, ...(prefix ? { prefix } : {}) }, list);
  for await (const chunk of stream as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks);
}
