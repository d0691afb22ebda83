/**
 * .ci/check-node, run as .ci/run runs it: a Node that package.json's engines.node does not allow
 * is refused with a message naming both and the lowest Node allowed; one it allows passes. The
 * `node` on PATH is a stand-in that reports the version each case needs, and each case has a
 * package.json of its own (the project's own range is checked against this machine's Node).
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SCRIPT = path.join(ROOT, '.ci', 'check-node');
const dirs: string[] = [];

/** .ci/check-node in a folder whose package.json asks `engines` (null: the project's own), with a `node` that says it is `version` (null: this machine's) */
function check(engines: string | null, version: string | null): { status: number | null; stderr: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'check-node-'));
  dirs.push(dir);
  if (engines !== null) writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'x', engines: { node: engines } }));
  let PATH = process.env.PATH;
  if (version !== null) {
    mkdirSync(path.join(dir, 'bin'));
    writeFileSync(path.join(dir, 'bin', 'node'), `#!/bin/sh\necho v${version}\n`);
    chmodSync(path.join(dir, 'bin', 'node'), 0o755);
    PATH = `${path.join(dir, 'bin')}:${PATH}`;
  }
  const r = spawnSync('bash', [SCRIPT], { cwd: engines === null ? ROOT : dir, env: { ...process.env, PATH }, encoding: 'utf8' });
  return { status: r.status, stderr: r.stderr };
}

describe('.ci/check-node', () => {
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  it('refuses a Node the range leaves out, below it or between its alternatives, naming both and the lowest allowed', () => {
    const range = '^20.19.0 || >=22.12.0';
    for (const v of ['18.19.0', '20.18.1', '21.7.3']) {
      const r = check(range, v);
      expect(r.status, v).toBe(1);
      expect(r.stderr).toContain(`Node ${v} is not a Node this project runs on: package.json says engines.node "${range}"`);
      expect(r.stderr).toContain('Install Node 20.19.0 or newer within that range');
    }
  });

  it('takes what the range allows: its lowest version, within a caret, past a floor', () => {
    for (const v of ['20.19.0', '20.20.2', '22.12.0', '24.1.0']) expect(check('^20.19.0 || >=22.12.0', v), v).toEqual({ status: 0, stderr: '' });
    expect(check('>=20', '20.0.0')).toEqual({ status: 0, stderr: '' });
    expect(check('>=20.11', '20.9.0').status).toBe(1);
    expect(check('~20.3', '20.4.0').status).toBe(1);
  });

  it("this machine's Node runs the project", () => {
    expect(check(null, null)).toEqual({ status: 0, stderr: '' });
  });
});
