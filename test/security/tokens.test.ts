/**
 * Issue 26: a token too short to be secret is refused with a clear message, by the process (from
 * the variable or the file) and by buildApp; a real token's redaction leaves ordinary words whole.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { MIN_TOKEN_CHARS } from '../../src/plugins/auth.js';
import { loggerHygiene } from '../../src/logging.js';
import { FIXTURE_BUNDLE } from '../support/app.js';
import { ProcessSandbox } from '../support/process-sandbox.js';

const SERVE_JS = join(process.cwd(), 'dist/serve.js');

function serve(env: Record<string, string>, args: string[] = []) {
  return spawnSync(process.execPath, [SERVE_JS, FIXTURE_BUNDLE, '--port', '0', ...args], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH!, ...env },
    timeout: 20_000,
  });
}

describe('tokens too short to be secret', () => {
  const dir = mkdtempSync(join(tmpdir(), 'openenv-short-token-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('serve exits 2 naming the variable, the length and how to make one; nothing starts', () => {
    const r = serve({ AGENTENV_TOKEN: 'e' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(`AGENTENV_TOKEN: the token is 1 character long: a token shorter than ${MIN_TOKEN_CHARS} characters is guessed`);
    expect(r.stderr).toContain('openssl rand -hex 32');
    expect(r.stdout).not.toContain('listening');
  });

  it('from --token-file too', () => {
    const file = join(dir, 'token');
    writeFileSync(file, 'hunter2\n');
    const r = serve({}, ['--token-file', file]);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(`--token-file ${file}: the token is 7 characters long`);
  });

  it('buildApp throws before it deploys or sweeps anything', async () => {
    const sandbox = new ProcessSandbox();
    try {
      await expect(buildApp(FIXTURE_BUNDLE, { token: 'short', sandbox })).rejects.toThrow(/token: the token is 5 characters long/);
      expect(sandbox.spawned).toBe(0);
    } finally {
      await sandbox.close();
    }
  });

  it('a token of the least length is taken; its redaction blanks the token and leaves words whole', () => {
    const token = 'e'.repeat(MIN_TOKEN_CHARS);
    const { hooks } = loggerHygiene(token);
    const line = JSON.stringify({ msg: `the server needs the token ${token}; everyone else gets 401` });
    expect(hooks!.streamWrite(line)).toBe(JSON.stringify({ msg: 'the server needs the token [redacted]; everyone else gets 401' }));
  });
});
