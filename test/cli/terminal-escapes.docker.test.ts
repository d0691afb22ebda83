/**
 * What `openenv-bundle check` prints of a verifier's output never drives the terminal: the built
 * binary, a child process, on real Docker, checks a Harbor task whose verifier prints an OSC
 * retitle, a clear, a cursor move, a carriage return hiding text and an 8-bit CSI, and writes no
 * reward. The failure's output tail is printed with every control shown as `\xNN`; --json parses
 * to the same bytes the verifier printed, with no raw control on the line.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeDocker } from '../support/docker.js';
import { BASE_IMAGE_RULE, DATASET, ensureDebianBase } from '../harbor/helpers.js';

const CLI = path.resolve(import.meta.dirname, '../../dist/cli/openenv-bundle.js');
/** this run's bundle, so its image is its own to remove */
const NAME = `escapes-${randomBytes(4).toString('hex')}`;
/** printf's escapes for the verifier; U+009B is \302\233 in UTF-8 */
const PRINTF = String.raw`\033]0;pwned\007\033[2J\033[Hclean\rhidden\302\23331mred\n`;
const RAW = '\u001b]0;pwned\u0007\u001b[2J\u001b[Hclean\rhidden\u009b31mred';
const SHOWN = '\\x1b]0;pwned\\x07\\x1b[2J\\x1b[Hclean\\x0dhidden\\x9b31mred';

/** whether `s` holds a control a terminal acts on: C0 but newline and tab, DEL, C1 */
const rawControl = (s: string) =>
  [...s].some((ch) => {
    const c = ch.codePointAt(0)!;
    return (c < 0x20 && c !== 0x0a && c !== 0x09) || (c >= 0x7f && c <= 0x9f);
  });

function run(args: string[]) {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 600_000 });
}

describeDocker('check, run as a process, on a verifier that prints terminal escapes', () => {
  let tmp: string;
  let bundle: string;
  beforeAll(async () => {
    ensureDebianBase();
    tmp = await mkdtemp(path.join(tmpdir(), 'openenv-escapes-check-'));
    const src = path.join(tmp, 'src');
    await cp(path.join(DATASET, 'word-frequency'), path.join(src, 'escaping-verifier'), { recursive: true });
    await writeFile(path.join(src, 'escaping-verifier/tests/test.sh'), `#!/bin/bash\nprintf '${PRINTF}'\n# no reward written\n`);
    bundle = path.join(tmp, 'bundle');
    const imported = run(['import', 'harbor', src, '--out', bundle, '--name', NAME, '--base-image', BASE_IMAGE_RULE]);
    expect(imported.status, imported.stdout + imported.stderr).toBe(0);
  }, 120_000);
  afterAll(async () => {
    if (tmp) await rm(tmp, { recursive: true, force: true });
    const ours = execFileSync('docker', ['images', '-q', '--filter', `reference=openenv-bundle/${NAME}-*`], { encoding: 'utf8' }).trim();
    if (ours) execFileSync('docker', ['rmi', '-f', ...new Set(ours.split('\n'))], { stdio: 'pipe' });
  });

  it("prints the verifier's output tail with every control shown, and --json escapes them all", () => {
    const text = run(['check', bundle, '--tasks', 'all']);
    expect(text.status, text.stdout + text.stderr).toBe(1);
    expect(text.stdout).toMatch(/task escaping-verifier.*the golden solution failed the episode/);
    expect(text.stdout).toContain(SHOWN);
    expect(rawControl(text.stdout)).toBe(false);
    expect(rawControl(text.stderr)).toBe(false);

    const json = run(['check', bundle, '--tasks', 'all', '--json']);
    expect(json.status).toBe(1);
    expect(rawControl(json.stdout)).toBe(false);
    const report = JSON.parse(json.stdout) as { problems: { message: string }[] };
    expect(report.problems.some((p) => p.message.includes(RAW))).toBe(true);
  }, 600_000);
});
