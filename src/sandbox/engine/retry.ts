import { Backoff } from '../../util/backoff.js';
import { abortError } from './errors.js';

/** resolves after `ms`, or rejects with an AbortError as soon as `signal` aborts */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortError(signal.reason));
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError(signal?.reason));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export interface RetryOptions {
  attempts: number;
  /** first delay; doubles after each failure */
  baseDelayMs: number;
  signal?: AbortSignal;
  onRetry?: (err: unknown, attempt: number) => void;
}

/** runs `fn` until it resolves or `attempts` runs failed; rethrows the last failure */
export async function retry<T>(fn: () => Promise<T>, opts: RetryOptions): Promise<T> {
  let lastErr: unknown;
  const delays = new Backoff(opts.baseDelayMs);
  for (let attempt = 1; attempt <= opts.attempts; attempt++) {
    try {
      return await fn();
    } catch (err) {
      lastErr = err;
      if (attempt === opts.attempts) break;
      opts.onRetry?.(err, attempt);
      await sleep(delays.next(), opts.signal);
    }
  }
  throw lastErr;
}
