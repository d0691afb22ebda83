/** The one progress bar of check, eval and rows: drawn in place on a terminal, cleared at the end, nothing elsewhere. */
import { describe, expect, it } from 'vitest';
import { progressBar } from '../../src/cli/progress.js';

describe('the progress bar', () => {
  it('shows progress on a terminal only, and clears it at the end', () => {
    let shown = '';
    const tty = progressBar({ isTTY: true, write: (s: string) => (shown += s) });
    tty.update(1000, 2000, 'tasks of train read');
    tty.end();
    expect(shown).toBe(`\r\x1b[2K[${'#'.repeat(15)}${'-'.repeat(15)}] 1000/2000 tasks of train read\r\x1b[2K`);
    let piped = '';
    const pipe = progressBar({ isTTY: false, write: (s: string) => (piped += s) });
    pipe.update(1, 2, 'x');
    pipe.end();
    expect(piped).toBe('');
  });
});
