/** Reading an engine's container and service logs: the multiplexed stream, and a bounded tail of it. */
import { LOG_TAIL_BYTES } from '../../defaults.js';

/**
 * A container without TTY sends its log multiplexed: frames of an 8-byte header (stream type,
 * 3 zero bytes, big-endian payload length) and the payload. Stdout and stderr stay interleaved
 * in the order the engine sent them.
 */
export function demuxLog(buf: Buffer): string {
  const chunks: Buffer[] = [];
  let offset = 0;
  while (offset + 8 <= buf.length) {
    const type = buf[offset];
    const length = buf.readUInt32BE(offset + 4);
    if (type === undefined || type > 2 || buf[offset + 1] !== 0 || buf[offset + 2] !== 0 || buf[offset + 3] !== 0) {
      // not a multiplexed stream after all (a TTY container): take it as it is
      return buf.toString('utf8');
    }
    chunks.push(buf.subarray(offset + 8, offset + 8 + length));
    offset += 8 + length;
  }
  if (offset === 0 && buf.length > 0) return buf.toString('utf8');
  return Buffer.concat(chunks).toString('utf8');
}

/** the tail of a log as the engine answered it (a Buffer, multiplexed or not): its last `lines` lines */
export function logTailOf(raw: unknown, lines: number): string {
  return lastLines(demuxLog(Buffer.isBuffer(raw) ? raw : Buffer.from(String(raw))), lines);
}

/** the last `n` lines of `text`, and of those at most the last `maxBytes` bytes (LOG_TAIL_BYTES) */
export function lastLines(text: string, n: number, maxBytes = LOG_TAIL_BYTES): string {
  const lines = text.replace(/\n+$/, '').split('\n');
  const tail = lines.slice(-n).join('\n');
  if (Buffer.byteLength(tail) <= maxBytes) return tail;
  const cut = Buffer.from(tail)
    .subarray(-maxBytes)
    .toString('utf8')
    .replace(/^\uFFFD/, '');
  return `[...]${cut}`;
}
