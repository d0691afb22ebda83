/**
 * The env images at start: built a bounded number at once, a failed one stopping none of the
 * others and named in the start's failure, and how far they are shown as a bar or as log lines.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { EnvCatalog, loadBundle } from '../../src/bundle/index.js';
import { SandboxError, type ImageBuildRequest } from '../../src/sandbox/sandbox.js';
import { progressBar } from '../../src/cli/progress.js';
import { captureLog } from '../support/log-capture.js';
import { baseManifest, removeTempDirs, writeBundle } from './helpers.js';

afterAll(removeTempDirs);

const ENVS = ['a', 'b', 'c', 'd', 'e'];

/** a bundle of five built envs (e is the toolset's) */
async function fiveEnvs() {
  const files: Record<string, string> = {};
  for (const n of ENVS) files[`envs/${n}/Dockerfile`] = 'FROM scratch\n';
  return loadBundle(writeBundle({ manifest: { ...baseManifest(), envs: Object.fromEntries(ENVS.map((n) => [n, { build: `envs/${n}` }])) }, files }));
}

/** a sandbox whose builds take a few ms each; `fails` names the envs whose build fails */
function fakeSandbox(fails: string[]) {
  const stats = { running: 0, peak: 0, built: [] as string[] };
  const sandbox = {
    images: {
      async build(req: ImageBuildRequest) {
        stats.peak = Math.max(stats.peak, ++stats.running);
        req.onProgress?.(`Step 1/1 : FROM scratch`);
        await new Promise((r) => setTimeout(r, 10));
        stats.running--;
        if (fails.includes(req.envName)) throw new SandboxError('no_image', `cannot build the image of env \`${req.envName}\`: step 1 failed`);
        stats.built.push(req.envName);
        return `img/${req.envName}:1`;
      },
      async check() {},
    },
  };
  return { sandbox: sandbox as never, stats };
}

describe('the env images at start', () => {
  it('builds at most --image-build-concurrency at once; a failed build stops none of the others and the start names it', async () => {
    const b = await fiveEnvs();
    const { sandbox, stats } = fakeSandbox(['c']);
    const log = captureLog({ level: 'info' });
    const catalog = new EnvCatalog(b, sandbox, {}, log.logger, { concurrency: 2 });
    const err = await catalog.buildAll().catch((e: Error) => e);
    expect(err).toBeInstanceOf(SandboxError);
    expect((err as Error).message).toBe(
      '1 of 5 env image(s) could not be made (the 4 other(s) are ready and cached): env "c": cannot build the image of env `c`: step 1 failed',
    );
    expect(stats.peak).toBe(2);
    expect(stats.built.sort()).toEqual(['a', 'b', 'd', 'e']);
    // what was built is kept
    for (const n of ['a', 'b', 'd', 'e']) expect(catalog.specOf(n).image).toBe(`img/${n}:1`);
    expect(() => catalog.specOf('c')).toThrow('no image for env "c"');
    // plain lines, each finished image with its n/total, in the order they finished
    const finished = log.lines().filter((l) => l.of !== undefined);
    expect(finished.map((l) => l.of)).toEqual(['1/5', '2/5', '3/5', '4/5', '5/5']);
    expect(finished.find((l) => l.env === 'c')).toMatchObject({ level: 50, msg: expect.stringMatching(/^env image "c" failed \(\d\/5\): cannot build/) });
    expect(finished.filter((l) => l.level === 30).every((l) => /^env image "[abde]" ready \(\d\/5\): img\/[abde]:1$/.test(l.msg))).toBe(true);
    expect(log.lines().filter((l) => l.build === 'Step 1/1 : FROM scratch')).toHaveLength(5);
    await b.cleanup();
  });

  it('with more failures, names every env that failed; all built at once when the bound allows', async () => {
    const b = await fiveEnvs();
    const { sandbox, stats } = fakeSandbox(['a', 'e']);
    const err = await new EnvCatalog(b, sandbox, {}, captureLog({ level: 'silent' }).logger, { concurrency: 8 }).buildAll().catch((e: Error) => e);
    expect((err as Error).message).toMatch(
      /^2 of 5 env image\(s\) could not be made .*: env "a": cannot build the image of env `a`: step 1 failed; env "e": cannot build/,
    );
    expect(stats.peak).toBe(5);
    await b.cleanup();
  });

  it('on a terminal draws one bar, redrawn in place and cleared, and keeps the lines at debug when the log shares the terminal', async () => {
    const b = await fiveEnvs();
    const { sandbox } = fakeSandbox([]);
    let drawn = '';
    const bar = { ...progressBar({ isTTY: true, write: (s: string) => (drawn += s) }), quiet: true };
    const log = captureLog({ level: 'info' });
    await new EnvCatalog(b, sandbox, {}, log.logger, { concurrency: 2, progress: bar }).buildAll();
    const frames = drawn.split('\r\x1b[2K').filter(Boolean);
    expect(frames[0]).toBe(`[${'-'.repeat(30)}] 0/5 env images (in progress: a)`);
    expect(frames[1]).toBe(`[${'-'.repeat(30)}] 0/5 env images (in progress: a, b)`);
    expect(frames.at(-1)).toBe(`[${'#'.repeat(30)}] 5/5 env images`);
    expect(drawn.endsWith('\r\x1b[2K')).toBe(true);
    expect(frames.every((f) => !f.includes('\n'))).toBe(true);
    // the log had nothing at info to write between the redraws
    expect(log.lines()).toEqual([]);

    // the log elsewhere (a file): the bar on the terminal, the lines still in the log
    const log2 = captureLog({ level: 'info' });
    await new EnvCatalog(b, sandbox, {}, log2.logger, { progress: { ...progressBar({ isTTY: true, write: () => undefined }) } }).buildAll();
    expect(log2.lines().filter((l) => l.of !== undefined)).toHaveLength(5);
    await b.cleanup();
  });
});
