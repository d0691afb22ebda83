/**
 * Which test layer this file runs in (vitest.config.ts sets OPENENV_TEST_LAYER per project):
 * `fast` needs no Docker engine, `docker` needs one.
 */
export const TEST_LAYER = process.env.OPENENV_TEST_LAYER ?? 'all';
export const IN_FAST_LAYER = TEST_LAYER === 'fast';
