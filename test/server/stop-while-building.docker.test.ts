/**
 * A stop during the image builds, as users send it: SIGTERM to `node dist/serve.js` (its builds in
 * the background, the server ready) and to `openenv-bundle check` (its builds before its plays),
 * both the built binaries, while an env image's RUN step is still running on the engine. Each stops there (the build cancelled on the engine, its step's container
 * gone, the instance name given back) instead of waiting out the build: serve exits 0 (drained),
 * check reports that it was interrupted and exits 1.
 */
import { execFileSync, spawn } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { LOCK_LABELS } from '../../src/sandbox/engine/instance-lock.js';
import { describeDocker, LOCAL_NODE_IMAGE, uniqueInstance, waitFor } from '../support/docker.js';
import { FIXTURE_BUNDLE } from '../support/docker-server.js';
import { SERVE_JS } from '../support/serve-process.js';

const CLI = fileURLToPath(new URL('../../dist/cli/openenv-bundle.js', import.meta.url));
/** the build step sleeps this long: a process that waited for it would exit long after the bound below */
const BUILD_STEP_S = 240;

function lines(args: string[]): string[] {
  return execFileSync('docker', args, { encoding: 'utf8' })
    .split('\n')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** containers running the bundle's slow build step (the engine's, unlabelled: found by the step's unique command) */
const buildSteps = (marker: string) => lines(['ps', '-a', '--no-trunc', '--format', '{{.ID}} {{.Command}}']).filter((l) => l.includes(marker));
const lockMarkers = (instance: string) => lines(['volume', 'ls', '-q', '--filter', `label=${LOCK_LABELS.lock}=${instance}`]);

/** a copy of the fixture bundle whose env image takes BUILD_STEP_S to build, never from the build cache */
async function slowBundle(parent: string, marker: string): Promise<string> {
  const dir = path.join(parent, marker);
  await cp(FIXTURE_BUNDLE, dir, { recursive: true });
  const dockerfile = path.join(dir, 'envs/echo/Dockerfile');
  const text = await readFile(dockerfile, 'utf8');
  const slow = text.replace('WORKDIR /app\n', `WORKDIR /app\nRUN ["node", "-e", "setTimeout(() => {}, ${BUILD_STEP_S * 1000}) // ${marker}"]\n`);
  expect(slow).not.toBe(text);
  await writeFile(dockerfile, slow);
  return dir;
}

function run(args: string[]) {
  const child = spawn(process.execPath, args, { env: { ...process.env, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, exited, output: () => out };
}

describeDocker('a stop while the env images build', () => {
  let parent: string;
  beforeAll(async () => {
    parent = await mkdtemp(path.join(tmpdir(), 'openenv-stop-building-'));
  });
  afterAll(async () => {
    if (parent) await rm(parent, { recursive: true, force: true });
  });

  /** SIGTERM once the slow step runs on the engine; how long the process took to exit after it */
  async function stopDuringBuild(p: ReturnType<typeof run>, marker: string): Promise<{ code: number | null; ms: number }> {
    try {
      await waitFor(() => buildSteps(marker).length > 0 || p.child.exitCode !== null, 120_000, 'the slow build step running on the engine');
      expect(p.child.exitCode, p.output()).toBeNull();
      const sent = Date.now();
      p.child.kill('SIGTERM');
      const exit = await p.exited;
      return { code: exit.code, ms: Date.now() - sent };
    } finally {
      if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    }
  }

  it('serve: SIGTERM cancels the build and exits 0, the step container gone and the instance name given back', async () => {
    const marker = `slow-serve-${process.pid}-${Date.now()}`;
    const bundle = await slowBundle(parent, marker);
    const instance = uniqueInstance('stop-building');
    const p = run([SERVE_JS, bundle, '--port', '0', '--instance', instance, '--build-arg', `NODE_IMAGE=${LOCAL_NODE_IMAGE}`]);
    const { code, ms } = await stopDuringBuild(p, marker);
    console.log(`[stop-while-building] serve exited ${code} ${ms} ms after SIGTERM (the build step had ${BUILD_STEP_S} s to go)`);
    expect(code, p.output().slice(-3000)).toBe(0);
    expect(ms).toBeLessThan((BUILD_STEP_S / 4) * 1000);
    // the server was ready before the build: it is the background builds the drain stops
    expect(p.output()).toContain('env images stopped by the drain (0 of 1 ready; builds running cancelled)');
    expect(p.output()).not.toContain('cannot serve episodes; stopping');
    // the engine removes a cancelled step's container (forcerm) as the build's connection closes
    await waitFor(() => buildSteps(marker).length === 0, 30_000, "the cancelled step's container removed");
    expect(lockMarkers(instance)).toEqual([]);
  });

  it('check: SIGTERM cancels the build, says it was interrupted and exits 1, leaving nothing', async () => {
    const marker = `slow-check-${process.pid}-${Date.now()}`;
    const bundle = await slowBundle(parent, marker);
    const markersBefore = lines(['volume', 'ls', '-q', '--filter', `label=${LOCK_LABELS.lock}`]);
    const p = run([CLI, 'check', bundle, '--build-arg', `NODE_IMAGE=${LOCAL_NODE_IMAGE}`]);
    const { code, ms } = await stopDuringBuild(p, marker);
    console.log(`[stop-while-building] check exited ${code} ${ms} ms after SIGTERM (the build step had ${BUILD_STEP_S} s to go)`);
    expect(code, p.output().slice(-3000)).toBe(1);
    expect(ms).toBeLessThan((BUILD_STEP_S / 4) * 1000);
    expect(p.output()).toContain('interrupted before any task was played');
    await waitFor(() => buildSteps(marker).length === 0, 30_000, "the cancelled step's container removed");
    // check runs under a fresh instance name: no lock marker it made is left
    expect(lines(['volume', 'ls', '-q', '--filter', `label=${LOCK_LABELS.lock}`]).filter((v) => !markersBefore.includes(v))).toEqual([]);
  });
});
