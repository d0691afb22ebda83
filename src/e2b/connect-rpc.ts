/**
 * The Connect protocol (connectrpc.com/docs/protocol) as envd speaks it to the E2B SDKs, in its
 * JSON form (both SDKs send JSON: the JS SDK's `useBinaryFormat: false`, the Python SDK's JSON
 * codec): a unary call is a POST of `application/json` answered with JSON, or with an error
 * object `{code, message}` under the HTTP status its code maps to; a server stream is a POST of
 * `application/connect+json` whose body is one enveloped message (a flags byte, a 32-bit length,
 * the JSON), answered with enveloped messages and an end-of-stream envelope (flags 0x02) that
 * carries the error, if any, always under HTTP 200. Binary protobuf and compressed envelopes are
 * refused with a message that says so.
 */
import { PassThrough } from 'node:stream';

/** Connect's error codes (its spec's names). */
export type ConnectCode =
  | 'canceled'
  | 'unknown'
  | 'invalid_argument'
  | 'deadline_exceeded'
  | 'not_found'
  | 'already_exists'
  | 'permission_denied'
  | 'resource_exhausted'
  | 'failed_precondition'
  | 'aborted'
  | 'out_of_range'
  | 'unimplemented'
  | 'internal'
  | 'unavailable'
  | 'data_loss'
  | 'unauthenticated';

/** the HTTP status a unary error is answered with (the spec's table) */
export const CONNECT_HTTP_STATUS: Record<ConnectCode, number> = {
  canceled: 499,
  unknown: 500,
  invalid_argument: 400,
  deadline_exceeded: 504,
  not_found: 404,
  already_exists: 409,
  permission_denied: 403,
  resource_exhausted: 429,
  failed_precondition: 400,
  aborted: 409,
  out_of_range: 400,
  unimplemented: 501,
  internal: 500,
  unavailable: 503,
  data_loss: 500,
  unauthenticated: 401,
};

/** A call's failure as Connect carries it; the message says what to do. */
export class ConnectError extends Error {
  override readonly name = 'ConnectError';
  constructor(
    readonly code: ConnectCode,
    message: string,
  ) {
    super(message);
  }

  get body(): { code: ConnectCode; message: string } {
    return { code: this.code, message: this.message };
  }
}

export const CONNECT_JSON = 'application/json';
export const CONNECT_STREAM_JSON = 'application/connect+json';
/** envelope flags: the message is compressed; the message ends the stream */
const FLAG_COMPRESSED = 0x01;
const FLAG_END = 0x02;

/** the media type without its parameters, lower case */
export function mediaType(contentType: string | undefined): string {
  return (contentType ?? '').split(';', 1)[0]!.trim().toLowerCase();
}

/** why a body of this content type cannot be a call of ours, or null when it can */
export function refusedContentType(contentType: string | undefined, streaming: boolean): ConnectError | null {
  const type = mediaType(contentType);
  const want = streaming ? CONNECT_STREAM_JSON : CONNECT_JSON;
  if (type === want) return null;
  if (type.endsWith('proto'))
    return new ConnectError('unimplemented', `this server speaks Connect's JSON form only (${want}), not binary protobuf: the E2B SDKs send JSON`);
  return new ConnectError('invalid_argument', `expected content-type ${want} for this ${streaming ? 'server-streaming' : 'unary'} call, got ${type || 'none'}`);
}

/** The message of a streaming call's request body: exactly one uncompressed envelope of JSON. */
export function parseEnvelope(body: Buffer): unknown {
  if (body.length < 5) throw new ConnectError('invalid_argument', 'the request body is not a Connect envelope (5 bytes of header, then the message)');
  const flags = body[0]!;
  const length = body.readUInt32BE(1);
  if (flags & FLAG_COMPRESSED) throw new ConnectError('unimplemented', 'compressed request messages are not served: send them uncompressed');
  if (5 + length !== body.length)
    throw new ConnectError('invalid_argument', `the request body holds ${body.length - 5} bytes after its envelope header, which announces ${length}`);
  return parseJson(body.subarray(5));
}

export function parseJson(buf: Buffer): unknown {
  try {
    return buf.length === 0 ? {} : JSON.parse(buf.toString('utf8'));
  } catch {
    throw new ConnectError('invalid_argument', 'the request message is not valid JSON');
  }
}

export function envelope(message: unknown, end = false): Buffer {
  const json = Buffer.from(JSON.stringify(message), 'utf8');
  const head = Buffer.alloc(5);
  head[0] = end ? FLAG_END : 0;
  head.writeUInt32BE(json.length, 1);
  return Buffer.concat([head, json]);
}

/** `Connect-Timeout-Ms`: the call's deadline in milliseconds from now; null when none (or 0, which envd takes as none) */
export function callTimeoutMs(header: string | string[] | undefined): number | null {
  const v = Array.isArray(header) ? header[0] : header;
  if (v === undefined || !/^\d{1,10}$/.test(v)) return null;
  const ms = Number(v);
  return ms > 0 ? ms : null;
}

/**
 * A server stream's body: messages as they come, a keepalive message every `keepaliveMs` (the
 * SDKs ask with `Keepalive-Ping-Interval`), and one end-of-stream envelope. `write` says whether
 * the reader keeps up: false, and the caller waits for `drained()` before it writes more.
 */
export class ServerStream {
  readonly body = new PassThrough();
  private ended = false;
  private keepalive: NodeJS.Timeout | null = null;

  constructor(keepaliveMs: number | null, keepaliveMessage: unknown) {
    if (keepaliveMs !== null) {
      this.keepalive = setInterval(() => this.write(keepaliveMessage), keepaliveMs);
      this.keepalive.unref();
    }
    // the reader went away: nothing more is written
    this.body.on('close', () => this.stop());
  }

  get closed(): boolean {
    return this.ended || this.body.destroyed;
  }

  write(message: unknown): boolean {
    if (this.closed) return true;
    return this.body.write(envelope(message));
  }

  /** resolves once the reader took what was written (or went away) */
  drained(): Promise<void> {
    if (this.closed || !this.body.writableNeedDrain) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.body.off('drain', done);
        this.body.off('close', done);
        resolve();
      };
      this.body.once('drain', done);
      this.body.once('close', done);
    });
  }

  /** the end-of-stream envelope (with the error, if any); nothing is written after it */
  end(error?: ConnectError): void {
    if (this.closed) return;
    this.stop();
    this.body.end(envelope(error ? { error: error.body } : {}, true));
  }

  private stop(): void {
    this.ended = true;
    if (this.keepalive) clearInterval(this.keepalive);
    this.keepalive = null;
  }
}

/** `Authorization: Basic base64(user:)`: the user an envd call acts as (envd's own scheme); null when none is named */
export function basicUser(header: string | undefined): string | null {
  if (!header) return null;
  const m = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(header.trim());
  if (!m) return null;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const user = decoded.slice(0, decoded.includes(':') ? decoded.indexOf(':') : undefined);
  return user === '' ? null : user;
}
