/**
 * The reference stays true: each option table of docs/ lists exactly the options its command
 * declares (every option has a row, every row is an option) with the default --help prints; the
 * compose table names only variables the server reads; the metrics page lists every metric.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { kebab, SERVER_OPTIONS, serverOptionEnv, shownDefault, type OptionTable } from '../src/config.js';
import { SUBCOMMANDS } from '../src/cli/commands.js';
import { sectionOf, tableRowsOf } from './support/markdown.js';

const ROOT = join(import.meta.dirname, '..');
const doc = (name: string) => readFileSync(join(ROOT, 'docs', name), 'utf8');

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

describe('the option tables of docs/', () => {
  it("the server's Options table: a row per option and an option per row, each with the default --help prints", () => {
    const rows = tableRowsOf(sectionOf(doc('options.md'), '# Options'), '| flag | default | meaning |').map(([option, def]) => ({
      option: option!,
      def: def!,
    }));
    checkBothWays(rows, SERVER_OPTIONS, 'the Options table');
    // the defaults worth words are the schema's own
    expect(shownDefault(SERVER_OPTIONS.networkStock)).toBe('--max-concurrent-envs, at most 64');
  });

  it('the command table: every option of every openenv-bundle command both ways, with its default', () => {
    const rows = tableRowsOf(
      sectionOf(doc('cli.md'), '## Your own tasks: `openenv-bundle init | check | serve | pack | play`'),
      '| command | option | default | what it does |',
    );
    const names = new Set(rows.map((r) => r[0]));
    expect([...names].sort()).toEqual(SUBCOMMANDS.map((c) => c.name).sort());
    for (const sub of SUBCOMMANDS) {
      if (sub.name === 'serve') continue; // its options are the Options table
      const mine = rows.filter((r) => r[0] === sub.name).map(([, option, def]) => ({ option: option!, def: def! }));
      checkBothWays(mine, sub.options, `openenv-bundle ${sub.name}`, sub.positionals);
    }
  });

  it("the prompt rows' table: every option of rows both ways, with its default", () => {
    const rows = tableRowsOf(sectionOf(doc('slime.md'), '## Prompt rows for slime'), '| option | default | recorded as |').map(([option, def]) => ({
      option: option!,
      def: def!,
    }));
    checkBothWays(rows, SUBCOMMANDS.find((c) => c.name === 'rows')!.options, 'the prompt rows table');
  });

  it('names only environment variables the server reads, in its compose table and in compose.yaml', () => {
    const known = new Set(Object.entries(SERVER_OPTIONS).flatMap(([n, o]) => serverOptionEnv(n, o)));
    const compose = sectionOf(doc('deploy.md'), '## Run it with compose (beside a slime cluster)');
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
});

describe('docs/metrics.md', () => {
  it('lists every metric the server exports (besides the process_* and nodejs_* defaults)', async () => {
    const { Metrics } = await import('../src/metrics.js');
    const m = new Metrics({ running: () => 0, waiting: () => ({ high: 0, normal: 0, low: 0 }), capacity: () => 0, networks: () => 0 }, 'openenv_', false);
    const names = (await m.registry.getMetricsAsJSON()).map((x) => x.name);
    expect(names.length).toBeGreaterThan(10);
    const metrics = doc('metrics.md');
    for (const name of names) expect(metrics, `the metrics table lists ${name}`).toContain(`| \`${name}\` |`);
  });
});
