/** Runs `node dist/serve.js` as a real process and reads its JSON log lines. */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { onTestFinished } from 'vitest';

export const SERVE_JS = fileURLToPath(new URL('../../dist/serve.js', import.meta.url));

export interface ServerProcess {
  child: ChildProcess;
  url: string;
  lines: () => Record<string, unknown>[];
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export async function spawnServer(args: string[], env: Record<string, string> = {}, readyTimeoutMs = 120_000): Promise<ServerProcess> {
  const child = spawn(process.execPath, [SERVE_JS, ...args], {
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d.toString()));
  child.stderr!.on('data', (d) => (out += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  stopWhenTheTestEnds(child, exited);
  const lines = () =>
    out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => {
        try {
          return JSON.parse(l) as Record<string, unknown>;
        } catch {
          return {};
        }
      });
  const until = Date.now() + readyTimeoutMs;
  let address: string | undefined;
  while (Date.now() < until) {
    const ls = lines();
    address ??= ls.find((l) => typeof l.address === 'string')?.address as string | undefined;
    if (address && ls.some((l) => l.event === 'ready')) break;
    if (child.exitCode !== null) throw new Error(`server exited early (${child.exitCode}):\n${out}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  if (!address || !lines().some((l) => l.event === 'ready')) {
    child.kill('SIGKILL');
    throw new Error(`server not ready in time:\n${out}`);
  }
  return { child, url: `http://${address}`, lines, output: () => out, exited };
}

/**
 * A server a test left running (it failed before its own kill) is drained when the test ends, so
 * that its envs do not outlive it and trip the tests after it; SIGKILL if the drain hangs.
 */
function stopWhenTheTestEnds(child: ChildProcess, exited: Promise<unknown>): void {
  const running = () => child.exitCode === null && child.signalCode === null;
  try {
    onTestFinished(async () => {
      if (!running()) return;
      child.kill('SIGTERM');
      const drained = await Promise.race([exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 30_000).unref())]);
      if (!drained && running()) child.kill('SIGKILL');
    });
  } catch {
    // spawned outside a test (a hook): the suite stops it itself
  }
}
