/**
 * A multipart/form-data body (RFC 7578) read as it arrives: each part is handed on as a stream of
 * its own, written as its bytes come and waited for before the next part starts, so a large file
 * among the parts is never held in memory. What the E2B SDKs send when they upload without
 * octet-stream: one part per file, named `file`, its filename the path.
 */
import { PassThrough, type Readable } from 'node:stream';

export interface Part {
  /** the part's form field name */
  name: string | null;
  /** the filename its Content-Disposition gives (the SDKs put the path there) */
  filename: string | null;
  body: Readable;
}

/** the boundary a multipart content type declares, or null */
export function boundaryOf(contentType: string | undefined): string | null {
  const m = /;\s*boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType ?? '');
  const b = m?.[1] ?? m?.[2] ?? null;
  return b && b.length <= 200 ? b : null;
}

function dispositionOf(headers: string): { name: string | null; filename: string | null } {
  const line = headers.split('\r\n').find((l) => /^content-disposition:/i.test(l)) ?? '';
  const param = (key: string) => {
    const m = new RegExp(`;\\s*${key}="((?:[^"\\\\]|\\\\.)*)"`, 'i').exec(line) ?? new RegExp(`;\\s*${key}=([^;\\s]+)`, 'i').exec(line);
    return m ? m[1]!.replace(/\\(.)/g, '$1') : null;
  };
  return { name: param('name'), filename: param('filename') };
}

/**
 * Calls `onPart` for each part in order, with the part's stream, and waits for it to finish before
 * reading on. Rejects when the body is not multipart as declared (no closing boundary, a part
 * without headers) or holds more than `maxParts` parts.
 */
export async function eachPart(body: Readable, boundary: string, onPart: (p: Part) => Promise<void>, maxParts = 256): Promise<number> {
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  // the body's first boundary has no CRLF before it: one is put there, so every boundary looks alike
  let buf: Buffer = Buffer.from('\r\n');
  let state: 'preamble' | 'after' | 'headers' | 'body' | 'done' = 'preamble';
  let part: { stream: PassThrough; done: Promise<void> } | null = null;
  let parts = 0;

  const startPart = (headers: string) => {
    if (++parts > maxParts) throw new Error(`the body holds more than ${maxParts} parts`);
    const stream = new PassThrough();
    // a broken body ends the part with an error its reader sees; a reader that stopped reading needs none
    stream.on('error', () => {});
    const { name, filename } = dispositionOf(headers);
    const done = onPart({ name, filename, body: stream }).finally(() => stream.resume());
    part = { stream, done };
  };
  const write = async (chunk: Buffer) => {
    if (chunk.length === 0 || !part) return;
    if (!part.stream.write(chunk)) await new Promise<void>((r) => part!.stream.once('drain', r));
  };

  const finished = () => state === 'done';
  const step = async (): Promise<boolean> => {
    switch (state) {
      case 'preamble': {
        const at = buf.indexOf(delimiter);
        if (at < 0) {
          buf = buf.subarray(Math.max(0, buf.length - delimiter.length));
          return false;
        }
        buf = buf.subarray(at + delimiter.length);
        state = 'after';
        return true;
      }
      case 'after': {
        if (buf.length < 2) return false;
        if (buf[0] === 0x2d && buf[1] === 0x2d) {
          state = 'done';
          return false;
        }
        const nl = buf.indexOf('\r\n');
        if (nl < 0) return false;
        buf = buf.subarray(nl + 2);
        state = 'headers';
        return true;
      }
      case 'headers': {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) {
          if (buf.length > 16 * 1024) throw new Error("a part's headers are longer than 16 KiB");
          return false;
        }
        startPart(buf.subarray(0, end).toString('utf8'));
        buf = buf.subarray(end + 4);
        state = 'body';
        return true;
      }
      case 'body': {
        const at = buf.indexOf(delimiter);
        if (at < 0) {
          const keep = Math.min(buf.length, delimiter.length - 1);
          await write(buf.subarray(0, buf.length - keep));
          buf = buf.subarray(buf.length - keep);
          return false;
        }
        await write(buf.subarray(0, at));
        const current = part!;
        current.stream.end();
        await current.done;
        part = null;
        buf = buf.subarray(at + delimiter.length);
        state = 'after';
        return true;
      }
      case 'done':
        return false;
    }
  };

  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
      while (await step());
      if (finished()) break;
    }
    if (!finished()) throw new Error('the body ended before its closing boundary');
  } catch (e) {
    const p = part as { stream: PassThrough; done: Promise<void> } | null;
    p?.stream.destroy(e as Error);
    await p?.done.catch(() => undefined);
    throw e;
  }
  body.resume();
  return parts;
}
