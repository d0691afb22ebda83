/**
 * The line a wrapped command's shell prints on stdout once the command has ended:
 * `\n__OE_END <nonce> <exit code> [<working directory>]\n`. It comes after every byte the command
 * wrote (same pipe), so the output is complete when it is seen, even while processes the command
 * left in the background keep the pipe open. The nonce is fresh for each command: output cannot
 * end a command early by accident.
 */
import { randomBytes } from 'node:crypto';
import type { BoundedOutput } from './bounded-output.js';

export const END_TAG = '__OE_END';
/** the line on stderr that says which process (group) runs a command: `__OE_PID <nonce> <pid>` */
export const PID_TAG = '__OE_PID';

export function newNonce(): string {
  return randomBytes(8).toString('hex');
}

export interface EndLine {
  exitCode: number;
  /** what follows the exit code on the line (the shell's working directory), '' when nothing */
  rest: string;
}

/**
 * Feeds a command's stdout into `out` up to its end line. Holds back only the few bytes that may
 * be the start of the line, so a chunk is scanned once.
 */
export class EndMarkerScanner {
  private readonly prefix: Buffer;
  private window = Buffer.alloc(0);
  /** set once the end line has been read */
  end: EndLine | null = null;
  /** bytes after the end line (output of processes left running), for whoever reads next */
  leftover: Buffer = Buffer.alloc(0);

  constructor(
    nonce: string,
    private readonly out: BoundedOutput,
  ) {
    this.prefix = Buffer.from(`\n${END_TAG} ${nonce} `);
  }

  /** true once the end line is complete */
  push(chunk: Buffer): boolean {
    if (this.end) {
      this.leftover = Buffer.concat([this.leftover, chunk]);
      return true;
    }
    const buf = this.window.length === 0 ? chunk : Buffer.concat([this.window, chunk]);
    const at = buf.indexOf(this.prefix);
    if (at < 0) {
      // everything but a tail that could begin the prefix is output
      const keep = Math.min(buf.length, this.prefix.length - 1);
      this.out.push(buf.subarray(0, buf.length - keep));
      this.window = Buffer.from(buf.subarray(buf.length - keep));
      return false;
    }
    this.out.push(buf.subarray(0, at));
    const lineStart = at + this.prefix.length;
    const nl = buf.indexOf(0x0a, lineStart);
    if (nl < 0) {
      this.window = Buffer.from(buf.subarray(at));
      return false;
    }
    const line = buf.subarray(lineStart, nl).toString('utf8');
    const space = line.indexOf(' ');
    const code = Number(space < 0 ? line : line.slice(0, space));
    this.end = { exitCode: Number.isInteger(code) ? code : -1, rest: space < 0 ? '' : line.slice(space + 1) };
    this.leftover = Buffer.from(buf.subarray(nl + 1));
    this.window = Buffer.alloc(0);
    return true;
  }

  /** what was held back (the stream ended before the end line): it was output after all */
  flush(): void {
    if (this.end || this.window.length === 0) return;
    this.out.push(this.window);
    this.window = Buffer.alloc(0);
  }
}

/** Splits a byte stream into lines (for the control lines a wrapper prints on stderr), each at most `maxLine` bytes. */
export class LineSplitter {
  private partial = '';

  constructor(
    private readonly onLine: (line: string) => void,
    private readonly maxLine = 64 * 1024,
  ) {}

  push(chunk: Buffer): void {
    const text = this.partial + chunk.toString('utf8');
    const lines = text.split('\n');
    this.partial = lines.pop() ?? '';
    if (this.partial.length > this.maxLine) this.partial = this.partial.slice(-this.maxLine);
    for (const line of lines) this.onLine(line);
  }
}
