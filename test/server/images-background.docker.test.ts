/**
 * Env images off the critical path, on real Docker. A bundle of three envs, each the fixture's echo
 * server FROM the local Node base with a file of its own (never from another run's cache): `slow`
 * (a RUN step that sleeps), `quick` and `broken` (a COPY of a file that is not there). The server
 * is ready before the slow image exists; a reset of the quick task plays at once while it builds;
 * a reset of the slow task waits, and says so, then plays; the broken env fails its own resets
 * with the build's error, the others play; /health, the console's overview and the metrics gauge
 * count them. Then `--images prebuilt`: one env's image built ahead by `openenv-bundle build` (the
 * built binary, a child process), the other's not: the start log names the missing one and the
 * command, its resets fail at once (image_not_built, not retryable), the other plays. Nothing is
 * left: no container or network of the instances, no image of the suite's bundles.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { LABELS } from '../../src/sandbox/sandbox.js';
import { parsePrometheusText, valueOf } from '../../scripts/lib/prom-text.js';
import { describeDocker, IN_CI, labelledResources, LOCAL_NODE_IMAGE, TEST_BUILD_ARGS, uniqueInstance, waitFor } from '../support/docker.js';
import { FIXTURE_BUNDLE, INSTANCE_LABEL } from '../support/docker-server.js';
import { captureLog } from '../support/log-capture.js';
import { http } from '../routes/http.js';

const CLI = path.resolve(import.meta.dirname, '../../dist/cli/openenv-bundle.js');
/** the console's count is read in Chromium (as test/console/browser.docker.test.ts does): required in CI, said and left out elsewhere */
const CHROMIUM = process.env.OPENENV_TEST_CHROMIUM ?? '/usr/bin/chromium';

async function openBrowser(): Promise<Browser | null> {
  if (!existsSync(CHROMIUM) && !IN_CI) {
    console.warn(`\n!!! NO CHROMIUM at ${CHROMIUM}: the console's image count is not checked in a browser here (it is in CI) !!!\n`);
    return null;
  }
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
}
/** the slow env's RUN step: long enough for the checks made while it runs, on a loaded engine too */
const SLOW_STEP_S = 90;

interface EnvDef {
  /** extra Dockerfile lines after WORKDIR */
  extra?: string;
}

/** a bundle of the given envs, each the fixture's echo server with a file of its own, a task `t-<env>` each */
async function writeBundle(dir: string, name: string, nonce: string, envs: Record<string, EnvDef>): Promise<void> {
  const fixture = JSON.parse(await readFile(path.join(FIXTURE_BUNDLE, 'bundle.json'), 'utf8')) as {
    envs: { echo: Record<string, unknown> };
    toolsets: { echo: { tools: unknown[] } };
    scores: unknown;
  };
  const manifestEnvs: Record<string, unknown> = {};
  const toolsets: Record<string, unknown> = {};
  const tasks: string[] = [];
  for (const [env, def] of Object.entries(envs)) {
    const ctx = path.join(dir, 'envs', env);
    await mkdir(ctx, { recursive: true });
    await copyFile(path.join(FIXTURE_BUNDLE, 'envs/echo/server.mjs'), path.join(ctx, 'server.mjs'));
    await writeFile(path.join(ctx, 'mark'), `${env}-${nonce}\n`);
    await writeFile(
      path.join(ctx, 'Dockerfile'),
      [
        'ARG NODE_IMAGE=node:20-slim',
        'FROM ${NODE_IMAGE}',
        'WORKDIR /app',
        'COPY mark /opt/mark',
        ...(def.extra ? [def.extra] : []),
        'COPY server.mjs /app/server.mjs',
        'ENV PORT=8000',
        'CMD ["node", "server.mjs"]',
        '',
      ].join('\n'),
    );
    manifestEnvs[env] = { ...fixture.envs.echo, build: `envs/${env}` };
    toolsets[env] = { env, tools: fixture.toolsets.echo.tools };
    tasks.push(JSON.stringify({ task_id: `t-${env}`, toolset: env, system_prompt: 'Finish.', turns: ['Finish now.'], data: { finish_score: 1 } }));
  }
  await mkdir(path.join(dir, 'tasks'), { recursive: true });
  await writeFile(path.join(dir, 'tasks/train.jsonl'), `${tasks.join('\n')}\n`);
  const manifest = {
    name,
    version: '1.0.0',
    description: 'env images off the critical path',
    default_split: 'train',
    splits: { train: 'tasks/train.jsonl' },
    envs: manifestEnvs,
    toolsets,
    max_turns: 1,
    reward: 'mean',
    scores: fixture.scores,
  };
  await writeFile(path.join(dir, 'bundle.json'), `${JSON.stringify(manifest, null, 2)}\n`);
}

