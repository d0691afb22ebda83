/**
 * The toolbox's volume (src/sandbox/toolbox.ts says what the toolbox is for): one per server
 * instance on an engine, filled with the server's static busybox and mounted read-only into every
 * env container the instance deploys. It is filled through a container of a one-file image
 * (`openenv-bundle/toolbox:<hash>`, imported from the binary: no registry, no base image), never
 * started: the archive API writes into the volume mounted in it. It is labelled with the instance
 * and removed when the sandbox closes, by the next start of the instance, or by the sweep of dead
 * instances; an instance that restarts finds its volume, checks what it holds and reuses it.
 *
 * The binary: `--toolbox PATH`, else the first of TOOLBOX_CANDIDATES that exists. It must be a
 * statically linked ELF executable (a dynamic one would load the image's libraries, and honour
 * its /etc/ld.so.preload) of the engine's architecture; anything else is refused, saying what to
 * install.
 */
import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type Dockerode from 'dockerode';
import { singleFileTar } from '../container-exec.js';
import { LABELS, SandboxError } from '../sandbox.js';
import { TOOLBOX_BINARY } from '../toolbox.js';
import { engineMessage, isConflict, isNotFound, removeOrGone, toSandboxError } from './errors.js';
import type { SandboxLogger } from './logger.js';

/** the label that marks a toolbox volume (its value: the binary's hash) */
export const TOOLBOX_LABEL = 'io.openenv.bundle-server.toolbox';

/** where the server looks for its busybox when --toolbox names none (a server image puts one at the first) */
export const TOOLBOX_CANDIDATES = [
  path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../toolbox/busybox'),
  '/usr/lib/openenv/busybox',
  '/bin/busybox',
  '/usr/bin/busybox',
] as const;

const INSTALL_HINT =
  "install Debian's busybox-static (apt-get install busybox-static: a static /bin/busybox), or point --toolbox at a statically linked busybox";

/** ELF machine numbers of the engine architectures a server meets */
const ELF_MACHINES: Record<string, number> = { x86_64: 62, amd64: 62, aarch64: 183, arm64: 183 };

export interface ToolboxBinary {
  path: string;
  bytes: Buffer;
  /** 12 hex of its sha256: names its image and marks its volume */
  hash: string;
}

/**
 * What an ELF file says of itself: whether it is an executable without a program interpreter
 * (statically linked) and its machine; null when the bytes are not a 64-bit little-endian ELF.
 */
export function elfFacts(bytes: Buffer): { static: boolean; machine: number } | null {
  if (bytes.length < 64 || bytes.readUInt32BE(0) !== 0x7f454c46 || bytes[4] !== 2 || bytes[5] !== 1) return null;
  const machine = bytes.readUInt16LE(18);
  const phoff = Number(bytes.readBigUInt64LE(32));
  const phentsize = bytes.readUInt16LE(54);
  const phnum = bytes.readUInt16LE(56);
  let interp = false;
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize;
    if (at + 4 > bytes.length) return null;
    // PT_INTERP: the program asks for a dynamic loader
    if (bytes.readUInt32LE(at) === 3) interp = true;
  }
  return { static: !interp, machine };
}

/** Finds and checks the toolbox binary; rejects with a SandboxError (engine_failed) saying what to do. */
export async function findToolboxBinary(explicit: string | undefined, engineArch: string): Promise<ToolboxBinary> {
  const candidates = explicit ? [explicit] : [...TOOLBOX_CANDIDATES];
  const refused: string[] = [];
  for (const p of candidates) {
    const st = await stat(p).catch(() => null);
    if (!st) {
      if (explicit) refused.push(`${p}: no such file`);
      continue;
    }
    if (!st.isFile()) {
      refused.push(`${p}: not a file`);
      continue;
    }
    const bytes = await readFile(p);
    const elf = elfFacts(bytes);
    if (!elf) refused.push(`${p}: not a 64-bit ELF executable`);
    else if (!elf.static) refused.push(`${p}: dynamically linked (Debian's "busybox" package; the static one is "busybox-static")`);
    else if (ELF_MACHINES[engineArch] !== undefined && ELF_MACHINES[engineArch] !== elf.machine)
      refused.push(`${p}: built for ELF machine ${elf.machine}, and the engine runs ${engineArch}`);
    else return { path: p, bytes, hash: createHash('sha256').update(bytes).digest('hex').slice(0, 12) };
  }
  throw new SandboxError(
    'engine_failed',
    `no toolbox for the server's steps inside envs (the shell tools, verifiers): ${refused.length ? refused.join('; ') : `none of ${candidates.join(', ')} exists`}. ` +
      `The server runs its own static busybox there, never the image's binaries (docs/security.md): ${INSTALL_HINT}`,
  );
}

/** the archive of one file, `busybox`, executable by all, owned by root */
function binaryArchive(bytes: Buffer): Buffer {
  return singleFileTar(TOOLBOX_BINARY, bytes, { mode: 0o555, uid: 0, gid: 0 });
}

export class ToolboxVolume {
  private ready: Promise<string> | null = null;
  readonly name: string;

