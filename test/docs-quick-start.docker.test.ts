/**
 * The README's quick start on real Docker, as pasted: its serve block (the offline base image,
 * the token, GridSim served with the local base as its build argument) handed to bash, then its
 * play line typed as its comments show, then SIGTERM to the server, which exits 0 and leaves
 * nothing. The block's first line (`npm ci && npm run build`) is what CI runs before any test, so
 * the test starts from its second. The server is told its port and instance through the
 * environment (OPENENV_PORT=0, OPENENV_INSTANCE), which the pasted line leaves to it, so the test
 * takes neither port 8200 nor the default instance of a server someone runs here.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { LABELS } from '../src/sandbox/sandbox.js';
import { sectionOf, shBlocksOf } from './support/markdown.js';
import { describeDocker, labelledResources, uniqueInstance, waitFor } from './support/docker.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const QUICK_START = sectionOf(readFileSync(path.join(ROOT, 'README.md'), 'utf8'), '## Quick start');

function bash(script: string, env: NodeJS.ProcessEnv, input = '') {
  const child = spawn('bash', ['--norc', '-e', '-o', 'pipefail', '-c', script], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  child.stdin.end(input);
  const exited = new Promise<{ code: number | null; out: string }>((resolve) => child.on('exit', (code) => resolve({ code, out })));
  return { output: () => out, exited };
}

describeDocker("the README's quick start, pasted", () => {
  it('serves GridSim from the offline base, plays the eval task typed as shown (reward 0.2), and drains on SIGTERM', { timeout: 900_000 }, async () => {
    const [serveBlock, playBlock] = shBlocksOf(QUICK_START);
    const [first, ...rest] = serveBlock!.trimEnd().split('\n');
    expect(first).toMatch(/^npm ci && npm run build\b/);
    expect(rest.some((l) => l.startsWith('node dist/serve.js bundles/gridsim-v1 ') && l.includes(' &'))).toBe(true);
    expect(playBlock).toMatch(/^npx openenv-bundle play /);

    const instance = uniqueInstance('quick-start');
    // the block backgrounds the server; the shell says its pid and the token, then waits for it
    const server = bash(`${rest.join('\n')}\necho "serve pid $! token $AGENTENV_TOKEN"\nwait`, {
      OPENENV_PORT: '0',
      OPENENV_INSTANCE: instance,
      LOG_LEVEL: 'info',
    });
    let pid = 0;
    try {
      let address = '';
      let token = '';
      await waitFor(
        () => {
          const out = server.output();
          [, address = ''] = /"address":"([^"]+)"/.exec(out) ?? [];
          const said = /serve pid (\d+) token (\S+)/.exec(out);
          if (said) [pid, token] = [Number(said[1]), said[2]!];
          return address !== '' && pid > 0 && out.includes('"event":"ready"');
        },
        600_000,
        'the pasted serve line to serve GridSim',
      );
      const input = [...playBlock!.matchAll(/^#\s+> (.+?)(?: {2,}.*)?$/gm)].map((m) => `${m[1]}\n`).join('');
      const played = await bash(playBlock!.replaceAll('http://127.0.0.1:8200', `http://${address}`), { AGENTENV_TOKEN: token }, input).exited;
      expect(played.code, played.out).toBe(0);
      expect(played.out.trimEnd().split('\n').at(-1)).toBe('episode over (finished): reward 0.2; scores schedule 0.2');
    } finally {
      if (pid > 0) process.kill(pid, 'SIGTERM');
    }
    const stopped = await server.exited;
    expect(stopped.code, stopped.out).toBe(0);
    expect(stopped.out).toContain('serving gridsim-v1 (');
    expect(labelledResources(`${LABELS.instance}=${instance}`)).toEqual({ containers: [], networks: [] });
  });
});
