// The lint's size rule (eslint.config.js, size/long-file-reason): a file of src/ over MAX_LINES
// lines opens with the reason it is long. Fixtures are linted through ESLint's own API.
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ESLint, Linter } from 'eslint';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
// the config is plain JavaScript, outside the typed project: imported by its URL, typed here
const { MAX_LINES, sizePlugin } = (await import(pathToFileURL(path.join(ROOT, 'eslint.config.js')).href)) as {
  MAX_LINES: number;
  sizePlugin: ESLint.Plugin;
};
const body = (n: number) => Array.from({ length: n }, (_, i) => `export const c${i} = ${i};`).join('\n') + '\n';

function lint(text: string): string[] {
  const linter = new Linter({ configType: 'flat' });
  const config = [{ files: ['**/*.js'], plugins: { size: sizePlugin }, rules: { 'size/long-file-reason': 'error' as const } }];
  return linter.verify(text, config, { filename: path.join(ROOT, 'src/fixture.js') }).map((m) => m.message);
}

describe('size/long-file-reason', () => {
  it('passes a file of MAX_LINES lines, reason or not', () => {
    expect(MAX_LINES).toBe(450);
    expect(lint(body(MAX_LINES))).toEqual([]);
  });

  it('reports a file one line over, naming it and its length', () => {
    expect(lint(body(MAX_LINES + 1))).toEqual([
      `src/fixture.js has ${MAX_LINES + 1} lines (over ${MAX_LINES}): split it where it parts naturally, or open it with a comment that says "Long because" and why`,
    ]);
  });

  it('passes a long file whose opening comment says why it is long', () => {
    const reason = '/**\n * The thing.\n *\n * Long because the protocol reads best as one walk, step by step.\n */\n';
    expect(lint(reason + body(MAX_LINES + 20))).toEqual([]);
    expect(lint('// Long because: one table of every code, read top to bottom.\n' + body(MAX_LINES + 20))).toEqual([]);
  });

  it('reports a long file whose reason is empty, or not in its opening comment', () => {
    expect(lint('/** Long because */\n' + body(MAX_LINES + 1))).toHaveLength(1);
    expect(lint('/** The thing. */\n' + body(MAX_LINES) + '// Long because the protocol reads best as one walk.\n')).toHaveLength(1);
    expect(lint(body(1) + '/** Long because the protocol reads best as one walk. */\n' + body(MAX_LINES))).toHaveLength(1);
  });

  it('is on for every file of src/ in the repository config', async () => {
    const eslint = new ESLint({ cwd: ROOT });
    for (const file of ['src/sandbox/sandbox.ts', 'src/episodes/episode.ts', 'src/defaults.ts']) {
      const config = await eslint.calculateConfigForFile(path.join(ROOT, file));
      expect(config.rules['size/long-file-reason'], file).toEqual([2]);
    }
  });
});
