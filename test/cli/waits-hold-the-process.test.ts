/**
 * Nothing a command waits on may let its process exit under it: a timer that does not hold the
 * process open (`.unref()`) is allowed only for work nobody awaits (a heartbeat, housekeeping of
 * a server, whose listening socket holds the process anyway). Every `.unref()` in src/ is listed
 * here with why it may be; a new one fails this test until it is justified. And the waits that
 * once were unref'd are proven in a process of their own: a reset waiting for a slot ends with
 * its timeout's error, not with a process that ran out of work.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SRC = fileURLToPath(new URL('../../src/', import.meta.url));
const DIST = fileURLToPath(new URL('../../dist/', import.meta.url));

/** file → why its unref'd timers hold no wait a command awaits */
const ALLOWED: Record<string, { count: number; why: string }> = {
  'app.ts': { count: 2, why: "the close's sweeps of idle connections: the connections themselves hold the process, and serve's close budget is ref'd" },
  'episodes/episode.ts': { count: 1, why: 'the episode-timeout watchdog: a step awaits its tool call (a socket), never the watchdog' },
  'episodes/turn-clock.ts': { count: 1, why: "a task's or a turn's time budget: a step awaits its tool call (a socket), never the budget" },
  'episodes/manager.ts': { count: 1, why: 'the reconciler: periodic housekeeping nobody awaits' },
  'episodes/capacity/refill-backoff.ts': { count: 1, why: "the warm pool's refill pause: nobody awaits a refill" },
  'episodes/capacity/pool.ts': {
    count: 2,
    why: "a group's reset waiting for an env still deploying (the deploy's engine connection holds the process; the deadline only sends it to the queue), and an anticipated env's expiry, which nobody awaits",
  },
  'e2b/connect-rpc.ts': { count: 1, why: "a Connect stream's keepalive messages: the stream's socket holds the process" },
  'e2b/processes.ts': {
    count: 1,
    why: "an E2B process's timeout: its call awaits the process's end, and the exec's connection to the engine holds the process",
  },
  'e2b/sandbox.ts': { count: 1, why: "an E2B sandbox's timeout: nobody awaits it, the server's listening socket holds the process" },
  'http-connections.ts': { count: 1, why: "a connection's headers timer: the server's own sockets hold the process" },
  'routes/console.ts': { count: 1, why: "the console stream's ticks: the server's own sockets hold the process" },
  'sandbox/engine/instance-lock.ts': {
    count: 2,
    why: "the holder's heartbeat and marker watch: background renewal nobody awaits (the claim's waits are ref'd)",
  },
  'sandbox/engine/storage-watch.ts': { count: 1, why: "a storage bound's next look: nothing awaits it, the env's episode holds the process" },
  'sandbox/docker/reaper.ts': {
    count: 2,
    why: "the watcher's process and the pipe to it: the server is never to wait for its watcher, whose whole job starts when the server is gone",
  },
  'sandbox/engine/network-stock.ts': { count: 1, why: "the stock's refill pause: a deploy takes a stocked network or makes its own, never waits for a refill" },
  'sessions/idle-clock.ts': { count: 1, why: "a session's idle timeout: the session's socket or the server's holds the process" },
  'sessions/mcp-standard-sessions.ts': { count: 1, why: 'forgetting an ended MCP session: housekeeping' },
  'sessions/request-episodes.ts': { count: 1, why: 'forgetting an ended HTTP episode: housekeeping' },
  'sessions/ws-session.ts': { count: 1, why: 'WebSocket pings: the socket holds the process' },
};

function sources(dir: string, rel = ''): string[] {
  return readdirSync(path.join(dir, rel), { withFileTypes: true }).flatMap((e) => {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) return sources(dir, r);
    return e.name.endsWith('.ts') ? [r] : [];
  });
}

describe('the waits a command awaits hold its process open', () => {
  it('every .unref() in src/ is one that holds no awaited wait, and says why', () => {
    const found: Record<string, number> = {};
    for (const file of sources(SRC)) {
      const n = (readFileSync(path.join(SRC, file), 'utf8').match(/\.unref\b/g) ?? []).length;
      if (n > 0) found[file] = n;
    }
    expect(found).toEqual(Object.fromEntries(Object.entries(ALLOWED).map(([f, a]) => [f, a.count])));
  });

  it('a reset waiting for a slot, alone in its process, ends with its timeout, not with "exited without a result"', () => {
    const script = [
      `import { runAsProcess } from ${JSON.stringify(path.join(DIST, 'cli/process-entry.js'))};`,
      `import { Admission } from ${JSON.stringify(path.join(DIST, 'episodes/capacity/admission.js'))};`,
      'const admission = new Admission(1, 8);',
      'runAsProcess(async () => {',
      '  await admission.acquire({ timeoutMs: 1000 });',
      // the slot is never given back: the second reset can only time out
      '  await admission.acquire({ timeoutMs: 300 });',
      '  return 0;',
      '});',
    ].join('\n');
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 });
    expect(r.stderr).not.toContain('exited without a result');
    expect(r.stderr).toMatch(/^error: no env slot became free within the reset timeout \(0\.3 s\)/);
    expect(r.status).toBe(1);
  });
});
