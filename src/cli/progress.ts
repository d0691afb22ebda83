/**
 * The one progress bar of the command line (check, eval, rows): `[#########-----]  9/20 what`, one
 * line on stderr redrawn in place, cleared at the end so the output that follows starts clean.
 * Nothing at all when stderr is not a terminal (a pipe, a file, CI logs).
 */
import { visible } from './terminal-text.js';

export interface ProgressBar {
  /** `done` of `total`; `what` says what is counted and anything worth a glance (a running mean) */
  update(done: number, total: number, what: string): void;
  end(): void;
}

const WIDTH = 30;

export function progressBar(stream: { isTTY?: boolean; write(s: string): unknown }): ProgressBar {
  if (!stream.isTTY) return { update() {}, end() {} };
  let shown = false;
  return {
    update(done, total, what) {
      shown = true;
      const filled = total ? Math.min(WIDTH, Math.round((done / total) * WIDTH)) : WIDTH;
      stream.write(`\r\x1b[2K[${'#'.repeat(filled)}${'-'.repeat(WIDTH - filled)}] ${done}/${total} ${visible(what)}`);
    },
    end() {
      if (shown) stream.write('\r\x1b[2K');
      shown = false;
    },
  };
}
