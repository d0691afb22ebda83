/**
 * The README's copy-paste walks run as pasted: the curl session over /episodes and the piped
 * `play`, each block handed to bash as the README has it, against a GridSim server (envs as child
 * processes) whose address stands in for http://127.0.0.1:8200.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../scripts/lib/wait.js';
import { processSuiteServer } from './support/process-server.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const README = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
const TOKEN = 'readme-walks-token';

/** The fenced sh block after `heading` whose first line starts with `start`. */
function block(heading: string, start: string): string {
  const from = README.indexOf(heading);
  expect(from, heading).toBeGreaterThan(-1);
  const blocks = [...README.slice(from).matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const found = blocks.find((b) => b.startsWith(start));
  expect(found, `a block under ${heading} starting ${start}`).toBeDefined();
  return found!;
}

function bash(script: string, url: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-e', '-o', 'pipefail', '-c', script.replaceAll('http://127.0.0.1:8200', url)], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, AGENTENV_TOKEN: TOKEN },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    child.on('exit', (code) => resolve({ code, out }));
  });
}

describe('the README walks, pasted into a shell', () => {
  const s = processSuiteServer(
    { maxConcurrentEnvs: 2, token: TOKEN },
    { bundle: path.join(ROOT, 'bundles/gridsim-v1'), sandbox: { entry: { gridsim: 'app/server.mjs' } } },
  );

  it('the curl session over /episodes: an idle day scores 0.2, the episode is read, listed and deleted', async () => {
    const r = await bash(block('### A curl session over `/episodes`', 'S=http://127.0.0.1:8200'), s.url);
    expect(r.code, r.out).toBe(0);
    const lines = r.out.split('\n');
    expect(lines[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(r.out).toContain('"reward":0.2,"done":true');
    expect(r.out).toContain(`{"episode_id":"${lines[0]}"`);
    expect(r.out).toContain('"capacity":2');
    await waitFor(() => s.sandbox.live().length === 0, 10_000, 'the episode torn down');
  });

  it('the piped play: the lines played in order, the reward printed', async () => {
    const r = await bash(block('**Play a task by hand**', "printf '%s\\n' get_situation"), s.url);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain('Settlement point:');
    expect(r.out.trimEnd().split('\n').at(-1)).toBe('episode over (finished): reward 0.2; scores schedule 0.2');
  });
});
