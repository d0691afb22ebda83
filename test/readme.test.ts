/** The README stays true: every option is documented with its real default, and it links only files of the repo. */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { kebab, OPTION_NAMES, OptionsSchema } from '../src/config.js';

const ROOT = join(import.meta.dirname, '..');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

describe('README.md', () => {
  it('has a row for every option, with the default the schema declares', () => {
    const defaults = OptionsSchema.innerType().parse({}) as Record<string, unknown>;
    const rows = new Map<string, string>();
    const table = README.slice(README.indexOf('### Options'), README.indexOf('\n## ', README.indexOf('### Options')));
    for (const line of table.split('\n')) {
      const m = /^\| `--([a-z-]+)[^`]*` \| ([^|]*) \|/.exec(line);
      if (m) rows.set(m[1]!, m[2]!.trim());
    }
    for (const name of OPTION_NAMES) {
      const flag = kebab(name);
      if (name === 'tokenEnv') continue;
      expect(rows.has(flag), `README options table has no row for --${flag}`).toBe(true);
      const def = defaults[name];
      if (def === undefined || typeof def === 'boolean' || Array.isArray(def)) continue;
      expect(rows.get(flag), `--${flag}'s default`).toContain(`\`${String(def)}\``);
    }
  });

  it('links only files that exist in the repo, never the design notes outside it', () => {
    expect(README).not.toMatch(/\.\.\/shared|PROTOCOL\.md|BUNDLE\.md|ARCHITECTURE\.md/);
    const links = [...README.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)].map((m) => m[1]!).filter((l) => !/^[a-z]+:/.test(l));
    expect(links.length).toBeGreaterThan(3);
    for (const l of links) expect(existsSync(join(ROOT, l)), `README links ${l}`).toBe(true);
    for (const doc of ['docs/protocol.md', 'docs/bundle-format.md']) {
      const text = readFileSync(join(ROOT, doc), 'utf8');
      expect(text, doc).not.toMatch(/\.\.\/shared/);
      for (const m of text.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)) {
        if (/^[a-z]+:/.test(m[1]!)) continue;
        expect(existsSync(join(ROOT, dirname(doc), m[1]!)), `${doc} links ${m[1]}`).toBe(true);
      }
    }
  });
});

describe('README.md metrics', () => {
  it('lists every metric the server exports (besides the process_* and nodejs_* defaults)', async () => {
    const { Metrics } = await import('../src/metrics.js');
    const m = new Metrics({ running: () => 0, waiting: () => 0, capacity: () => 0, networks: () => 0 }, 'openenv_', false);
    const names = (await m.registry.getMetricsAsJSON()).map((x) => x.name);
    expect(names.length).toBeGreaterThan(10);
    for (const name of names) expect(README, `README's Metrics table lists ${name}`).toContain(`| \`${name}\` |`);
  });
});

describe('README.md subcommands', () => {
  it("has a row for every option of every openenv-bundle subcommand (serve's are the Options table)", async () => {
    const { SUBCOMMANDS } = await import('../src/cli/commands.js');
    const table = README.slice(README.indexOf('| command | option | what it does |'));
    for (const sub of SUBCOMMANDS) {
      expect(table, `README lists openenv-bundle ${sub.name}`).toContain(`| \`${sub.name}\` |`);
      if (sub.name === 'serve') continue;
      const flags = [...sub.usage.matchAll(/^ {2}(--[a-z-]+)/gm)].map((m) => m[1]!).filter((f) => f !== '--help');
      expect(flags.length, `${sub.name} --help lists options`).toBeGreaterThan(0);
      for (const flag of flags)
        expect(table, `README has a row for openenv-bundle ${sub.name} ${flag}`).toMatch(new RegExp(`^\\| \`${sub.name}\` \\| \`${flag}[ ,\`]`, 'm'));
    }
  });
});
