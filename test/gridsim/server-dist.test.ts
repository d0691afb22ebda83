/**
 * The server's build and image hold only the server: the GridSim env's source lives with its
 * bundle (bundles/gridsim-v1/envs/gridsim/src) and is type-checked, never compiled into dist/.
 * `npm test` runs `npm run build` (which empties dist/ first) before vitest.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../..');
const DIST = join(ROOT, 'dist');

function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => (d.isDirectory() ? walk(join(dir, d.name)) : [join(dir, d.name)]));
}

/** the files a tsconfig compiles, relative to the root */
function filesOf(config: string): string[] {
  const parsed = ts.getParsedCommandLineOfConfigFile(
    join(ROOT, config),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    },
  );
  if (!parsed) throw new Error(`cannot read ${config}`);
  return parsed.fileNames.map((f) => relative(ROOT, f).split('\\').join('/'));
}

describe('the server build', () => {
  it('dist/ (after npm run build) holds server files and no GridSim file', () => {
    expect(existsSync(join(DIST, 'serve.js')), 'no dist/serve.js: run `npm run build` first').toBe(true);
    const files = walk(DIST).map((f) => relative(DIST, f));
    expect(files.length).toBeGreaterThan(0);
    expect(
      files.filter((f) => /gridsim/i.test(f)),
      'GridSim files in dist/ (npm run build empties dist/ first; tsconfig.json must not include the env)',
    ).toEqual([]);
  });
  it('tsconfig.json compiles src/ only and no GridSim source; tsconfig.check.json type-checks the env source and scripts', () => {
    const built = filesOf('tsconfig.json');
    expect(built.length).toBeGreaterThan(0);
    expect(built.filter((f) => !f.startsWith('src/') || /gridsim/i.test(f))).toEqual([]);
    const checked = filesOf('tsconfig.check.json');
    const env = readdirSync(join(ROOT, 'bundles/gridsim-v1/envs/gridsim/src'))
      .filter((f) => f.endsWith('.ts'))
      .map((f) => `bundles/gridsim-v1/envs/gridsim/src/${f}`);
    expect(env).toContain('bundles/gridsim-v1/envs/gridsim/src/server.ts');
    expect(checked).toEqual(expect.arrayContaining([...env, 'scripts/gridsim/build-env.ts', 'scripts/gridsim/generate.ts', 'scripts/gridsim/baseline.ts']));
  });
  it('the server image copies nothing of GridSim: no COPY of it, and .dockerignore lets neither bundles/ nor scripts/ in', () => {
    const lines = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '' && !l.trim().startsWith('#'));
    const copies = lines.filter((l) => /^(COPY|ADD)\b/.test(l.trim()));
    expect(copies.length).toBeGreaterThan(0);
    expect(copies.filter((l) => /gridsim|bundles|scripts/i.test(l))).toEqual([]);
    const rules = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    expect(rules[0], '.dockerignore is an allow-list: it starts with *').toBe('*');
    const allowed = rules.filter((l) => l.startsWith('!'));
    expect(allowed.length).toBeGreaterThan(0);
    expect(allowed.filter((l) => /gridsim|bundles|scripts/i.test(l))).toEqual([]);
  });
});
