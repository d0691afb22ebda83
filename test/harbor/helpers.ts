/** Shared by the Harbor tests: the local Debian base the shipped dataset builds FROM, and the dataset's place. */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import type { EnvRuntime } from '../../src/sandbox/sandbox.js';
import { ShellToolset } from '../../src/tools/shell/index.js';
import { startShellContainer, type ShellContainer } from '../support/shell-container.js';

export const LOCAL_DEBIAN_IMAGE = process.env.OPENENV_TEST_DEBIAN_IMAGE ?? 'openenv-local/debian:bookworm';
export const DATASET = path.resolve(import.meta.dirname, '../../datasets/openenv-harbor-v1');
export const BASE_IMAGE_RULE = `debian:bookworm=${LOCAL_DEBIAN_IMAGE}`;

/** makes the local Debian base when the engine lacks it (docker/make-local-debian-base.sh: idempotent) */
export function ensureDebianBase(): void {
  execFileSync('bash', ['docker/make-local-debian-base.sh', LOCAL_DEBIAN_IMAGE], { stdio: 'pipe', cwd: path.resolve(import.meta.dirname, '../..') });
}

/**
 * For a describe block: a container of the Debian base made as a shell env (workdir /app) and the
 * shell toolset on it, from beforeAll to afterAll. Read `box` and `shell` inside tests.
 */
export function shellBox(runtime: EnvRuntime = 'runc'): { box: ShellContainer; shell: ShellToolset } {
  const held = {} as { box: ShellContainer; shell: ShellToolset };
  beforeAll(async () => {
    ensureDebianBase();
    held.box = await startShellContainer(LOCAL_DEBIAN_IMAGE, { workdir: '/app', runtime });
    held.shell = new ShellToolset(held.box.exec, { workdir: '/app' });
  });
  afterAll(async () => {
    await held.shell?.close();
    await held.box?.remove();
  });
  return held;
}
