/**
 * Every command's process starts with a failing exit code and sets its own only once the command
 * settles: a command whose work lets Node run out of things to do (here, a timer that does not
 * hold the process open) ends with exit 1 and says so, never with a silent 0.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ENTRY = fileURLToPath(new URL('../../dist/cli/process-entry.js', import.meta.url));

function run(body: string) {
  const script = `import { runAsProcess, exitWith } from ${JSON.stringify(ENTRY)};\n${body}`;
  return spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 });
}

describe('a command run as a process', () => {
  it('exits with the code its command settles with', () => {
    expect(run('runAsProcess(async () => 0);').status).toBe(0);
    const three = run('runAsProcess(async () => { await new Promise((r) => setTimeout(r, 50)); return 3; });');
    expect(three.status).toBe(3);
    expect(three.stderr).toBe('');
  });

  it('exits 1 saying "exited without a result" when the process runs out of work before the command settles', () => {
    const r = run('runAsProcess(() => new Promise((resolve) => setTimeout(() => resolve(0), 60_000).unref()));');
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('error: exited without a result');
  });

  it('prints a rejected command as one error line and exits 1', () => {
    const r = run("runAsProcess(async () => { throw new Error('the engine went away'); });");
    expect(r.status).toBe(1);
    expect(r.stderr).toBe('error: the engine went away\n');
  });

  it('lets a command leave at once with a code of its own (a drain, a second Ctrl-C), without the guard', () => {
    const r = run('runAsProcess(() => new Promise(() => { setTimeout(() => exitWith(143), 20); }));');
    expect(r.status).toBe(143);
    expect(r.stderr).toBe('');
  });
});