const imagesOf = (bundleName: string) =>
  execFileSync('docker', ['images', '-q', '--filter', `label=${LABELS.bundle}=${bundleName}`], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean);

async function serve(bundle: string, options: Record<string, unknown> = {}) {
  const log = captureLog({ level: 'info' });
  const instance = uniqueInstance('imgbg');
  const app = await buildApp(bundle, { instance, pingInterval: 0, buildArgs: TEST_BUILD_ARGS, logger: log.logger, ...options });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address() as { port: number };
  return { app, url: `http://127.0.0.1:${addr.port}`, instance, log };
}

/** a reset, then finish_now: the episode's reward */
async function play(url: string, task: string): Promise<{ status: number; body: any; reward?: number | null }> {
  const r = await http(url, 'POST', '/episodes', { task_id: task });
  if (r.status !== 201) return r;
  const step = await http(url, 'POST', `/episodes/${r.body.episode_id}/step`, { type: 'call_tool', tool_name: 'finish_now', arguments: { score: 1 } });
  expect(step.status).toBe(200);
  expect(step.body.done).toBe(true);
  return { ...r, reward: step.body.reward };
}

async function gauge(url: string): Promise<Record<string, number | undefined>> {
  const m = parsePrometheusText(await (await fetch(`${url}/metrics`)).text());
  return Object.fromEntries(['ready', 'building', 'queued', 'failed', 'missing'].map((state) => [state, valueOf(m, 'openenv_env_images', { state })]));
}

