/** AbortError, the one way the episode machinery and the sandbox say "stopped because asked to". */

export function abortError(reason?: unknown): Error {
  const message = reason instanceof Error ? reason.message : typeof reason === 'string' ? reason : 'the operation was aborted';
  const err = new Error(message);
  err.name = 'AbortError';
  return err;
}

export function isAbortError(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { name?: unknown }).name === 'AbortError';
}

export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw abortError(signal.reason);
}
