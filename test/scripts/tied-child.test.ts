/**
 * scripts/lib/tied-child.ts: a server a bench or soak starts ends with it, even when the script is
 * SIGKILLed (the kernel SIGTERMs it), instead of living on with its envs.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../scripts/lib/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'openenv-tied-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('a child tied to the script that started it', () => {
  it('is SIGTERMed by the kernel when the script is SIGKILLed, and runs node itself (its pid is the server process)', async () => {
    const marker = join(dir, 'got-sigterm');
    // the "server": says its pid and argv, notes a SIGTERM, otherwise runs forever
    const server = join(dir, 'server.mjs');
    writeFileSync(
      server,
      `import { writeFileSync } from 'node:fs';
       process.on('SIGTERM', () => { writeFileSync(${JSON.stringify(marker)}, 'SIGTERM'); process.exit(0); });
       console.log(JSON.stringify({ pid: process.pid, argv0: process.argv[0] }));
       setInterval(() => {}, 1000);`,
    );
    // the "bench": starts it tied, passes its line on, then waits to be killed
    const bench = join(dir, 'bench.ts');
    writeFileSync(
      bench,
      `import { spawnTiedNode } from ${JSON.stringify(join(process.cwd(), 'scripts/lib/tied-child.ts'))};
       const child = spawnTiedNode([${JSON.stringify(server)}], { stdio: ['ignore', 'pipe', 'inherit'] });
       child.stdout!.on('data', (c) => process.stdout.write(JSON.stringify({ spawned: child.pid, said: JSON.parse(String(c)) }) + '\\n'));
       setInterval(() => {}, 1000);`,
    );
    const parent = spawn(process.execPath, ['--import', 'tsx', bench], { stdio: ['ignore', 'pipe', 'inherit'] });
    let line = '';
    parent.stdout.on('data', (c) => (line += String(c)));
    await waitFor(() => line.includes('\n'), 30_000, 'the bench saying its server started', 50);
    const { spawned, said } = JSON.parse(line) as { spawned: number; said: { pid: number; argv0: string } };
    // setpriv execs node: the pid the script holds is the server's own
    expect(said.pid).toBe(spawned);
    expect(said.argv0).toBe(process.execPath);
    expect(alive(said.pid)).toBe(true);

    parent.kill('SIGKILL');
    await waitFor(() => existsSync(marker), 10_000, 'the server told SIGTERM after the bench died', 50);
    expect(readFileSync(marker, 'utf8')).toBe('SIGTERM');
    await waitFor(() => !alive(said.pid), 10_000, 'the server gone', 50);
  });
});
