/**
 * A dataset's env images on a real engine: built a bounded number at once at start, one failed
 * build naming its env (the task's) while the others are built, tagged and reused at the next
 * start; and `serve`, the built binary, showing how far they are: one bar on a terminal's stderr,
 * a line per image with its n/total in the log.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { EnvCatalog, loadBundle, type LoadedBundle } from '../../src/bundle/index.js';
import { DockerSandbox } from '../../src/sandbox/docker/index.js';
import { baseManifest, removeTempDirs, writeBundle } from '../bundle/helpers.js';
import { captureLog } from '../support/log-capture.js';
import { describeDocker, uniqueInstance, waitFor } from '../support/docker.js';
import { SERVE_JS } from '../support/serve-process.js';
import { ensureDebianBase, LOCAL_DEBIAN_IMAGE } from './helpers.js';

const GOOD = ['sort-words', 'fix-parser', 'count-lines'];
const BAD = 'needs-pypi';

function imageExists(ref: string): boolean {
  try {
    execFileSync('docker', ['image', 'inspect', ref], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describeDocker('env images built in parallel', () => {
  const instance = uniqueInstance('image-builds');
  const sandbox = new DockerSandbox({ instance, bundleName: 'builds-v1' });
  let bundle: LoadedBundle;
  const built: string[] = [];

  beforeAll(async () => {
    ensureDebianBase();
    // a nonce per run: every context is new to the engine, so each is really built
    const nonce = `${instance} ${Date.now()}`;
    const files: Record<string, string> = {};
    for (const n of GOOD) {
      files[`envs/${n}/Dockerfile`] = `FROM ${LOCAL_DEBIAN_IMAGE}\nCOPY nonce.txt /nonce.txt\nRUN echo ${n} > /task.txt\n`;
      files[`envs/${n}/nonce.txt`] = nonce;
    }
    files[`envs/${BAD}/Dockerfile`] = `FROM ${LOCAL_DEBIAN_IMAGE}\nCOPY nonce.txt /nonce.txt\nRUN echo cannot reach the index >&2; exit 3\n`;
    files[`envs/${BAD}/nonce.txt`] = nonce;
    const envs = Object.fromEntries([...GOOD, BAD].map((n) => [n, { build: `envs/${n}` }]));
    bundle = await loadBundle(
      writeBundle({
        manifest: { ...baseManifest(), name: 'builds-v1', envs, toolsets: { ts: { ...(baseManifest().toolsets as any).ts, env: GOOD[0] } } },
        files,
      }),
    );
  });

  afterAll(async () => {
    for (const tag of built) execFileSync('docker', ['image', 'rm', '-f', tag], { stdio: 'ignore' });
    await bundle?.cleanup();
    await sandbox.close();
    removeTempDirs();
  });

  it('builds the others while one fails, and the failure names its env and step', async () => {
    const log = captureLog({ level: 'info' });
    const catalog = new EnvCatalog(bundle, sandbox, {}, log.logger, { concurrency: 3 });
    const err = await catalog.buildAll().catch((e: Error) => e);
    for (const n of GOOD) {
      const tag = catalog.specOf(n).image;
      built.push(tag);
      expect(tag).toMatch(new RegExp(`^openenv-bundle/builds-v1-${n}:[0-9a-f]{12}$`));
      expect(imageExists(tag)).toBe(true);
      expect(execFileSync('docker', ['run', '--rm', tag, 'cat', '/task.txt'], { encoding: 'utf8' }).trim()).toBe(n);
    }
    expect(err).toBeInstanceOf(Error);
    const message = (err as Error).message;
    expect(message).toMatch(
      /^1 of 4 env image\(s\) could not be made \(the 3 other\(s\) are ready and cached\): env "needs-pypi": cannot build the image of env `needs-pypi`/,
    );
    expect(message).toMatch(/exit 3|returned a non-zero code: 3/);
    expect(() => catalog.specOf(BAD)).toThrow('no image for env "needs-pypi"');
    const finished = log.lines().filter((l) => l.of !== undefined);
    expect(finished.map((l) => l.of)).toEqual(['1/4', '2/4', '3/4', '4/4']);
    expect(finished.filter((l) => l.level === 50).map((l) => l.env)).toEqual([BAD]);

    // the next start finds the three built: up to date, not rebuilt
    const again = captureLog({ level: 'info' });
    const catalog2 = new EnvCatalog(bundle, sandbox, {}, again.logger, { concurrency: 3 });
    await catalog2.buildAll().catch(() => undefined);
    for (const n of GOOD) {
      expect(catalog2.specOf(n).image).toBe(catalog.specOf(n).image);
      expect(
        again
          .lines()
          .filter((l) => l.env === n && l.build !== undefined)
          .map((l) => l.build),
      ).toEqual([`image ${catalog.specOf(n).image} is up to date`]);
    }
  });

  it('serve on a terminal draws one bar on stderr, redrawn in place, and its log (a file) keeps each image with its n/total', async () => {
    const envs = { a: { image: LOCAL_DEBIAN_IMAGE }, b: { image: LOCAL_DEBIAN_IMAGE }, c: { image: LOCAL_DEBIAN_IMAGE } };
    const dir = writeBundle({ manifest: { ...baseManifest(), name: 'bar-v1', envs, toolsets: { ts: { ...(baseManifest().toolsets as any).ts, env: 'a' } } } });
    const log = path.join(dir, 'server.log');
    const terminal = path.join(dir, 'terminal.txt');
    // script(1) gives the server a terminal: stderr on it, stdout sent to a file
    const cmd = `${process.execPath} ${SERVE_JS} ${dir} --port 0 --instance ${instance}-bar > ${log}`;
    const child = spawn('script', ['-qfec', cmd, terminal], { stdio: 'ignore' });
    const exited = new Promise((resolve) => child.on('exit', resolve));
    const lines = () =>
      (existsSync(log) ? readFileSync(log, 'utf8') : '')
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, any>);
    try {
      await waitFor(() => lines().some((l) => /^listening on /.test(l.msg)) && lines().some((l) => l.msg === 'envs locked down'), 120_000, 'the server ready');
      const drawn = readFileSync(terminal, 'utf8');
      const bar = drawn.slice(drawn.indexOf('\r\x1b[2K'));
      const frames = bar.split('\r\x1b[2K').filter((f) => f.startsWith('['));
      expect(frames[0]).toBe(`[${'-'.repeat(30)}] 0/3 env images (in progress: a)`);
      expect(frames.at(-1)).toBe(`[${'#'.repeat(30)}] 3/3 env images`);
      expect(frames.every((f) => !f.includes('\n'))).toBe(true);
      // cleared at the end, and nothing of the log on the terminal
      expect(bar).toContain(`3/3 env images\r\x1b[2K`);
      expect(drawn).not.toContain('"msg"');
      expect(
        lines()
          .filter((l) => l.of !== undefined)
          .map((l) => l.of),
      ).toEqual(['1/3', '2/3', '3/3']);
    } finally {
      const pid = lines()[0]?.pid as number | undefined;
      if (pid) process.kill(pid, 'SIGTERM');
      await exited;
    }
  });
});
