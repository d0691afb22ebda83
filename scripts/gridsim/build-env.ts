/**
 * Builds the GridSim env's JavaScript from the one core: transpiles src/gridsim/server.ts and
 * every module it imports into bundles/gridsim-v1/envs/gridsim/app/*.mjs, so the image runs the
 * same code that generated the tasks, with no npm package at run time.
 *
 *   npx tsx scripts/gridsim/build-env.ts          writes app/ (and removes stale .mjs files)
 *   npx tsx scripts/gridsim/build-env.ts --check  exits 1 when app/ differs from a fresh build
 *
 * A test (test/gridsim/env-build.test.ts) fails when the committed app/ is stale.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const HERE = dirname(fileURLToPath(import.meta.url));
export const SRC_DIR = resolve(HERE, '../../src/gridsim');
export const APP_DIR = resolve(HERE, '../../bundles/gridsim-v1/envs/gridsim/app');
export const ENTRY = 'server';

const RELATIVE = /(\bfrom\s*|\bimport\s*\(?\s*)(['"])\.\/([A-Za-z0-9_-]+)\.js\2/g;
const ANY_SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(?\s*)(['"])([^'"]+)\1/g;

function transpile(name: string): { code: string; imports: string[] } {
  const file = join(SRC_DIR, `${name}.ts`);
  const source = readFileSync(file, 'utf8');
  const out = ts.transpileModule(source, {
    fileName: `${name}.ts`,
    reportDiagnostics: true,
    compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022, sourceMap: false, removeComments: false },
  });
  if (out.diagnostics && out.diagnostics.length > 0) {
    throw new Error(`${name}.ts: ${out.diagnostics.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')).join('; ')}`);
  }
  const imports: string[] = [];
  const code = out.outputText.replace(RELATIVE, (_m, lead: string, q: string, mod: string) => {
    imports.push(mod);
    return `${lead}${q}./${mod}.mjs${q}`;
  });
  for (const m of code.matchAll(ANY_SPECIFIER)) {
    const spec = m[2] as string;
    if (!spec.startsWith('node:') && !/^\.\/[A-Za-z0-9_-]+\.mjs$/.test(spec)) {
      throw new Error(`${name}.ts imports ${JSON.stringify(spec)}: the env may import only node: builtins and ./<module>.js of src/gridsim`);
    }
  }
  return { code, imports };
}

/** file name → content of every app/ file: the entry and everything it imports, transitively. */
export function buildEnvFiles(): Map<string, string> {
  const files = new Map<string, string>();
  const queue = [ENTRY];
  const seen = new Set<string>();
  while (queue.length > 0) {
    const name = queue.shift() as string;
    if (seen.has(name)) continue;
    seen.add(name);
    const { code, imports } = transpile(name);
    files.set(`${name}.mjs`, `// generated from src/gridsim/${name}.ts by scripts/gridsim/build-env.ts — do not edit\n${code}`);
    queue.push(...imports);
  }
  return new Map([...files.entries()].sort(([a], [b]) => (a < b ? -1 : 1)));
}

/** What differs between app/ and a fresh build: empty when app/ is current. */
export function staleFiles(appDir = APP_DIR): string[] {
  const fresh = buildEnvFiles();
  const present = existsSync(appDir) ? readdirSync(appDir).filter((f) => f.endsWith('.mjs')) : [];
  const problems: string[] = [];
  for (const [name, text] of fresh) {
    const path = join(appDir, name);
    if (!existsSync(path)) problems.push(`${name} is missing`);
    else if (readFileSync(path, 'utf8') !== text) problems.push(`${name} differs from a fresh transpile of src/gridsim/${name.replace(/\.mjs$/, '.ts')}`);
  }
  for (const f of present) if (!fresh.has(f)) problems.push(`${f} is not generated from src/gridsim (stale)`);
  return problems;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  if (process.argv.includes('--check')) {
    const problems = staleFiles();
    if (problems.length > 0) {
      process.stderr.write(`envs/gridsim/app is stale; run npx tsx scripts/gridsim/build-env.ts\n${problems.map((p) => `  ${p}`).join('\n')}\n`);
      process.exit(1);
    }
    process.stdout.write('envs/gridsim/app is current\n');
  } else {
    const files = buildEnvFiles();
    mkdirSync(APP_DIR, { recursive: true });
    for (const f of readdirSync(APP_DIR)) if (f.endsWith('.mjs') && !files.has(f)) rmSync(join(APP_DIR, f));
    for (const [name, text] of files) writeFileSync(join(APP_DIR, name), text);
    process.stdout.write(`wrote ${[...files.keys()].join(', ')} to ${APP_DIR}\n`);
  }
}
