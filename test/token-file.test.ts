import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readToken } from '../src/cli/serve.js';

describe('--token-file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'openenv-token-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reads the token from the file (a mounted secret), trimmed, and wins over --token-env', () => {
    const file = join(dir, 'secret');
    writeFileSync(file, '  s3cret-token-from-the-file\n');
    expect(readToken({ tokenFile: file, tokenEnv: 'T' }, { T: 'token-from-the-env-var' })).toBe('s3cret-token-from-the-file');
  });

  it('falls back to the variable --token-env names', () => {
    expect(readToken({ tokenEnv: 'T' }, { T: 'token-from-the-env-var' })).toBe('token-from-the-env-var');
    expect(readToken({ tokenEnv: 'T' }, {})).toBeNull();
  });

  it('refuses a file that is missing or empty, naming it', () => {
    expect(() => readToken({ tokenFile: join(dir, 'nope'), tokenEnv: 'T' }, {})).toThrow(/--token-file .*nope: ENOENT/);
    const empty = join(dir, 'empty');
    writeFileSync(empty, '\n');
    expect(() => readToken({ tokenFile: empty, tokenEnv: 'T' }, { T: 'x' })).toThrow(/is empty/);
  });
});
