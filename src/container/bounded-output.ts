/**
 * A command's output, bounded however much it writes: the first `headBytes` and the last
 * `tailBytes` are kept, everything between is counted and dropped, and the text says so with a
 * mark. Memory stays at about head + tail + one chunk.
 */

/** `[... 10469376 bytes dropped: ...]` between the head and the tail */
export function truncationMark(dropped: number, total: number, head: number, tail: number): string {
  return `\n[... ${dropped} bytes dropped: the output was ${total} bytes; its first ${head} and last ${tail} are shown ...]\n`;
}

/** how many bytes at the end of `buf` start a UTF-8 character that the buffer does not finish */
function partialCharAtEnd(buf: Buffer): number {
  for (let back = 1; back <= Math.min(3, buf.length); back++) {
    const byte = buf[buf.length - back]!;
    if ((byte & 0xc0) === 0x80) continue; // a continuation byte: look further back
    const need = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

/** how many continuation bytes open `buf` (the rest of a character cut off before it) */
function continuationsAtStart(buf: Buffer): number {
  let n = 0;
  while (n < Math.min(3, buf.length) && (buf[n]! & 0xc0) === 0x80) n++;
  return n;
}

export interface BoundedText {
  /** the kept output as text (invalid UTF-8 replaced by U+FFFD), with a truncation mark if bytes were dropped */
  text: string;
  /** bytes the command wrote */
  totalBytes: number;
  /** bytes not in `text` */
  droppedBytes: number;
}

export class BoundedOutput {
  private readonly head: Buffer[] = [];
  private headLength = 0;
  private tail: Buffer[] = [];
  private tailLength = 0;
  private total = 0;

  constructor(
    private readonly headBytes: number,
    private readonly tailBytes: number,
  ) {}

  get totalBytes(): number {
    return this.total;
  }

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.total += chunk.length;
    let rest = chunk;
    if (this.headLength < this.headBytes) {
      const take = Math.min(this.headBytes - this.headLength, rest.length);
      this.head.push(Buffer.from(rest.subarray(0, take)));
      this.headLength += take;
      rest = rest.subarray(take);
      if (rest.length === 0) return;
    }
    this.tail.push(Buffer.from(rest));
    this.tailLength += rest.length;
    // drop whole chunks that lie entirely before the last tailBytes
    while (this.tail.length > 1 && this.tailLength - this.tail[0]!.length >= this.tailBytes) {
      this.tailLength -= this.tail.shift()!.length;
    }
  }

  render(): BoundedText {
    const decoder = new TextDecoder('utf-8', { fatal: false });
    const head = Buffer.concat(this.head);
    let tail = Buffer.concat(this.tail);
    if (tail.length > this.tailBytes) tail = tail.subarray(tail.length - this.tailBytes);
    const dropped = this.total - head.length - tail.length;
    if (dropped === 0) return { text: decoder.decode(Buffer.concat([head, tail])), totalBytes: this.total, droppedBytes: 0 };
    // cut at character boundaries, so the cuts themselves add no replacement characters
    const headCut = head.subarray(0, head.length - partialCharAtEnd(head));
    const tailCut = tail.subarray(continuationsAtStart(tail));
    const droppedBytes = this.total - headCut.length - tailCut.length;
    return {
      text: decoder.decode(headCut) + truncationMark(droppedBytes, this.total, headCut.length, tailCut.length) + decoder.decode(tailCut),
      totalBytes: this.total,
      droppedBytes,
    };
  }
}
