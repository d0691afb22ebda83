/**
 * The README stays true: each of its option tables lists exactly the options the command declares
 * (every option has a row, every row is an option) with the default --help prints, and it links
 * only files of the repo.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { kebab, SERVER_OPTIONS, serverOptionEnv, shownDefault, type OptionTable } from '../src/config.js';
import { SUBCOMMANDS } from '../src/cli/commands.js';

const ROOT = join(import.meta.dirname, '..');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

/** The section under `heading`, up to the next heading of its level or above (a `#` in a code block is no heading). */
function section(heading: string): string {
  const at = README.indexOf(`${heading}\n`);
  expect(at, `README has a section "${heading}"`).toBeGreaterThan(-1);
  const level = /^#+/.exec(heading)![0].length;
  const lines = README.slice(at + heading.length + 1).split('\n');
  let fenced = false;
  const end = lines.findIndex((l) => {
    if (l.startsWith('```')) fenced = !fenced;
    return !fenced && new RegExp(`^#{1,${level}} `).test(l);
  });
  return lines.slice(0, end === -1 ? undefined : end).join('\n');
}

/** A table's rows (after its header and separator), as cells with their backticks dropped. */
function tableRows(text: string, header: string): string[][] {
  const at = text.indexOf(header);
  expect(at, `a table headed ${header}`).toBeGreaterThan(-1);
  const lines = text.slice(at).split('\n').slice(2);
  const end = lines.findIndex((l) => !l.startsWith('|'));
  return lines.slice(0, end === -1 ? undefined : end).map((l) =>
    l
      .slice(1, -1)
      .split(/(?<!\\)\|/)
      .map((c) => c.trim().replace(/`/g, '').replace(/\\\|/g, '|')),
  );
}

/** `--out, -o OUT` → its flag `out`, and what follows the flag */
function flagOf(cell: string): { flag: string; rest: string } | null {
  const m = /^--([a-z0-9-]+)(.*)$/.exec(cell);
  return m ? { flag: m[1]!, rest: m[2]!.trim() } : null;
}

/**
 * Checks a table of `options` both ways: a row per option and an option per row (besides
 * `positionals`), each row spelled as the command spells the option and with its default.
 */
function checkBothWays(rows: { option: string; def: string }[], options: OptionTable, what: string, positionals: readonly string[] = []) {
  const seen = new Set<string>();
  for (const p of positionals)
    expect(
      rows.filter((r) => r.option === p),
      `${what} has a row for its argument ${p}`,
    ).toHaveLength(1);
  for (const r of rows) {
    if (positionals.includes(r.option)) continue;
    const f = flagOf(r.option);
    expect(f, `${what}: the row ${r.option} names a flag`).not.toBeNull();
    const name = Object.keys(options).find((k) => kebab(k) === f!.flag);
    expect(name, `${what}: the row --${f!.flag} is an option of the command`).toBeDefined();
    const o = options[name!]!;
    expect(seen.has(name!), `${what}: one row for --${f!.flag}`).toBe(false);
    seen.add(name!);
    const spelled = [o.short ? `, -${o.short}` : '', o.value ? ` ${o.value}` : ''].join('').trim();
    if (f!.rest) expect(f!.rest, `${what}: --${f!.flag} spelled as --help spells it`).toBe(spelled);
    expect(r.def, `${what}: --${f!.flag}'s default`).toBe(shownDefault(o));
  }
  for (const name of Object.keys(options)) expect(seen.has(name), `${what} has a row for --${kebab(name)}`).toBe(true);
}

describe('README.md options', () => {
  it("the server's Options table: a row per option and an option per row, each with the default --help prints", () => {
    const rows = tableRows(section('### Options'), '| flag | default | meaning |').map(([option, def]) => ({ option: option!, def: def! }));
    checkBothWays(rows, SERVER_OPTIONS, 'the Options table');
    // the defaults worth words are the schema's own
    expect(shownDefault(SERVER_OPTIONS.networkStock)).toBe('--max-concurrent-envs, at most 64');
  });

  it('the command table: every option of every openenv-bundle command both ways, with its default', () => {
    const rows = tableRows(section('## Your own tasks: `openenv-bundle init | check | serve | pack | play`'), '| command | option | default | what it does |');
    const names = new Set(rows.map((r) => r[0]));
    expect([...names].sort()).toEqual(SUBCOMMANDS.map((c) => c.name).sort());
    for (const sub of SUBCOMMANDS) {
      if (sub.name === 'serve') continue; // its options are the Options table
      const mine = rows.filter((r) => r[0] === sub.name).map(([, option, def]) => ({ option: option!, def: def! }));
      checkBothWays(mine, sub.options, `openenv-bundle ${sub.name}`, sub.positionals);
    }
  });

  it("the prompt rows' table: every option of rows both ways, with its default", () => {
    const rows = tableRows(section('### Prompt rows for slime'), '| option | default | recorded as |').map(([option, def]) => ({ option: option!, def: def! }));
    checkBothWays(rows, SUBCOMMANDS.find((c) => c.name === 'rows')!.options, 'the prompt rows table');
  });

  it('names only environment variables the server reads, in its compose table and in compose.yaml', () => {
    const known = new Set(Object.entries(SERVER_OPTIONS).flatMap(([n, o]) => serverOptionEnv(n, o)));
    const compose = section('## Run it with compose (beside a slime cluster)');
    const named = [...compose.matchAll(/`(OPENENV_[A-Z_]+)`/g)].map((m) => m[1]!);
    const ours = [
      'OPENENV_PORT',
      'OPENENV_PUBLISH_ADDR',
      'OPENENV_STOP_GRACE_PERIOD',
      'OPENENV_IMAGE',
      'OPENENV_BUILD_TARGET',
      'OPENENV_EDGE_SUBNET',
      'OPENENV_PROXY_STOP_GRACE_PERIOD',
      'OPENENV_UID',
      'OPENENV_GID',
    ];
    expect(named.length).toBeGreaterThan(5);
    for (const v of named) expect(known.has(v) || ours.includes(v), `${v} is a server option's variable or compose's own`).toBe(true);
    const yaml = readFileSync(join(ROOT, 'compose.yaml'), 'utf8');
    const env = [...yaml.matchAll(/^ {6}(OPENENV_[A-Z_]+|LOG_LEVEL):/gm)].map((m) => m[1]!);
    expect(env.length).toBeGreaterThan(5);
    for (const v of env) expect(known.has(v), `compose.yaml passes ${v}, which the server reads`).toBe(true);
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

  it('links to its own headings that exist', () => {
    const anchors = new Set(
      [...README.matchAll(/^#+ (.+)$/gm)].map((m) =>
        m[1]!
          .toLowerCase()
          .replace(/[^a-z0-9 _-]/g, '')
          .replace(/ /g, '-'),
      ),
    );
    for (const m of README.matchAll(/\]\(#([^)]+)\)/g)) expect(anchors.has(m[1]!), `README links #${m[1]}`).toBe(true);
  });
});

describe('README.md metrics', () => {
  it('lists every metric the server exports (besides the process_* and nodejs_* defaults)', async () => {
    const { Metrics } = await import('../src/metrics.js');
    const m = new Metrics({ running: () => 0, waiting: () => ({ high: 0, normal: 0, low: 0 }), capacity: () => 0, networks: () => 0 }, 'openenv_', false);
    const names = (await m.registry.getMetricsAsJSON()).map((x) => x.name);
    expect(names.length).toBeGreaterThan(10);
    for (const name of names) expect(README, `README's Metrics table lists ${name}`).toContain(`| \`${name}\` |`);
  });
});
