/** Shared by the Harbor tests: the local Debian base the shipped dataset builds FROM, and the dataset's place. */
import { execFileSync } from 'node:child_process';
import path from 'node:path';

export const LOCAL_DEBIAN_IMAGE = process.env.OPENENV_TEST_DEBIAN_IMAGE ?? 'openenv-local/debian:bookworm';
export const DATASET = path.resolve(import.meta.dirname, '../../datasets/openenv-harbor-v1');
export const BASE_IMAGE_RULE = `debian:bookworm=${LOCAL_DEBIAN_IMAGE}`;

/** makes the local Debian base when the engine lacks it (docker/make-local-debian-base.sh: idempotent) */
export function ensureDebianBase(): void {
  execFileSync('bash', ['docker/make-local-debian-base.sh', LOCAL_DEBIAN_IMAGE], { stdio: 'pipe', cwd: path.resolve(import.meta.dirname, '../..') });
}
