/**
 * HTTP calls to one env inside its episode network, each with a deadline (the env contract's
 * shapes: src/protocol/env-contract.ts).
 */
import { ENV_REPLY_MAX_BYTES } from '../defaults.js';
import { AUTH_HEADER, envProof, newNonce, NONCE_HEADER, PROOF_HEADER, proofMatches } from '../sandbox/env-identity.js';

export class EnvCallError extends Error {
  override readonly name = 'EnvCallError';
  constructor(
    /** wrong_env: the answer did not come from this episode's env (see sandbox/env-identity.ts) */
    readonly kind: 'timeout' | 'unreachable' | 'bad_response' | 'aborted' | 'wrong_env' | 'too_large',
    message: string,
    readonly status?: number,
    readonly body?: unknown,
  ) {
    super(message);
  }
}

export interface EnvResponse {
  status: number;
  body: unknown;
}

/** One call to an env with its deadline; rejects with an EnvCallError when no usable answer came. */
export interface EnvCaller {
  request(method: 'GET' | 'POST', path: string, body: unknown, timeoutMs: number, signal?: AbortSignal): Promise<EnvResponse>;
}

/**
 * An env's answer, read up to `max` bytes: an env that streams without end (or answers a
 * gigabyte) costs the server at most that much; past it the connection is dropped.
 */
async function readBounded(res: Response, max: number): Promise<string> {
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (declared > max) {
    void res.body?.cancel().catch(() => {});
    throw new EnvCallError('too_large', `a body of ${declared} bytes, over the ${max / 1024 / 1024} MiB an env answer may have`);
  }
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      void reader.cancel().catch(() => {});
      throw new EnvCallError('too_large', `a body over the ${max / 1024 / 1024} MiB an env answer may have`);
    }
    chunks.push(value);
  }
  return chunks.length === 1
    ? Buffer.from(chunks[0]!.buffer, chunks[0]!.byteOffset, chunks[0]!.byteLength).toString('utf8')
    : Buffer.concat(chunks).toString('utf8');
}

export class EnvClient implements EnvCaller {
  /** the env has proven its identity: from now on every answer must */
  private verified = false;

  /** `secret`: the episode's env-identity secret; without one, answers are not checked */
  constructor(
    readonly baseUrl: string,
    private readonly secret?: string,
  ) {}

  async request(method: 'GET' | 'POST', path: string, body: unknown, timeoutMs: number, signal?: AbortSignal): Promise<EnvResponse> {
    const timeout = AbortSignal.timeout(timeoutMs);
    const combined = signal ? AbortSignal.any([timeout, signal]) : timeout;
    const headers: Record<string, string> = body === undefined ? {} : { 'content-type': 'application/json' };
    const nonce = this.secret ? newNonce() : '';
    if (this.secret) {
      headers[NONCE_HEADER] = nonce;
      headers[AUTH_HEADER] = envProof(this.secret, nonce, 'request');
    }
    let res: Response;
    try {
      res = await fetch(this.baseUrl + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: combined,
      });
    } catch (e) {
      throw this.classify(e, timeout, path, signal);
    }
    if (this.secret) {
      const problem = this.identityProblem(res, nonce);
      if (problem) {
        void res.body?.cancel().catch(() => {});
        throw new EnvCallError('wrong_env', `${method} ${path} was answered by something other than this episode's env: ${problem}`, res.status);
      }
    }
    let text: string;
    try {
      text = await readBounded(res, ENV_REPLY_MAX_BYTES);
    } catch (e) {
      if (e instanceof EnvCallError) throw new EnvCallError(e.kind, `env answered ${method} ${path} with ${e.message}`, res.status);
      throw this.classify(e, timeout, path, signal);
    }
    let parsed: unknown = null;
    if (text.length > 0) {
      try {
        parsed = JSON.parse(text);
      } catch {
        throw new EnvCallError('bad_response', `env answered ${method} ${path} with ${res.status} and a body that is not JSON`, res.status, text.slice(0, 500));
      }
    }
    return { status: res.status, body: parsed };
  }

  /** null when the answer may be the env's; otherwise why it is not */
  private identityProblem(res: Response, nonce: string): string | null {
    if (res.status === 421) return 'HTTP 421 Misdirected Request (an env holding another secret refused the call)';
    const proof = res.headers.get(PROOF_HEADER);
    if (proof === null) {
      // an env that never proves its identity predates the check: nothing to compare
      return this.verified ? `no ${PROOF_HEADER}, though this episode's env has proven itself on every answer so far` : null;
    }
    if (!proofMatches(proof, envProof(this.secret!, nonce, 'response'))) return `a wrong ${PROOF_HEADER} (another episode's env)`;
    this.verified = true;
    return null;
  }

  private classify(e: unknown, timeout: AbortSignal, path: string, signal?: AbortSignal): EnvCallError {
    if (timeout.aborted) return new EnvCallError('timeout', `env did not answer ${path} in time`);
    const err = e as Error;
    if (err?.name === 'AbortError') {
      const why = signal?.reason instanceof Error && signal.reason.name !== 'AbortError' ? `: ${signal.reason.message}` : '';
      return new EnvCallError('aborted', `call to ${path} aborted${why}`);
    }
    const cause = (err as { cause?: { code?: string; message?: string } })?.cause;
    return new EnvCallError('unreachable', `env unreachable on ${path}: ${cause?.code ?? cause?.message ?? err?.message ?? String(e)}`);
  }
}
