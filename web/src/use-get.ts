/**
 * The page's one fetch effect: GET a path whenever it (or `refresh`) changes, abort the request
 * in flight when it changes again or the view goes away, and keep the last answer while the next
 * one loads. A 404 is reported as `notFound`, any other failure as its message.
 */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, get } from './api';

export interface Got<T> {
  data: T | null;
  error: string | null;
  notFound: boolean;
}

/** `path` null: nothing to fetch. `delayMs`: wait this long first (typing, a burst of updates). */
export function useGet<T>(path: string | null, opts: { refresh?: unknown; delayMs?: number; onData?: (t: T) => void } = {}): Got<T> {
  const [got, setGot] = useState<Got<T>>({ data: null, error: null, notFound: false });
  useEffect(() => {
    if (path === null) return;
    const ctl = new AbortController();
    const timer = setTimeout(() => {
      get<T>(path, ctl.signal).then(
        (data) => {
          if (ctl.signal.aborted) return;
          setGot({ data, error: null, notFound: false });
          opts.onData?.(data);
        },
        (e: Error) => {
          if (ctl.signal.aborted) return;
          setGot((g) => ({ data: g.data, error: e.message, notFound: e instanceof ApiError && e.status === 404 }));
        },
      );
    }, opts.delayMs ?? 0);
    return () => {
      clearTimeout(timer);
      ctl.abort();
    };
  }, [path, opts.refresh]);
  return got;
}
