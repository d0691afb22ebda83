/** A pino logger whose lines a test reads back: the whole text, or the lines parsed. */
import { Writable } from 'node:stream';
import pino, { type Logger, type LoggerOptions } from 'pino';

export interface CapturedLog {
  logger: Logger;
  /** everything written so far */
  text(): string;
  /** every line so far, parsed */
  lines(): Record<string, any>[];
}

export function captureLog(options: LoggerOptions): CapturedLog {
  let out = '';
  const sink = new Writable({
    write(chunk, _enc, cb) {
      out += chunk.toString();
      cb();
    },
  });
  return {
    logger: pino(options, sink),
    text: () => out,
    lines: () =>
      out
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, any>),
  };
}
