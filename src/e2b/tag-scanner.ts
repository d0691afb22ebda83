/**
 * One control line cut out of a byte stream: `<tag> <nonce> <value>\n`, wherever it falls (a
 * command's output before it need not end with a newline). What comes before it is handed on
 * as it arrives, holding back only the few bytes that may begin the line; what follows it is
 * dropped (the stream's end). The nonce is fresh per process: no output can forge the line.
 */
export class TagScanner {
  private readonly prefix: Buffer;
  private held = Buffer.alloc(0);
  /** the line's value once it was read */
  value: string | null = null;

  constructor(tag: string, nonce: string) {
    this.prefix = Buffer.from(`${tag} ${nonce} `);
  }

  /** the bytes of `chunk` (with what was held) that are output: everything before the line */
  push(chunk: Buffer): Buffer {
    if (this.value !== null) return Buffer.alloc(0);
    const buf = this.held.length === 0 ? chunk : Buffer.concat([this.held, chunk]);
    const at = buf.indexOf(this.prefix);
    if (at < 0) {
      const keep = Math.min(buf.length, this.prefix.length - 1);
      this.held = Buffer.from(buf.subarray(buf.length - keep));
      return buf.subarray(0, buf.length - keep);
    }
    const nl = buf.indexOf(0x0a, at + this.prefix.length);
    if (nl < 0) {
      // a value longer than any we write is no line of ours: the prefix passes as output
      if (buf.length - at > this.prefix.length + 64) {
        this.held = Buffer.alloc(0);
        return buf;
      }
      this.held = Buffer.from(buf.subarray(at));
      return buf.subarray(0, at);
    }
    this.value = buf.subarray(at + this.prefix.length, nl).toString('utf8');
    this.held = Buffer.alloc(0);
    return buf.subarray(0, at);
  }

  /** what was held back when the stream ended without the line: output after all */
  flush(): Buffer {
    const rest = this.held;
    this.held = Buffer.alloc(0);
    return this.value === null ? rest : Buffer.alloc(0);
  }
}
