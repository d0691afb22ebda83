/**
 * What the command line prints of text it did not write (an env's answers and log lines, a
 * verifier's output, a task's text, a model's words, a file name from a task folder): every
 * control character but newline and tab shown as `\x1b`, so that text cannot move the cursor,
 * clear, retitle or recolour the terminal, or hide what came before it behind a carriage return.
 * Every text printer of the commands writes through `visible`, and every --json printer through
 * `jsonLine`: JSON.stringify escapes C0 but leaves DEL and the C1 controls raw, and U+009B is a
 * CSI to a terminal that reads C1.
 */

/** C0 but newline and tab, DEL, C1 */
const isControl = (code: number) => (code < 0x20 && code !== 0x0a && code !== 0x09) || (code >= 0x7f && code <= 0x9f);
const C1_AND_DEL = /[\u007f-\u009f]/g;

const hex = (code: number, width: number) => code.toString(16).padStart(width, '0');

/** `text` with its control characters shown as `\xNN` (a CRLF line end stays a line end) */
export function visible(text: string): string {
  let out = '';
  for (const ch of text.replace(/\r\n/g, '\n')) {
    const code = ch.codePointAt(0)!;
    out += isControl(code) ? `\\x${hex(code, 2)}` : ch;
  }
  return out;
}

/** `value` as one line of JSON in which no character is a control a terminal acts on */
export function jsonLine(value: unknown): string {
  return JSON.stringify(value).replace(C1_AND_DEL, (c) => `\\u${hex(c.charCodeAt(0), 4)}`);
}
