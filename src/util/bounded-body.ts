/**
 * A fetch answer's body read with a bound: whoever answers (an env, a model endpoint) costs this
 * process at most `max` bytes, however much it sends or says it will send; past the bound the rest
 * is not read and the connection is dropped.
 */

/** The body's text, or `{ over }` (the bytes declared or read when it passed `max`). */
export async function readBoundedText(res: Response, max: number): Promise<{ text: string } | { over: number }> {
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (declared > max) {
    void res.body?.cancel().catch(() => {});
    return { over: declared };
  }
  if (!res.body) return { text: '' };
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      void reader.cancel().catch(() => {});
      return { over: size };
    }
    chunks.push(value);
  }
  return {
    text:
      chunks.length === 1
        ? Buffer.from(chunks[0]!.buffer, chunks[0]!.byteOffset, chunks[0]!.byteLength).toString('utf8')
        : Buffer.concat(chunks).toString('utf8'),
  };
}
