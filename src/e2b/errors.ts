/**
 * A refusal of the E2B control API, answered in E2B's error shape `{code, message}` under the
 * HTTP status the SDKs map (401 AuthenticationError, 404 not found, 429 RateLimitError and its
 * retry, 503 ServiceBusyError). Messages say what to do; one that means "this will not work on a
 * retry" says "does not exist" (slime's sandbox retries any other SandboxException).
 */
export class E2bApiError extends Error {
  override readonly name = 'E2bApiError';
  constructor(
    readonly status: number,
    message: string,
    /** seconds a client should wait before it retries (Retry-After), for 429 and 503 */
    readonly retryAfterS?: number,
  ) {
    super(message);
  }
}

/** Not served by this server: named, with what it serves instead. */
export function notServed(what: string, instead = ''): E2bApiError {
  return new E2bApiError(
    501,
    `${what} does not exist on this server (an OpenEnv bundle server's E2B API serves sandboxes: create, get, list, kill, timeout, refresh, pause, connect, metrics)${instead ? `; ${instead}` : ''}`,
  );
}
