/**
 * The one line splitter for byte streams: task files, engine progress and event streams, child
 * process output. Lines are cut at the byte 0x0a, which never occurs inside a UTF-8 character, and
 * decoded whole, so a chunk boundary that cuts a character changes nothing. "\r\n" ends a line as
 * "\n" does. Bytes of a line that spans chunks are joined once its end is seen (no quadratic
 * concatenation; node:readline's async iteration costs more than parsing large task files).
 */
export interface LineSplitter {
  /** feeds a chunk; `onLine` is called with every line it completes (without "\n" or "\r\n") */
  push(chunk: Buffer | string): void;
  /** the rest, when it is not empty: the last line had no "\n" */
  end(): void;
}

export function lineSplitter(onLine: (line: string) => void): LineSplitter {
  const emit = (buf: Buffer, from: number, to: number) => {
    const end = to > from && buf[to - 1] === 0x0d ? to - 1 : to;
    onLine(buf.toString('utf8', from, end));
  };
  let pending: Buffer[] = [];
  return {
    push(input) {
      const chunk = typeof input === 'string' ? Buffer.from(input, 'utf8') : input;
      let start = 0;
      for (let nl = chunk.indexOf(0x0a); nl !== -1; nl = chunk.indexOf(0x0a, start)) {
        if (pending.length > 0) {
          pending.push(chunk.subarray(start, nl));
          const joined = Buffer.concat(pending);
          pending = [];
          emit(joined, 0, joined.length);
        } else {
          emit(chunk, start, nl);
        }
        start = nl + 1;
      }
      if (start < chunk.length) pending.push(chunk.subarray(start));
    },
    end() {
      if (pending.length === 0) return;
      const joined = Buffer.concat(pending);
      pending = [];
      if (joined.length > 0) emit(joined, 0, joined.length);
    },
  };
}

/** Calls `onLine` with each line of a stream, the last one unterminated too; resolves at its end. */
export async function forEachLine(stream: NodeJS.ReadableStream, onLine: (line: string) => void): Promise<void> {
  const lines = lineSplitter(onLine);
  for await (const chunk of stream as AsyncIterable<Buffer | string>) lines.push(chunk);
  lines.end();
}
