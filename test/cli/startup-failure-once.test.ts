/**
 * A start-up that fails is logged once, by whoever knows why (the runtime; an env image's failure
 * by the env catalog), not again by each layer it passes on its way to the process's exit.
 * Runs the built CLI (dist/), as test/cli/commands-as-processes.test.ts does.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { FIXTURE_BUNDLE } from '../support/process-server.js';

const CLI = fileURLToPath(new URL('../../dist/cli/openenv-bundle.js', import.meta.url));

function serve(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; lines: Record<string, unknown>[] }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, 'serve', ...args], { env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      const lines = out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      resolve({ code, lines });
    });
  });
}

describe('a failed start-up in the log', () => {
  it('without a reachable engine: its reason once (the runtime), then the exit without repeating it', async () => {
    const { code, lines } = await serve([FIXTURE_BUNDLE, '--port', '0', '--instance', 'once-no-engine'], {
      DOCKER_HOST: 'unix:///nonexistent/once-no-engine.sock',
      LOG_LEVEL: 'info',
    });
    expect(code).toBe(1);
    const telling = lines.filter((l) => JSON.stringify(l).includes('the Docker engine is unreachable'));
    expect(telling).toHaveLength(1);
    expect(telling[0]).toMatchObject({ level: 50, msg: 'the server cannot serve episodes' });
    const fatal = lines.filter((l) => l.level === 60);
    expect(fatal).toEqual([expect.objectContaining({ msg: 'cannot serve episodes; stopping' })]);
    expect(fatal[0]).not.toHaveProperty('err');
  });
});
