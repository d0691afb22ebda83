/** Regenerating the bundle reproduces the committed files byte for byte. */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { GENERATED_FILES } from '../../scripts/gridsim/generate.js';

const ROOT = join(import.meta.dirname, '../..');
const BUNDLE = join(ROOT, 'bundles/gridsim-v1');
const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

describe('the generator', () => {
  const out = mkdtempSync(join(tmpdir(), 'gridsim-regen-'));
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it('reproduces tasks/*.jsonl, bundle.json and README.md exactly', () => {
    execFileSync(process.execPath, [join(ROOT, 'node_modules/tsx/dist/cli.mjs'), join(ROOT, 'scripts/gridsim/generate.ts'), '--out', out], {
      stdio: 'pipe',
      timeout: 60_000,
    });
    expect(GENERATED_FILES).toEqual(['tasks/train.jsonl', 'tasks/eval.jsonl', 'tasks/wiring.jsonl', 'bundle.json', 'README.md']);
    const fresh = Object.fromEntries(GENERATED_FILES.map((f) => [f, sha256(join(out, f))]));
    const committed = Object.fromEntries(GENERATED_FILES.map((f) => [f, sha256(join(BUNDLE, f))]));
    expect(fresh).toEqual(committed);
  });
});