describeDocker('env images off the critical path', () => {
  const nonce = randomBytes(4).toString('hex');
  const names = { background: `imgbg-${nonce}`, prebuilt: `imgpre-${nonce}` };
  let tmp: string;

  beforeAll(async () => {
    tmp = await mkdtemp(path.join(tmpdir(), 'openenv-images-bg-'));
  });
  afterAll(async () => {
    for (const n of Object.values(names)) {
      const ids = imagesOf(n);
      if (ids.length) spawnSync('docker', ['rmi', '-f', ...ids], { stdio: 'ignore' });
    }
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('serves at once: a ready task plays while a slow image builds, the slow one waits and says so, a broken one fails alone', async () => {
    const dir = path.join(tmp, 'background');
    await writeBundle(dir, names.background, nonce, {
      slow: { extra: `RUN ["node", "-e", "setTimeout(() => {}, ${SLOW_STEP_S * 1000})"]` },
      quick: {},
      broken: { extra: 'COPY no-such-file /app/' },
    });
    const s = await serve(dir, { imageBuildConcurrency: 2 });
    let browser: Browser | null = null;
    try {
      await s.app.openenv.ready;
      // ready before the slow image exists
      const health = await http(s.url, 'GET', '/health');
      expect(health.status).toBe(200);
      expect(s.app.openenv.catalog.imageState('slow')).toBe('building');
      expect(health.body.images.summary).toMatch(/^\d of 3 env images ready \(/);
      expect(imagesOf(names.background).length).toBeLessThan(3);

      // the quick task plays while the slow image builds
      const quick = await play(s.url, 't-quick');
      expect(quick.status, JSON.stringify(quick.body)).toBe(201);
      expect(quick.reward).toBe(1);
      expect(s.app.openenv.catalog.imageState('slow')).toBe('building');

      // the broken env fails its own resets with the build's error
      await s.app.openenv.catalog.settled('broken');
      const broken = await http(s.url, 'POST', '/episodes', { task_id: 't-broken' });
      expect(broken.status).toBe(502);
      expect(broken.body.failure).toMatchObject({ reason: 'image_unavailable', phase: 'deploy', retryable: true });
      expect(broken.body.failure.message).toMatch(/env `broken`.*no-such-file/s);

      // while the slow one builds: the counts, on /health, the console's overview and /metrics
      expect(s.app.openenv.catalog.imageState('slow')).toBe('building');
      const counts = { ready: 1, building: 1, queued: 0, failed: 1, missing: 0 };
      expect(await gauge(s.url)).toEqual(counts);
      const h2 = await http(s.url, 'GET', '/health');
      expect(h2.status).toBe(200);
      expect(h2.body.images).toEqual({ total: 3, counts, summary: '1 of 3 env images ready (1 building, 1 failed)' });
      const overview = await http(s.url, 'GET', '/console/overview');
      expect(overview.body.images.summary).toBe('1 of 3 env images ready (1 building, 1 failed)');
      // the web console shows the same line
      browser = await openBrowser();
      const page = browser && (await browser.newPage());
      if (page) {
        await page.goto(`${s.url}/web/`);
        await expect.poll(() => page.getByTestId('env-images').textContent(), { timeout: 60_000 }).toBe('1 of 3 env images ready (1 building, 1 failed)');
      }

      // the slow task's reset waits for its image, says so, then plays
      const slow = await play(s.url, 't-slow');
      expect(slow.status, JSON.stringify(slow.body)).toBe(201);
      expect(slow.reward).toBe(1);
      // its timings say how long of its queueing went to the image
      const t = slow.body.observation.timings;
      expect(t.image_wait_s, JSON.stringify(t)).toBeGreaterThan(0);
      expect(t.image_wait_s).toBeLessThanOrEqual(t.queued_s);
      // (the quick task's reset may have waited for its image too, had it not been made yet)
      const waited = s.log.lines().filter((l) => l.event === 'waiting_for_image' && l.env !== 'quick');
      expect(waited).toEqual([expect.objectContaining({ env: 'slow', image_state: 'building', msg: 'waiting for its image (env "slow": building)' })]);

      expect(await gauge(s.url)).toEqual({ ready: 2, building: 0, queued: 0, failed: 1, missing: 0 });
      const h3 = await http(s.url, 'GET', '/health');
      expect(h3.status).toBe(200);
      expect(h3.body.images.summary).toBe('2 of 3 env images ready (1 failed)');
      if (page) await expect.poll(() => page.getByTestId('env-images').textContent(), { timeout: 60_000 }).toBe('2 of 3 env images ready (1 failed)');
    } finally {
      await browser?.close();
      await s.app.close();
    }
    await waitFor(() => s.app.openenv.manager.list().length === 0, 10_000);
    expect(labelledResources(`${INSTANCE_LABEL}=${s.instance}`)).toEqual({ containers: [], networks: [] });
  }, 600_000);

  it('--images prebuilt: serves what openenv-bundle build made, names the rest once, and fails their resets at once', async () => {
    // the same env `made`, in a bundle of its own under the same name: built ahead by the command
    const ahead = path.join(tmp, 'ahead');
    await writeBundle(ahead, names.prebuilt, nonce, { made: {} });
    const built = spawnSync(process.execPath, [CLI, 'build', ahead, '--build-arg', `NODE_IMAGE=${LOCAL_NODE_IMAGE}`], { encoding: 'utf8', timeout: 600_000 });
    expect(built.status, built.stdout + built.stderr).toBe(0);
    const dir = path.join(tmp, 'prebuilt');
    await writeBundle(dir, names.prebuilt, nonce, { made: {}, absent: {} });

    const s = await serve(dir, { images: 'prebuilt' });
    try {
      await s.app.openenv.ready;
      await s.app.openenv.imagesSettled;
      const named = s.log.lines().filter((l) => l.event === 'images_missing');
      expect(named).toHaveLength(1);
      expect(named[0]!.msg).toBe(
        `1 of 2 env image(s) are not on the engine (--images prebuilt): absent. Their tasks' resets fail; \`openenv-bundle build ${dir}\` builds them`,
      );
      const absent = await http(s.url, 'POST', '/episodes', { task_id: 't-absent' });
      expect(absent.status).toBe(502);
      expect(absent.body.failure).toMatchObject({ reason: 'image_not_built', retryable: false });
      expect(absent.body.failure.message).toContain(`\`openenv-bundle build ${dir}\` makes it`);
      const made = await play(s.url, 't-made');
      expect(made.status, JSON.stringify(made.body)).toBe(201);
      expect(made.reward).toBe(1);
      expect(await gauge(s.url)).toEqual({ ready: 1, building: 0, queued: 0, failed: 0, missing: 1 });
      expect((await http(s.url, 'GET', '/health')).status).toBe(200);
      // nothing was built: the one image of the suite's bundle is the command's
      expect(imagesOf(names.prebuilt)).toHaveLength(1);
    } finally {
      await s.app.close();
    }
    expect(labelledResources(`${INSTANCE_LABEL}=${s.instance}`)).toEqual({ containers: [], networks: [] });
  }, 600_000);
});
