/** src/util/lines.ts: lines cut anywhere, UTF-8 characters cut anywhere, "\r\n", an unterminated last line. */
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { forEachLine, lineSplitter } from '../src/util/lines.js';

function splitAll(chunks: (Buffer | string)[]): string[] {
  const out: string[] = [];
  const s = lineSplitter((l) => out.push(l));
  for (const c of chunks) s.push(c);
  s.end();
  return out;
}

describe('lineSplitter', () => {
  const text = 'héllo wörld ✓ 🚀\r\nsecond\n\nlast without end';
  const bytes = Buffer.from(text, 'utf8');
  const expected = ['héllo wörld ✓ 🚀', 'second', '', 'last without end'];

  it('gives the same lines wherever the chunks cut, inside a character too', () => {
    for (let cut = 0; cut <= bytes.length; cut++) {
      expect(splitAll([bytes.subarray(0, cut), bytes.subarray(cut)]), `cut at byte ${cut}`).toEqual(expected);
    }
    expect(splitAll([...bytes].map((b) => Buffer.from([b])))).toEqual(expected);
  });

  it('takes strings, and emits nothing for an empty rest', () => {
    expect(splitAll(['a\nb', '\n'])).toEqual(['a', 'b']);
    expect(splitAll([])).toEqual([]);
  });

  it('forEachLine reads a stream to its end', async () => {
    const seen: string[] = [];
    await forEachLine(Readable.from([bytes.subarray(0, 3), bytes.subarray(3)]), (l) => seen.push(l));
    expect(seen).toEqual(expected);
  });
});
