/**
 * HTTP calls to one env inside its episode network, each with a deadline (the env contract's
 * shapes: src/protocol/env-contract.ts), over src/util/http-request.ts (node:http, not fetch). Each
 * client keeps its own keep-alive connection, never shared with another episode's: a recycled
 * network gives a later env the same address.
 */
import http from 'node:http';
import { ENV_CONNECTION_IDLE_MS } from '../defaults.js';
import { jsonDepthExceeds } from '../util/json.js';
import { deadline, headerOf, requestBounded, type RawReply } from '../util/http-request.js';
import { AUTH_HEADER, envProof, newNonce, NONCE_HEADER, PROOF_HEADER, proofMatches } from '../sandbox/env-identity.js';

/** The largest answer the server reads from an env (a tool result, scores); past it the call fails. */
const ENV_REPLY_MAX_BYTES = 16 * 1024 * 1024;

/** Nesting depth allowed in what an env answers (a tool result, scores), as MAX_ARGUMENT_DEPTH for what a model sends. */
export const ENV_REPLY_MAX_DEPTH = 64;

export class EnvCallError extends Error {
  override readonly name = 'EnvCallError';
  constructor(
    /**
     * wrong_env: the answer did not come from this episode's env (see sandbox/env-identity.ts);
     * too_large: an answer past what the server reads (ENV_REPLY_MAX_BYTES, or nested deeper than
     * ENV_REPLY_MAX_DEPTH); bad_response: one it cannot use (not JSON, a redirect)
     */
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

export class EnvClient implements EnvCaller {
  /** the env has proven its identity: from now on every answer must */
  private verified = false;
  /** this episode's own connection to its env, kept between calls (ENV_CONNECTION_IDLE_MS) */
  private readonly agent: http.Agent;
  /** the env's address, parsed once (every call goes there): host, port, and the path calls go under */
  private readonly base: { hostname: string; port: string; prefix: string };

  /**
   * `secret`: the episode's env-identity secret; without one, answers are not checked. `agent`: the
   * env's kept connection (http-request.ts keptConnection(handle), which the pool's hand-out check
   * may have opened already); absent, one of the client's own.
   */
  constructor(
    readonly baseUrl: string,
    private readonly secret?: string,
    agent?: http.Agent,
  ) {
    this.agent = agent ?? new http.Agent({ keepAlive: true, timeout: ENV_CONNECTION_IDLE_MS });
    const u = new URL(baseUrl);
    this.base = { hostname: u.hostname, port: u.port, prefix: u.pathname.replace(/\/$/, '') };
  }

  async request(method: 'GET' | 'POST', path: string, body: unknown, timeoutMs: number, signal?: AbortSignal): Promise<EnvResponse> {
    const call = deadline(timeoutMs, signal);
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string> =
      payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) };
    const nonce = this.secret ? newNonce() : '';
    if (this.secret) {
      headers[NONCE_HEADER] = nonce;
      headers[AUTH_HEADER] = envProof(this.secret, nonce, 'request');
    }
    let res: RawReply;
    try {
      res = await requestBounded({
        hostname: this.base.hostname,
        port: this.base.port,
        path: this.base.prefix + path,
        method,
        headers,
        ...(payload === undefined ? {} : { body: payload }),
        signal: call.signal,
        agent: this.agent,
        max: ENV_REPLY_MAX_BYTES,
      });
    } catch (e) {
      throw this.classify(e, call.timedOut(), path, signal);
    } finally {
      // the reply is read whole by now
      call.done();
    }
    // an env's redirect is never followed: it would make the server fetch any URL (a service on
    // the host's loopback, the server's own API, another episode's env) for the env
    if (res.status >= 300 && res.status < 400) {
      const to = headerOf(res.headers, 'location');
      throw new EnvCallError(
        'bad_response',
        `env answered ${method} ${path} with a redirect (HTTP ${res.status}${to ? ` to ${JSON.stringify(to.slice(0, 200))}` : ''}): the server never follows an env's redirect`,
        res.status,
      );
    }
    if (this.secret) {
      const problem = this.identityProblem(res.status, headerOf(res.headers, PROOF_HEADER), nonce);
      if (problem) throw new EnvCallError('wrong_env', `${method} ${path} was answered by something other than this episode's env: ${problem}`, res.status);
    }
    if ('over' in res.body) {
      throw new EnvCallError(
        'too_large',
        `env answered ${method} ${path} with a body over the ${ENV_REPLY_MAX_BYTES / 1024 / 1024} MiB an env answer may have`,
        res.status,
      );
    }
    const text = res.body.text;
    let parsed: unknown = null;
    if (text.length > 0) {
      try {
        parsed = JSON.parse(text);
      } catch {
        throw new EnvCallError('bad_response', `env answered ${method} ${path} with ${res.status} and a body that is not JSON`, res.status, text.slice(0, 500));
      }
      if (jsonDepthExceeds(parsed, ENV_REPLY_MAX_DEPTH)) {
        throw new EnvCallError('too_large', `env answered ${method} ${path} with JSON nested deeper than ${ENV_REPLY_MAX_DEPTH} levels`, res.status);
      }
    }
    return { status: res.status, body: parsed };
  }

  /** null when the answer may be the env's; otherwise why it is not */
  private identityProblem(status: number, proof: string | null, nonce: string): string | null {
    if (status === 421) return 'HTTP 421 Misdirected Request (an env holding another secret refused the call)';
    if (proof === null) {
      // an env that never proves its identity predates the check: nothing to compare
      return this.verified ? `no ${PROOF_HEADER}, though this episode's env has proven itself on every answer so far` : null;
    }
    if (!proofMatches(proof, envProof(this.secret!, nonce, 'response'))) return `a wrong ${PROOF_HEADER} (another episode's env)`;
    this.verified = true;
    return null;
  }

  private classify(e: unknown, timedOut: boolean, path: string, signal?: AbortSignal): EnvCallError {
    if (timedOut) return new EnvCallError('timeout', `env did not answer ${path} in time`);
    const err = e as Error & { code?: string };
    if (signal?.aborted || err?.name === 'AbortError') {
      const why = signal?.reason instanceof Error && signal.reason.name !== 'AbortError' ? `: ${signal.reason.message}` : '';
      return new EnvCallError('aborted', `call to ${path} aborted${why}`);
    }
    return new EnvCallError('unreachable', `env unreachable on ${path}: ${err?.code ?? err?.message ?? String(e)}`);
  }
}