  constructor(
    private readonly docker: Dockerode,
    private readonly instance: string,
    private readonly binary: ToolboxBinary,
    private readonly log: SandboxLogger,
  ) {
    this.name = `openenv-toolbox-${instance}`;
  }

  /** the volume's name once it holds the binary (made on the first call; later calls share it) */
  ensure(): Promise<string> {
    this.ready ??= this.make().catch((err: unknown) => {
      this.ready = null;
      throw err instanceof SandboxError ? err : toSandboxError(err, 'preparing the toolbox volume');
    });
    return this.ready;
  }

  private get image(): string {
    return `openenv-bundle/toolbox:${this.binary.hash}`;
  }

  private async make(): Promise<string> {
    const existing = await this.docker
      .getVolume(this.name)
      .inspect()
      .catch((err: unknown) => {
        if (isNotFound(err)) return null;
        throw err;
      });
    if (existing && existing.Labels?.[TOOLBOX_LABEL] === this.binary.hash && (await this.holdsBinary())) return this.name;
    if (existing) await this.remove();
    await this.docker.createVolume({
      Name: this.name,
      Labels: { [LABELS.managed]: '1', [LABELS.instance]: this.instance, [TOOLBOX_LABEL]: this.binary.hash },
    });
    await this.fill();
    this.log.info({ volume: this.name, binary: this.binary.path, hash: this.binary.hash }, 'toolbox volume ready');
    return this.name;
  }

  /** a never-started container of the one-file image, the volume mounted in it */
  private async withFiller<T>(fn: (c: Dockerode.Container) => Promise<T>): Promise<T> {
    await this.ensureImage();
    const filler = await this.docker.createContainer({
      Image: this.image,
      Cmd: [`/${TOOLBOX_BINARY}`, 'true'],
      Labels: { [LABELS.managed]: '1', [LABELS.instance]: this.instance, [TOOLBOX_LABEL]: this.binary.hash },
      NetworkDisabled: true,
      HostConfig: { Mounts: [{ Type: 'volume', Source: this.name, Target: '/toolbox' }], NetworkMode: 'none' },
    });
    try {
      return await fn(filler);
    } finally {
      await removeOrGone(() => filler.remove({ force: true }), isConflict).catch(() => undefined);
    }
  }

  private async fill(): Promise<void> {
    await this.withFiller(async (c) => {
      await c.putArchive(binaryArchive(this.binary.bytes), { path: '/toolbox' });
    });
    if (!(await this.holdsBinary())) throw new SandboxError('engine_failed', `the toolbox volume ${this.name} did not take the binary`);
  }

  /** the volume holds the binary, whole */
  private async holdsBinary(): Promise<boolean> {
    return this.withFiller(async (c) => {
      try {
        const res = (await c.infoArchive({ path: `/toolbox/${TOOLBOX_BINARY}` })) as { headers?: Record<string, string>; resume?: () => void };
        // the answer read to its end: an unread one holds its connection (and the process) open
        res.resume?.();
        const header = res.headers?.['x-docker-container-path-stat'];
        if (!header) return false;
        const st = JSON.parse(Buffer.from(header, 'base64').toString('utf8')) as { size: number };
        return st.size === this.binary.bytes.length;
      } catch {
        return false;
      }
    });
  }

  private async ensureImage(): Promise<void> {
    try {
      await this.docker.getImage(this.image).inspect();
      return;
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    const [repo, tag] = this.image.split(':');
    // the engine takes the archive as the image's one layer (POST /images/create?fromSrc=-)
    const stream = (await this.docker.importImage(binaryArchive(this.binary.bytes) as unknown as NodeJS.ReadableStream, {
      repo,
      tag,
    })) as NodeJS.ReadableStream;
    const said: string[] = [];
    await new Promise<void>((resolve, reject) => {
      stream.on('data', (c: Buffer) => said.push(c.toString()));
      stream.on('end', () => resolve());
      stream.on('error', reject);
    });
    const error = said.join('').match(/"error"\s*:\s*"([^"]*)"/);
    if (error) throw new SandboxError('engine_failed', `the engine did not import the toolbox image: ${error[1]}`);
  }

  /** removes the volume; one in use (a container of another server still mounts it) or gone is left as it is */
  async remove(): Promise<void> {
    this.ready = null;
    await removeOrGone(() => this.docker.getVolume(this.name).remove(), isConflict).catch((err: unknown) =>
      this.log.warn({ volume: this.name, err: engineMessage(err) }, 'could not remove the toolbox volume'),
    );
  }
}

/** Removes the toolbox volumes of `instance` (a dead one's, found by its label). */
export async function removeToolboxVolumes(docker: Dockerode, instance: string): Promise<string[]> {
  const { Volumes } = await docker.listVolumes({ filters: JSON.stringify({ label: [`${LABELS.instance}=${instance}`, TOOLBOX_LABEL] }) });
  const names = (Volumes ?? []).map((v) => v.Name);
  await Promise.all(names.map((n) => removeOrGone(() => docker.getVolume(n).remove(), isConflict)));
  return names;
}
