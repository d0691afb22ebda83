/**
 * Server-sent events read incrementally, as the bytes of a streamed reply pass through the
 * gateway (they are forwarded untouched; this only watches them): lines split on LF, CRLF or CR,
 * UTF-8 decoded across chunk boundaries, one event per blank line. A line longer than the bound
 * is an error, so a reply that never ends a line cannot grow the parser's buffer without limit.
 * Given `onBlock`, it also hands back each block's text (up to its blank line), so that a caller
 * may pass a stream on block by block and leave one out (a usage chunk the harness did not ask for).
 */
import { StringDecoder } from 'node:string_decoder';

export interface SseEvent {
  /** the `event:` field ('' when the event named none) */
  event: string;
  /** the `data:` lines, joined with newlines */
  data: string;
}

/**
 * One block of a stream as it came (line ends made LF), its blank line included, and the event it
 * dispatches (null for a block of comments alone, a keep-alive): called before push() returns it.
 */
export type SseBlockListener = (raw: string, event: SseEvent | null) => void;

export class SseParser {
  private readonly decoder = new StringDecoder('utf8');
  private pending = '';
  /** the previous chunk ended with CR: an LF starting the next one belongs to it */
  private lastWasCr = false;
  private event = '';
  private data: string[] = [];
  /** with onBlock: the lines of the block so far */
  private raw = '';

  constructor(
    private readonly maxLineChars: number,
    private readonly onBlock?: SseBlockListener,
  ) {}

  /** the events the chunk completes; throws when a line is past the bound */
  push(chunk: Buffer): SseEvent[] {
    let text = this.decoder.write(chunk);
    // an empty chunk (or one that only began a character) says nothing about a pending CR
    if (text === '') return [];
    if (this.lastWasCr && text.startsWith('\n')) text = text.slice(1);
    this.lastWasCr = false;
    const out: SseEvent[] = [];
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c !== 0x0a && c !== 0x0d) continue;
      const line = this.pending + text.slice(start, i);
      this.pending = '';
      if (c === 0x0d) {
        if (i + 1 < text.length) {
          if (text.charCodeAt(i + 1) === 0x0a) i++;
        } else this.lastWasCr = true;
      }
      start = i + 1;
      this.line(line, out);
    }
    this.pending += text.slice(start);
    if (this.pending.length > this.maxLineChars) throw new Error(`a line of the stream is longer than ${this.maxLineChars} characters`);
    return out;
  }

  /** the event a stream that ended without its last blank line still completes */
  end(): SseEvent[] {
    const out: SseEvent[] = [];
    const rest = this.pending + this.decoder.end();
    this.pending = '';
    if (rest !== '') this.line(rest, out);
    // the blank line the stream did not send: nothing of it is handed back
    if (this.raw !== '' || this.data.length > 0) this.line('', out, '');
    return out;
  }

  private line(line: string, out: SseEvent[], eol = '\n'): void {
    if (this.onBlock) this.raw += line + eol;
    if (line === '') {
      const e = this.data.length > 0 ? { event: this.event, data: this.data.join('\n') } : null;
      if (e) out.push(e);
      this.event = '';
      this.data = [];
      if (this.onBlock) {
        const raw = this.raw;
        this.raw = '';
        this.onBlock(raw, e);
      }
      return;
    }
    if (line.startsWith(':')) return; // a comment (keep-alive)
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
  }
}
