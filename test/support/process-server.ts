/**
 * The app with its envs as child processes (ProcessSandbox): no Docker, seconds per suite.
 * `stop()` closes the app (tearing every episode down), then fails if any env process was still
 * held, then closes the sandbox (which kills whatever was left, so no test leaks a process).
 */
import { afterAll, beforeAll } from 'vitest';
import type { AppOptions } from '../../src/app.js';
import type { Sandbox } from '../../src/sandbox/sandbox.js';
import { FIXTURE_BUNDLE, startApp, type TestServer } from './app.js';
import { ProcessSandbox, type ProcessSandboxOptions } from './process-sandbox.js';

export { FIXTURE_BUNDLE } from './app.js';

export interface ProcessServer extends TestServer {
  /** the sandbox running this server's envs: `held()`, `live()`, `peak` */
  sandbox: ProcessSandbox;
}

export interface ProcessServerOptions {
  bundle?: string;
  /** fail stop() when an env process outlived the app (default true) */
  checkLeftovers?: boolean;
  /** wraps the process sandbox before the app gets it (fault injection) */
  wrap?: (sandbox: ProcessSandbox) => Sandbox;
  sandbox?: ProcessSandboxOptions;
}

export async function startProcessServer(
  options: AppOptions = {},
  { bundle = FIXTURE_BUNDLE, checkLeftovers = true, wrap, sandbox: sandboxOptions }: ProcessServerOptions = {},
): Promise<ProcessServer> {
  const sandbox = new ProcessSandbox(sandboxOptions);
  let s: TestServer;
  try {
    s = await startApp({ ...options, sandbox: wrap ? wrap(sandbox) : sandbox }, bundle);
  } catch (e) {
    await sandbox.close();
    throw e;
  }
  let stopped: Promise<void> | null = null;
  const stop = () =>
    (stopped ??= (async () => {
      await s.app.close();
      const left = sandbox.held();
      await sandbox.close();
      if (checkLeftovers && left.length > 0) throw new Error(`env processes left after the app closed, of episodes ${left.join(', ')}`);
    })());
  return { ...s, sandbox, stop };
}

/**
 * One process-backed server for the enclosing suite, started before its tests and stopped (with
 * the leftover check) after them. The returned object is filled in by the time the first test runs.
 */
export function processSuiteServer(options: AppOptions = {}, opts: ProcessServerOptions = {}): ProcessServer {
  const s = {} as ProcessServer;
  beforeAll(async () => {
    Object.assign(s, await startProcessServer(options, opts));
  });
  afterAll(async () => {
    if (s.app) await s.stop();
  });
  return s;
}
