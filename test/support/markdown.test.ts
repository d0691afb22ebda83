import { describe, expect, it } from 'vitest';
import { anchorsOf, linksOf, proseOf, sectionOf, shBlocksOf, slugOf, tableRowsOf } from './markdown.js';

const DOC = [
  '# Title',
  '',
  'See [a](a.md#x) and ![img](img/p.png).',
  '',
  '```sh',
  '# not a heading [b](b.md)',
  'echo hi',
  '```',
  '',
  '## Networks made ahead: `--network-stock`',
  '',
  '| flag | default |',
  '|---|---|',
  '| `--a\\|b` | `1` |',
  '',
  '### Sub',
  '## Networks made ahead: `--network-stock`',
  'tail',
].join('\n');

describe('markdown reading', () => {
  it("slugs headings as GitHub does, numbering repeats, skipping code blocks' lines", () => {
    expect(slugOf("What slime's example reads")).toBe('what-slimes-example-reads');
    expect(slugOf('[`docs/x.md`](x.md): the `--max` flag')).toBe('docsxmd-the---max-flag');
    expect(anchorsOf(DOC)).toEqual(['title', 'networks-made-ahead---network-stock', 'sub', 'networks-made-ahead---network-stock-1']);
  });

  it('finds links and images outside code blocks only', () => {
    expect(linksOf(DOC)).toEqual(['a.md#x', 'img/p.png']);
    expect(proseOf(DOC)).not.toContain('echo hi');
  });

  it('cuts a section at the next heading of its level or above, and reads its table', () => {
    const s = sectionOf(DOC, '## Networks made ahead: `--network-stock`');
    expect(s).toContain('### Sub');
    expect(s).not.toContain('tail');
    expect(tableRowsOf(s, '| flag | default |')).toEqual([['--a|b', '1']]);
    expect(() => sectionOf(DOC, '## Nowhere')).toThrow('no heading "## Nowhere"');
    expect(() => tableRowsOf(s, '| x |')).toThrow('no table headed | x |');
  });

  it('reads the sh blocks', () => {
    expect(shBlocksOf(DOC)).toEqual(['# not a heading [b](b.md)\necho hi\n']);
  });
});
