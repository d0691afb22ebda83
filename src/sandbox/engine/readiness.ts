/**
 * Wait strategy: an http env is ready when `GET <readyPath>` answers 200, polled from the server's
 * own network position (the host, or the server's container attached to the episode network); a
 * shell env when an exec in its container answers (the backend's probe). Either races the
 * container's exit and the deploy deadline.
 */
import http from 'node:http';
import { abortError } from './errors.js';
import { sleep } from './retry.js';

/** Readiness: the first probes come fast (most envs are up within a second), then back off. */
const READINESS = { firstDelayMs: 15, fastPhaseMs: 1000, maxDelayMs: 250, probeTimeoutMs: 2000 } as const;

export type ReadyOutcome = { kind: 'ready'; probes: number } | { kind: 'exited'; exitCode: number } | { kind: 'timeout'; lastAnswer: string | null };

export interface ProbeResult {
  ok: boolean;
  /** what the last probe got: an HTTP status or a socket error code */
  answer: string;
}

export function probeHttp(url: string, timeoutMs: number, signal?: AbortSignal): Promise<ProbeResult> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (r: ProbeResult) => {
      if (settled) return;
      settled = true;
      resolve(r);
    };
    let req: http.ClientRequest;
    try {
      req = http.get(url, { agent: false, timeout: timeoutMs, signal, headers: { connection: 'close' } }, (res) => {
        res.resume();
        res.on('error', () => {});
        done({ ok: res.statusCode === 200, answer: `HTTP ${res.statusCode}` });
      });
    } catch (err) {
      done({ ok: false, answer: (err as Error).message });
      return;
    }
    req.on('timeout', () => {
      req.destroy();
      done({ ok: false, answer: `no answer within ${timeoutMs} ms` });
    });
    req.on('error', (err: NodeJS.ErrnoException) => done({ ok: false, answer: err.code ?? err.message }));
  });
}

export interface WaitForHttpOptions extends WaitOptions {
  url: string;
}

export interface WaitOptions {
  /** epoch ms */
  deadline: number;
  /** settles with the exit code when the container stops running */
  exited: Promise<number>;
  signal: AbortSignal;
  now?: () => number;
  /** longest single probe */
  probeTimeoutMs?: number;
}

export function waitForHttp(opts: WaitForHttpOptions): Promise<ReadyOutcome> {
  return waitForProbe((timeoutMs, signal) => probeHttp(opts.url, timeoutMs, signal), opts);
}

/** Polls `probe` (given its longest wait and a signal that stops it) until it says ok, the container exits, or the deadline passes. */
export async function waitForProbe(probe: (timeoutMs: number, signal: AbortSignal) => Promise<ProbeResult>, opts: WaitOptions): Promise<ReadyOutcome> {
  const now = opts.now ?? Date.now;
  const stop = new AbortController();
  let exitCode: number | undefined;
  opts.exited.then(
    (code) => {
      exitCode = code;
      stop.abort();
    },
    () => {},
  );
  const onAbort = () => stop.abort();
  opts.signal.addEventListener('abort', onAbort, { once: true });
  const deadlineTimer = setTimeout(() => stop.abort(), Math.max(0, opts.deadline - now()));
  let lastAnswer: string | null = null;
  // Most envs are ready within a second of starting: poll tightly then (a refused connection
  // costs well under a millisecond), and back off only for slow starters.
  const started = now();
  let delay: number = READINESS.firstDelayMs;
  let probes = 0;
  try {
    for (;;) {
      if (opts.signal.aborted) throw abortError(opts.signal.reason);
      if (exitCode !== undefined) return { kind: 'exited', exitCode };
      const left = opts.deadline - now();
      if (left <= 0) return { kind: 'timeout', lastAnswer };
      probes++;
      const r = await probe(Math.min(opts.probeTimeoutMs ?? READINESS.probeTimeoutMs, left), stop.signal).catch((err: Error) => ({
        ok: false,
        answer: err.message,
      }));
      if (r.ok) return { kind: 'ready', probes };
      if (!stop.signal.aborted) lastAnswer = r.answer;
      await sleep(delay, stop.signal).catch(() => {});
      if (now() - started > READINESS.fastPhaseMs) delay = Math.min(delay * 1.5, READINESS.maxDelayMs);
    }
  } finally {
    clearTimeout(deadlineTimer);
    opts.signal.removeEventListener('abort', onAbort);
  }
}
