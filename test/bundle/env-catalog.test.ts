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

/** a sandbox whose builds end when the test says so; `lookOnly` builds fail as an engine without the image does */
function heldSandbox(fails: string[] = []) {
  const release = new Map<string, () => void>();
  const started: string[] = [];
  const lookOnly: string[] = [];
  const sandbox = {
    images: {
      async build(req: ImageBuildRequest) {
        if (req.lookOnly) {
          lookOnly.push(req.envName);
          if (fails.includes(req.envName)) throw new SandboxError('no_image', `the Docker engine has no image x/${req.envName}:1`);
          return `img/${req.envName}:1`;
        }
        started.push(req.envName);
        await new Promise<void>((r) => release.set(req.envName, r));
        if (fails.includes(req.envName)) throw new SandboxError('no_image', `cannot build the image of env \`${req.envName}\`: step 2 failed`);
        return `img/${req.envName}:1`;
      },
      async check() {},
    },
  };
  const tick = () => new Promise((r) => setImmediate(r));
  const finish = async (env: string) => {
    release.get(env)!();
    await tick();
    await tick();
  };
  return { sandbox: sandbox as never, started, lookOnly, finish, tick };
}

describe('the env images in the background', () => {
  it('a reset waiting for an image moves it to the front and is told it waits; counts and the summary follow', async () => {
    const b = await fiveEnvs();
    const s = heldSandbox();
    const log = captureLog({ level: 'info' });
    const catalog = new EnvCatalog(b, s.sandbox, {}, log.logger, { concurrency: 1 });
    catalog.start();
    await s.tick();
    expect(s.started).toEqual(['a']);
    expect(catalog.counts()).toEqual({ ready: 0, building: 1, queued: 4, failed: 0, missing: 0 });
    const told: string[] = [];
    const spec = catalog.spec('d', { onWait: (state) => told.push(state) });
    await s.tick();
    // it starts at once, beside the background build (docs/images.md)
    expect(told).toEqual(['building']);
    expect(s.started).toEqual(['a', 'd']);
    expect(log.lines().some((l) => l.event === 'image_first' && l.env === 'd')).toBe(true);
    await s.finish('a');
    // no background build starts while the waited-for one runs
    expect(s.started).toEqual(['a', 'd']);
    expect(catalog.status()?.summary).toBe('1 of 5 env images ready (1 building, 3 queued)');
    await s.finish('d');
    expect((await spec).image).toBe('img/d:1');
    // a ready image answers at once, without a word
    await catalog.spec('a', { onWait: () => told.push('again') });
    expect(told).toEqual(['building']);
    for (const e of ['b', 'c', 'e']) await s.finish(e);
    await catalog.allSettled();
    expect(s.started).toEqual(['a', 'd', 'b', 'c', 'e']);
    expect(catalog.status()).toBeNull();
    await b.cleanup();
  });

  it('a wait that outlasts its budget says the image was not ready, naming it and its state', async () => {
    const b = await fiveEnvs();
    const s = heldSandbox();
    const catalog = new EnvCatalog(b, s.sandbox, {}, captureLog({ level: 'silent' }).logger, { concurrency: 1 });
    catalog.start();
    const err = await Promise.resolve(catalog.spec('a', { timeoutMs: 200 })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxError);
    expect(err).toMatchObject({ reason: 'deploy_timeout', message: `the image of env "a" was not ready within the reset's 0.2 s: it is being built` });
    const err2 = await Promise.resolve(catalog.spec('c', { timeoutMs: 30, first: false })).catch((e: unknown) => e);
    expect((err2 as Error).message).toMatch(/env "c" was not ready .*: it is queued \(2 in line\)/);
    await b.cleanup();
  });

  it("a failed build fails that env's resets at once with the build's error; the others play; all failed is named", async () => {
    const b = await fiveEnvs();
    const s = heldSandbox(['b']);
    const catalog = new EnvCatalog(b, s.sandbox, {}, captureLog({ level: 'silent' }).logger, { concurrency: 5 });
    catalog.start();
    await s.tick();
    for (const e of ENVS) await s.finish(e);
    await catalog.allSettled();
    const err = await Promise.resolve(catalog.spec('b')).catch((e: unknown) => e);
    expect(err).toMatchObject({ reason: 'image_unavailable', message: 'cannot build the image of env `b`: step 2 failed' });
    expect((await catalog.spec('c')).image).toBe('img/c:1');
    expect(catalog.counts()).toMatchObject({ ready: 4, failed: 1 });
    expect(catalog.allUnavailable()).toEqual([]);
    await b.cleanup();

    const one = await loadBundle(
      writeBundle({ manifest: { ...baseManifest(), envs: { e: { build: 'envs/e' } } }, files: { 'envs/e/Dockerfile': 'FROM scratch\n' } }),
    );
    const s2 = heldSandbox(['e']);
    const c2 = new EnvCatalog(one, s2.sandbox, {}, captureLog({ level: 'silent' }).logger);
    c2.start();
    await s2.tick();
    await s2.finish('e');
    await c2.allSettled();
    expect(c2.allUnavailable()).toEqual([{ env: 'e', error: 'cannot build the image of env `e`: step 2 failed' }]);
    await one.cleanup();
  });

  it('--images prebuilt builds nothing: a missing image fails its resets (not retryable) and the start log names the missing once', async () => {
    const b = await fiveEnvs();
    const s = heldSandbox(['b', 'd']);
    const log = captureLog({ level: 'info' });
    const catalog = new EnvCatalog(b, s.sandbox, {}, log.logger, { concurrency: 2, mode: 'prebuilt' });
    catalog.start();
    await catalog.allSettled();
    await s.tick();
    expect(s.started).toEqual([]);
    expect(s.lookOnly.sort()).toEqual(ENVS);
    expect(catalog.counts()).toEqual({ ready: 3, building: 0, queued: 0, failed: 0, missing: 2 });
    const err = await Promise.resolve(catalog.spec('d')).catch((e: unknown) => e);
    expect(err).toMatchObject({ reason: 'image_not_built' });
    expect((err as Error).message).toContain(`--images prebuilt): \`openenv-bundle build ${b.dir}\` makes it`);
    expect((await catalog.spec('a')).image).toBe('img/a:1');
    const named = log.lines().filter((l) => l.event === 'images_missing');
    expect(named).toHaveLength(1);
    expect(named[0]).toMatchObject({ count: 2, total: 5, envs: ['b', 'd'] });
    expect(named[0]!.msg).toBe(
      `2 of 5 env image(s) are not on the engine (--images prebuilt): b, d. Their tasks' resets fail; \`openenv-bundle build ${b.dir}\` builds them`,
    );
    await b.cleanup();
  });
});
