/**
 * What `openenv-bundle init` prints to run next runs as printed, on real Docker, offline: the base
 * image script, `check` (plays the new bundle: ok), `serve` (serves it) and `play` (a task played
 * to its reward against that server), each line handed to a shell exactly as init wrote it, from
 * the folder init ran in. The server is told its port and instance through the environment
 * (OPENENV_PORT=0, OPENENV_INSTANCE), which the printed line leaves to it, so the test takes
 * neither port 8200 nor the default instance of a server someone runs here; the play line gets
 * the address the server reports in place of 127.0.0.1:8200.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { LABELS } from '../../src/sandbox/sandbox.js';
import { describeDocker, labelledResources, uniqueInstance, waitFor } from '../support/docker.js';

const CLI = fileURLToPath(new URL('../../dist/cli/openenv-bundle.js', import.meta.url));

interface Shell {
  code: number | null;
  out: string;
}

/** `line` through bash, as a person pastes it, from `cwd`; `exec` so a signal reaches the command itself */
function shell(line: string, cwd: string, opts: { env?: NodeJS.ProcessEnv; input?: string } = {}) {
  const child = spawn('bash', ['-c', `exec ${line}`], { cwd, env: { ...process.env, ...opts.env }, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  child.stdin.end(opts.input ?? '');
  const exited = new Promise<Shell>((resolve) => child.on('exit', (code) => resolve({ code, out })));
  return { child, output: () => out, exited };
}

/** the command of a printed line, without its comment */
const command = (line: string) => line.replace(/\s+#.*$/, '').trim();

describeDocker("init's next steps, run as printed", () => {
  let parent: string;
  let printed: string[];

  beforeAll(async () => {
    parent = await mkdtemp(path.join(tmpdir(), 'openenv-next-steps-'));
    const init = shell(`node ${CLI} init steps-v1`, parent);
    const r = await init.exited;
    expect(r.code, r.out).toBe(0);
    printed = r.out.split('\n');
  });

  afterAll(async () => {
    await rm(parent, { recursive: true, force: true });
  });

  /** the printed line (a command) that starts with `start` after the heading `under` */
  function line(under: string, start: RegExp): string {
    const from = printed.findIndex((l) => l.startsWith(under));
    expect(from, `init printed "${under}"`).toBeGreaterThan(-1);
    const found = printed.slice(from + 1).find((l) => start.test(l.trim()));
    expect(found, `a line ${start} under "${under}"`).toBeDefined();
    return command(found!);
  }

  it('check, serve and play as printed: the bundle plays, serves and scores', { timeout: 600_000 }, async () => {
    const base = line('Offline', /^bash /);
    const check = line('Offline', / check /);
    const serve = line('Offline', / serve /);
    const play = line('Next:', / play /);
    // the online lines are the offline ones without the build argument
    expect(line('Next:', / check /)).toBe(check.replace(/ --build-arg \S+$/, ''));
    expect(line('Next:', / serve /)).toBe(serve.replace(/ --build-arg \S+$/, ''));

    expect((await shell(base, parent).exited).code).toBe(0);

    const checked = await shell(check, parent).exited;
    expect(checked.code, checked.out).toBe(0);
    expect(checked.out).toMatch(/played 5 task\(s\) in \d+ episode\(s\): golden at max 5\/5, empty at or under the floor 5\/5/);
    expect(checked.out).toContain('golden solutions: mean reward 1.000 (correct 1.000)');
    expect(checked.out).toMatch(/^ok: no problem/m);

    const instance = uniqueInstance('next-steps');
    const server = shell(serve, parent, { env: { OPENENV_PORT: '0', OPENENV_INSTANCE: instance, LOG_LEVEL: 'info' } });
    try {
      let address = '';
      await waitFor(
        () => {
          if (server.child.exitCode !== null) throw new Error(`the server exited: ${server.output()}`);
          address = /"address":"([^"]+)"/.exec(server.output())?.[1] ?? '';
          return address !== '' && server.output().includes('"event":"ready"');
        },
        300_000,
        'the printed serve line to serve',
      );
      const played = await shell(play.replace('http://127.0.0.1:8200', `http://${address}`), parent, { input: 'get_hint\nsubmit_answer {"answer": "Paris"}\n' })
        .exited;
      expect(played.code, played.out).toBe(0);
      expect(played.out).toContain('It is on the Seine.');
      expect(played.out.trimEnd().split('\n').at(-1)).toBe('episode over (finished): reward 1; scores correct 1');
    } finally {
      server.child.kill('SIGTERM');
    }
    const stopped = await server.exited;
    expect(stopped.code, stopped.out).toBe(0);
    expect(labelledResources(`${LABELS.instance}=${instance}`)).toEqual({ containers: [], networks: [] });
  });
});
