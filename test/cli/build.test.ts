/** `openenv-bundle build`'s command line, and what it prints of each image and of the whole. */
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { pullCommands, type PrebuildReport, type PrebuiltImage } from '../../src/authoring/prebuild.js';
import { buildCommand, buildSummary, imageLine } from '../../src/cli/build.js';
import { runCommand } from '../../src/cli/command.js';
import { DEFAULT_IMAGE_BUILD_CONCURRENCY } from '../../src/defaults.js';
import { bufferIo } from '../authoring/helpers.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const CLI = path.join(ROOT, 'dist/cli/openenv-bundle.js');
const FIXTURE = path.join(ROOT, 'test/fixtures/fixture-v1');

describe('build: its arguments', () => {
  it("defaults: the server's image build concurrency, no push, no build arguments, no file", () => {
    expect(buildCommand.parse(['b'])).toEqual({ bundle: 'b', concurrency: DEFAULT_IMAGE_BUILD_CONCURRENCY, buildArg: [], json: false });
  });

  it('takes a registry, a concurrency, repeated build arguments (also from OPENENV_BUILD_ARG) and a report file', () => {
    const a = buildCommand.parse(['b', '--push', '127.0.0.1:5000/team', '--concurrency', '8', '--build-arg', 'A=1', '--build-arg', 'B=2', '--write', 'r.json']);
    expect(a).toMatchObject({ push: '127.0.0.1:5000/team', concurrency: 8, buildArg: ['A=1', 'B=2'], write: 'r.json' });
    expect(buildCommand.parse(['b'], { OPENENV_BUILD_ARG: 'NODE_IMAGE=x' }).buildArg).toEqual(['NODE_IMAGE=x']);
  });

  it.each([
    [['b', '--push', 'http://127.0.0.1:5000'], /--push: expected HOST:PORT of a registry/],
    [['b', '--concurrency', '0'], /--concurrency/],
    [['b', '--build-arg', 'novalue'], /expected KEY=VALUE/],
    [[], /missing BUNDLE/],
  ])('%j is a command line to fix (exit 2)', async (argv, message) => {
    const b = bufferIo();
    expect(await runCommand(buildCommand, argv, b.io, 'openenv-bundle build')).toBe(2);
    expect(b.err()).toMatch(message);
  });

  it('--help names every option', async () => {
    const b = bufferIo();
    expect(await runCommand(buildCommand, ['--help'], b.io, 'openenv-bundle build')).toBe(0);
    for (const flag of ['--push REGISTRY', '--concurrency N', '--build-arg KEY=VALUE', '--write FILE', '--json']) expect(b.out()).toContain(flag);
  });

  it('no engine at DOCKER_HOST: exit 1 saying so and what to do (the built command, a child process)', () => {
    const r = spawnSync(process.execPath, [CLI, 'build', FIXTURE], {
      encoding: 'utf8',
      env: { ...process.env, DOCKER_HOST: `unix://${path.join(tmpdir(), `no-engine-${process.pid}.sock`)}` },
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^error: no Docker engine answers \(.*\): start one, or point DOCKER_HOST at it\n$/);
  });

  it('a bundle that does not load: exit 1 saying so, before any engine is asked', async () => {
    const b = bufferIo();
    expect(await runCommand(buildCommand, ['/nonexistent/bundle'], b.io, 'openenv-bundle build')).toBe(1);
    expect(b.err()).toMatch(/^error: .*nonexistent\/bundle/);
  });
});

const image = (over: Partial<PrebuiltImage>): PrebuiltImage => ({
  name: 'a',
  ref: 'openenv-bundle/x-a:0123456789ab',
  state: 'built',
  pushed: null,
  seconds: 2.5,
  error: null,
  tail: [],
  pull: [],
  ...over,
});

describe('build: what it prints', () => {
  it('a line per image: built with its time, present without, a sidecar named so, a failure with its error and the last lines', () => {
    expect(imageLine(image({}), 1, 3)).toBe('  [1/3] env a: built openenv-bundle/x-a:0123456789ab in 2.5 s');
    expect(imageLine(image({ state: 'present' }), 2, 3)).toBe('  [2/3] env a: already present openenv-bundle/x-a:0123456789ab');
    expect(imageLine(image({ name: 'a/db', state: 'pulled', ref: 'postgres:16' }), 3, 3)).toBe('  [3/3] sidecar a/db: pulled postgres:16 in 2.5 s');
    expect(imageLine(image({ state: 'failed', error: 'cannot build: exit 3', tail: ['Step 2/2 : RUN false'] }), 3, 3)).toBe(
      '  [3/3] env a: failed after 2.5 s: cannot build: exit 3\n      | Step 2/2 : RUN false',
    );
    expect(imageLine(image({ pushed: 'r:5000/openenv-bundle/x-a:0123456789ab@sha256:ff' }), 1, 1)).toContain(
      '\n      pushed r:5000/openenv-bundle/x-a:0123456789ab@sha256:ff',
    );
  });

  const report = (images: PrebuiltImage[], registry: string | null = null): PrebuildReport => {
    const counts = { built: 0, present: 0, pulled: 0, failed: 0 };
    for (const i of images) counts[i.state]++;
    return { bundle: 'x', registry, buildArgs: { NODE_IMAGE: 'n:20' }, images, counts };
  };

  it('the summary: the counts, then what a server does next, with the build arguments the tags were made with', () => {
    const local = buildSummary(report([image({}), image({ name: 'b', state: 'present' })]), null);
    expect(local).toBe(
      '2 image(s): 1 built, 1 already present, 0 pulled, 0 failed\nnext: serve the bundle on this engine --build-arg NODE_IMAGE=n:20: it finds every image and builds nothing (docs/images.md)',
    );
    const pushed = buildSummary(report([image({ pushed: 'r:5000/openenv-bundle/x-a:0123456789ab@sha256:ff' })], 'r:5000'), 'out.json');
    expect(pushed).toContain('pushed 1 image(s) to r:5000. next (docs/images.md):');
    expect(pushed).toContain('serve --sandbox swarm --registry r:5000 --build-arg NODE_IMAGE=n:20');
    expect(pushed).toContain('the "pull" commands of each image in out.json');
    expect(pushed).toMatch(/report written to out\.json$/);
    const failed = buildSummary(report([image({ state: 'failed', error: 'x' })]), null);
    expect(failed).toBe('1 image(s): 0 built, 0 already present, 0 pulled, 1 failed');
  });

  it('pull commands: by digest, then tagged as the server looks for it; none when nothing was pushed', () => {
    expect(pullCommands({ ref: 'openenv-bundle/x-a:0123456789ab', pushed: 'r:5000/openenv-bundle/x-a:0123456789ab@sha256:ff' })).toEqual([
      'docker pull r:5000/openenv-bundle/x-a@sha256:ff',
      'docker tag r:5000/openenv-bundle/x-a@sha256:ff openenv-bundle/x-a:0123456789ab',
    ]);
    expect(pullCommands({ ref: 'openenv-bundle/x-a:0123456789ab', pushed: null })).toEqual([]);
  });
});
