/**
 * The toolbox's binary (src/sandbox/engine/toolbox-volume.ts): a static ELF of the engine's
 * architecture is taken; a dynamic one, something else, or nothing is refused, saying what to
 * install; and the command the server runs it with.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, copyFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { elfFacts, findToolboxBinary } from '../../src/sandbox/engine/toolbox-volume.js';
import { commandAsUser, isRootUser, keeperCommand, newToolboxDir, toolboxCommand } from '../../src/sandbox/toolbox.js';

/** a 64-bit little-endian ELF header with one program header: PT_INTERP (3) or PT_LOAD (1) */
function elf(machine: number, interp: boolean): Buffer {
  const b = Buffer.alloc(64 + 56);
  b.writeUInt32BE(0x7f454c46, 0);
  b[4] = 2;
  b[5] = 1;
  b.writeUInt16LE(machine, 18);
  b.writeBigUInt64LE(64n, 32);
  b.writeUInt16LE(56, 54);
  b.writeUInt16LE(1, 56);
  b.writeUInt32LE(interp ? 3 : 1, 64);
  return b;
}

describe('the toolbox binary', () => {
  it('reads whether an ELF asks for a loader, and its machine', () => {
    expect(elfFacts(elf(62, false))).toEqual({ static: true, machine: 62 });
    expect(elfFacts(elf(183, true))).toEqual({ static: false, machine: 183 });
    expect(elfFacts(Buffer.from('#!/bin/sh\necho hi\n'))).toBeNull();
  });

  it("takes a static one of the engine's architecture, and refuses others saying what to install", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'toolbox-'));
    const files = { good: elf(62, false), dynamic: elf(62, true), arm: elf(183, false), script: Buffer.from('#!/bin/sh\n') };
    for (const [name, bytes] of Object.entries(files)) writeFileSync(path.join(dir, name), bytes);
    const found = await findToolboxBinary(path.join(dir, 'good'), 'x86_64');
    expect(found.hash).toMatch(/^[0-9a-f]{12}$/);
    await expect(findToolboxBinary(path.join(dir, 'dynamic'), 'x86_64')).rejects.toThrow(/dynamically linked .*busybox-static/);
    await expect(findToolboxBinary(path.join(dir, 'arm'), 'x86_64')).rejects.toThrow(/ELF machine 183, and the engine runs x86_64/);
    await expect(findToolboxBinary(path.join(dir, 'script'), 'x86_64')).rejects.toThrow(/not a 64-bit ELF/);
    await expect(findToolboxBinary(path.join(dir, 'missing'), 'x86_64')).rejects.toThrow(/no such file.*apt-get install busybox-static/);
  });

  it.runIf(existsSync('/bin/busybox'))("takes this machine's Debian busybox-static", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'toolbox-'));
    copyFileSync('/bin/busybox', path.join(dir, 'busybox'));
    await expect(findToolboxBinary(path.join(dir, 'busybox'), 'x86_64')).resolves.toMatchObject({ path: path.join(dir, 'busybox') });
  });

  it("runs the server's steps by absolute path, with an empty environment and only its own folder on PATH; the keeper ignores what it can", () => {
    const dir = newToolboxDir();
    expect(dir).toMatch(/^\/\.openenv-toolbox-[0-9a-f]{12}$/);
    expect(newToolboxDir()).not.toBe(dir);
    const bin = `${dir}/busybox`;
    expect(toolboxCommand(bin, 'openenv-x', 'echo hi', ['a'])).toEqual([bin, 'env', '-i', `PATH=${dir}`, bin, 'sh', '-c', 'echo hi', 'openenv-x', 'a']);
    const keeper = keeperCommand(bin);
    expect(keeper.slice(0, 3)).toEqual([bin, 'sh', '-c']);
    expect(keeper[3]).toMatch(/^trap "" HUP INT QUIT PIPE ALRM TERM/);
  });
});

describe("a non-root user's command", () => {
  it('is root by uid 0 or the name root, whatever the group; anything else goes through the toolbox', () => {
    for (const u of ['0', '0:0', 'root', 'root:root', '0:1000']) expect(isRootUser(u), u).toBe(true);
    for (const u of [undefined, '', '1000', '1000:0', 'agent', 'rooted']) expect(isRootUser(u), String(u)).toBe(false);
    const box = '/.openenv-toolbox-abc/busybox';
    expect(commandAsUser(box, [box, 'env', '-i', 'true'])).toEqual([box, 'env', '-i', 'true']);
    expect(commandAsUser(box, ['bash', '-c', 'echo hi']).slice(-3)).toEqual(['bash', '-c', 'echo hi']);
  });

  // the host's busybox stands for the toolbox (CI installs busybox-static; a skip fails a CI run)
  const HOST_BUSYBOX = ['/bin/busybox', '/usr/bin/busybox'].find((p) => existsSync(p));
  it.skipIf(!HOST_BUSYBOX)('execs the program it finds on PATH by its absolute path, not the toolbox applet of that name; says what it cannot find', () => {
    const box = HOST_BUSYBOX!;
    const run = (cmd: string[], PATH: string) => spawnSync(cmd[0]!, cmd.slice(1), { env: { PATH }, encoding: 'utf8' });
    const dir = mkdtempSync(path.join(os.tmpdir(), 'as-user-'));
    writeFileSync(path.join(dir, 'cat'), '#!/bin/sh\necho "the image\'s cat: $0 $*"\n', { mode: 0o755 });
    const found = run(commandAsUser(box, ['cat', 'x']), `${dir}:/usr/bin:/bin`);
    expect([found.status, found.stdout]).toEqual([0, `the image's cat: ${dir}/cat x\n`]);
    const absolute = run(commandAsUser(box, [path.join(dir, 'cat'), 'y']), '/nowhere');
    expect(absolute.stdout).toBe(`the image's cat: ${dir}/cat y\n`);
    const missing = run(commandAsUser(box, ['no-such-program']), dir);
    expect([missing.status, missing.stderr]).toEqual([127, 'no-such-program: not found on PATH\n']);
  });
});
