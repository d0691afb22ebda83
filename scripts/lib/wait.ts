/**
 * Waiting, in tests and scripts: for a condition to hold, within a generous bound (never an
 * expectation of speed).
 */

/** polls `cond` every `intervalMs` (100) until it holds, or throws after `timeoutMs` */
export async function waitFor(cond: () => boolean | Promise<boolean>, timeoutMs = 30_000, what = 'condition', intervalMs = 100): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > until) throw new Error(`${what} not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
