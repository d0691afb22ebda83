/**
 * .ci/check-node, run as .ci/run runs it: a Node older than package.json's engines field is
 * refused with a message naming both versions and what to do; one as new or newer passes. The
 * `node` on PATH is a stand-in that reports the version each case needs.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ENGINES = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node;
const MINIMUM = ENGINES.replace(/^[>=^~\s v]+/, '');
const dirs: string[] = [];

/** .ci/check-node with a `node` that says it is `version` first on PATH */
function checkWith(version: string): { status: number | null; stderr: string } {
  const bin = mkdtempSync(path.join(os.tmpdir(), 'fake-node-'));
  dirs.push(bin);
  writeFileSync(path.join(bin, 'node'), `#!/bin/sh\necho v${version}\n`);
  chmodSync(path.join(bin, 'node'), 0o755);
  const r = spawnSync('bash', ['.ci/check-node'], { cwd: ROOT, env: { ...process.env, PATH: `${bin}:${process.env.PATH}` }, encoding: 'utf8' });
  return { status: r.status, stderr: r.stderr };
}

describe('.ci/check-node', () => {
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  it('refuses a Node older than engines.node, naming both and what to do', () => {
    const major = Number(MINIMUM.split('.')[0]);
    const r = checkWith(`${major - 2}.19.0`);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`Node ${major - 2}.19.0 is older than this project needs: package.json says engines.node "${ENGINES}"`);
    expect(r.stderr).toContain(`Install Node ${MINIMUM} or newer`);
  });

  it('takes the minimum itself and anything newer', () => {
    const exact = MINIMUM.split('.').length === 3 ? MINIMUM : `${MINIMUM}${'.0'.repeat(3 - MINIMUM.split('.').length)}`;
    expect(checkWith(exact)).toEqual({ status: 0, stderr: '' });
    expect(checkWith(`${Number(MINIMUM.split('.')[0]) + 3}.1.0`)).toEqual({ status: 0, stderr: '' });
  });
});
