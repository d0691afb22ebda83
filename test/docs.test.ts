/**
 * The docs hold together: docs/README.md lists every page once, every relative link of README.md
 * and docs/ reaches a file (and a heading, for an #anchor), nothing links outside the repository's
 * own words, the README stays a front door, and architecture.md's floors are eslint.config.js's.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { anchorsOf, linksOf, proseOf, tableRowsOf } from './support/markdown.js';

const ROOT = join(import.meta.dirname, '..');
const DOCS = join(ROOT, 'docs');
const PAGES = readdirSync(DOCS)
  .filter((f) => f.endsWith('.md'))
  .sort();
const FILES = [join(ROOT, 'README.md'), ...PAGES.map((p) => join(DOCS, p))];
const read = (file: string) => readFileSync(file, 'utf8');

describe('docs/README.md, the index', () => {
  const index = read(join(DOCS, 'README.md'));
  const listed = [...index.matchAll(/^- \[[^\]]+\]\(([^)#]+)\)/gm)].map((m) => m[1]!);

  it('lists every page of docs/ once, each on a line of its own', () => {
    expect(listed.length).toBeGreaterThan(10);
    expect(new Set(listed).size, `listed twice: ${listed.filter((l, i) => listed.indexOf(l) !== i).join(', ')}`).toBe(listed.length);
    expect([...listed].sort()).toEqual(PAGES.filter((p) => p !== 'README.md'));
  });

  it('is linked from the README', () => {
    expect(read(join(ROOT, 'README.md'))).toContain('](docs/README.md)');
  });
});

describe('links in README.md and docs/', () => {
  it('every relative link reaches a file of the repository, and an #anchor a heading of its page', () => {
    let checked = 0;
    for (const file of FILES) {
      const name = relative(ROOT, file);
      for (const link of linksOf(read(file))) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue; // http:, https:, mailto:
        const [path, anchor] = link.split('#', 2) as [string, string | undefined];
        const target = path ? normalize(join(dirname(file), decodeURI(path))) : file;
        expect(relative(ROOT, target).startsWith('..'), `${name} links ${link}, outside the repository`).toBe(false);
        expect(existsSync(target), `${name} links ${link}: no such file`).toBe(true);
        if (anchor !== undefined && target.endsWith('.md')) {
          expect(anchorsOf(read(target)), `${name} links ${link}: no such heading in ${relative(ROOT, target)}`).toContain(anchor);
        }
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(200);
  });

  it('never points into ../shared or the design notes beside the repository', () => {
    for (const file of FILES) expect(read(file), relative(ROOT, file)).not.toMatch(/\.\.\/shared|PROTOCOL\.md|BUNDLE\.md|ARCHITECTURE\.md/);
  });
});

describe('README.md, the front door', () => {
  const readme = read(join(ROOT, 'README.md'));

  it('is at most 300 lines', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(300);
  });

  it('defines each house word before it uses it, or does not use it', () => {
    const prose = proseOf(readme);
    for (const word of ['door', 'lane', 'stock', 'floor', 'room']) {
      const used = new RegExp(`\\b${word}s?\\b`, 'i').exec(prose);
      if (!used) continue;
      const defined = new RegExp(`\\*\\*${word}s?\\*\\*`, 'i').exec(prose);
      expect(defined, `the README uses "${word}" without defining it in bold`).not.toBeNull();
      expect(defined!.index, `the README uses "${word}" before its definition`).toBeLessThanOrEqual(used.index);
    }
  });

  it('points to every guide in docs/README.md', () => {
    const index = read(join(DOCS, 'README.md'));
    const guides = index.slice(index.indexOf('## Guides'), index.indexOf('## Reference'));
    for (const m of guides.matchAll(/^- \[[^\]]+\]\(([^)#]+)\)/gm)) expect(readme, `the README's "Where next" names ${m[1]}`).toContain(`](docs/${m[1]}`);
  });
});

describe('docs/architecture.md', () => {
  const arch = read(join(DOCS, 'architecture.md'));

  it("lists eslint.config.js's floors, top to bottom, each with its rooms", () => {
    const config = read(join(ROOT, 'eslint.config.js'));
    const body = config.slice(config.indexOf('const FLOORS = ['), config.indexOf('\n];', config.indexOf('const FLOORS = [')));
    // each floor is one [...] of FLOORS: its rooms are the quoted strings in it (comments dropped)
    const floors = [...body.replace(/\/\/.*$/gm, '').matchAll(/\[([^[\]]*)\]/g)].map((m) => [...m[1]!.matchAll(/'([^']+)'/g)].map((r) => r[1]!));
    expect(floors.length).toBeGreaterThan(10);
    const rows = tableRowsOf(arch, '| floor | rooms | what lives there |').map(([, rooms]) => rooms!.split(', '));
    expect(rows).toEqual(floors);
  });

  it('names only files and folders that exist', () => {
    const named = [...arch.matchAll(/`((?:src|web|test|scripts)\/[^`\s]*)`/g)].map((m) => m[1]!);
    expect(named.length).toBeGreaterThan(20);
    for (const p of named) expect(existsSync(join(ROOT, p)), `architecture.md names ${p}`).toBe(true);
  });
});
