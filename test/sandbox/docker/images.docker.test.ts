/** Env images on a real engine: tagged by content hash, reused, rebuilt on change, failures reported. */
import { execFileSync } from 'node:child_process';
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Dockerode from 'dockerode';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { LABELS, SandboxError } from '../../../src/sandbox/sandbox.js';
import { DockerSandbox } from '../../../src/sandbox/docker/index.js';
import { describeDocker, TEST_BUILD_ARGS, uniqueInstance } from '../../support/docker.js';
import { ECHO_CONTEXT } from './fixture.js';

function imageId(ref: string): string | null {
  try {
    return execFileSync('docker', ['image', 'inspect', '--format', '{{.Id}}', ref], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return null;
  }
}

function build(sandbox: DockerSandbox, contextDir: string, buildArgs = TEST_BUILD_ARGS, envName = 'echo') {
  const lines: string[] = [];
  const tag = sandbox.images.build({ bundleName: 'fixture-v1', envName, contextDir, buildArgs, onProgress: (l) => lines.push(l) });
  return { tag, lines };
}

describeDocker('DockerSandbox images', () => {
  const sandbox = new DockerSandbox({ instance: uniqueInstance('images'), bundleName: 'fixture-v1' });
  let work = '';
  /** tags these tests built for their own temporary contexts, removed at the end */
  const scratchTags = new Set<string>();

  beforeAll(async () => {
    work = await mkdtemp(path.join(tmpdir(), 'sandbox-images-'));
  });

  afterAll(async () => {
    for (const tag of scratchTags) execFileSync('docker', ['image', 'rm', '-f', tag], { stdio: 'ignore' });
    await sandbox.sweep();
    await sandbox.close();
    await rm(work, { recursive: true, force: true });
  });

  async function scratchContext(name: string): Promise<string> {
    const dir = path.join(work, name);
    await cp(ECHO_CONTEXT, dir, { recursive: true });
    // a unique file makes a context no earlier run has built
    await writeFile(path.join(dir, 'nonce.txt'), `${name} ${Date.now()} ${Math.random()}\n`);
    return dir;
  }

  it('builds the fixture env, tagged by the hash of its context, with our labels', async () => {
    const { tag: p } = build(sandbox, ECHO_CONTEXT);
    const tag = await p;
    expect(tag).toMatch(/^openenv-bundle\/fixture-v1-echo:[0-9a-f]{12}$/);
    expect(imageId(tag)).not.toBeNull();
    const labels = JSON.parse(execFileSync('docker', ['image', 'inspect', '--format', '{{json .Config.Labels}}', tag], { encoding: 'utf8' })) as Record<
      string,
      string
    >;
    expect(labels).toMatchObject({ [LABELS.managed]: '1', [LABELS.bundle]: 'fixture-v1', [LABELS.env]: 'echo' });
  });

  it('reuses the image of an unchanged context, and builds a new one when a file or a build arg changes', async () => {
    const dir = await scratchContext('changes');
    const first = build(sandbox, dir);
    const tag1 = await first.tag;
    scratchTags.add(tag1);
    expect(first.lines.some((l) => /^Step \d+\/\d+ : COPY server.mjs/.test(l))).toBe(true);
    expect(first.lines.some((l) => /Successfully tagged/.test(l))).toBe(true);
    const id1 = imageId(tag1);

    const again = build(sandbox, dir);
    expect(await again.tag).toBe(tag1);
    expect(again.lines).toEqual([`image ${tag1} is up to date`]);
    expect(imageId(tag1)).toBe(id1);

    await writeFile(path.join(dir, 'server.mjs'), '\n// changed\n', { flag: 'a' });
    const changed = build(sandbox, dir);
    const tag2 = await changed.tag;
    scratchTags.add(tag2);
    expect(tag2).not.toBe(tag1);
    expect(changed.lines.some((l) => /^Step \d+\/\d+ : COPY server.mjs/.test(l))).toBe(true);
    expect(imageId(tag2)).not.toBe(id1);

    const withArg = build(sandbox, dir, { ...TEST_BUILD_ARGS, EXTRA_ARG: 'x' });
    const tag3 = await withArg.tag;
    scratchTags.add(tag3);
    expect(new Set([tag1, tag2, tag3]).size).toBe(3);
  });

  it('runs one build for concurrent requests of the same context', async () => {
    const dir = await scratchContext('concurrent');
    const a = build(sandbox, dir);
    const b = build(sandbox, dir);
    const [ta, tb] = await Promise.all([a.tag, b.tag]);
    scratchTags.add(ta);
    expect(tb).toBe(ta);
    const starts = [...a.lines, ...b.lines].filter((l) => l.startsWith('building '));
    expect(starts).toHaveLength(1);
  });

  it('fails a build whose step fails, with the engine message, and tags nothing', async () => {
    const dir = await scratchContext('bad');
    await writeFile(
      path.join(dir, 'Dockerfile'),
      'ARG NODE_IMAGE=node:20-slim\nFROM ${NODE_IMAGE}\nCOPY server.mjs /app/server.mjs\nRUN ["node", "-e", "console.log(\'about to fail\'); process.exit(2)"]\n',
    );
    const bad = build(sandbox, dir);
    const err = await bad.tag.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxError);
    expect((err as SandboxError).reason).toBe('image_unavailable');
    expect((err as SandboxError).message).toMatch(/returned a non-zero code: 2/);
    expect(bad.lines).toContain('about to fail');
    const digestTag = bad.lines.find((l) => l.startsWith('building '))!.split(' ')[1]!;
    expect(imageId(digestTag)).toBeNull();
  });

  it('fails a build whose Dockerfile does not parse, and one that copies a missing file', async () => {
    const dir = await scratchContext('unparseable');
    await writeFile(path.join(dir, 'Dockerfile'), 'FROM ${NODE_IMAGE}\nFROBNICATE now\n');
    await expect(build(sandbox, dir).tag).rejects.toThrow(/unknown instruction: FROBNICATE/i);
    await writeFile(path.join(dir, 'Dockerfile'), 'ARG NODE_IMAGE\nFROM ${NODE_IMAGE}\nCOPY missing.txt /app/\n');
    await expect(build(sandbox, dir).tag).rejects.toThrow(/missing\.txt/);
    // shell form needs /bin/sh, which the offline base image does not have
    await writeFile(path.join(dir, 'Dockerfile'), 'ARG NODE_IMAGE\nFROM ${NODE_IMAGE}\nRUN echo hi\n');
    await expect(build(sandbox, dir).tag).rejects.toThrow(/\/bin\/sh/);
  });

  it('checks images and pings the engine', async () => {
    await expect(sandbox.images.check(TEST_BUILD_ARGS.NODE_IMAGE!)).resolves.toBeUndefined();
    const err = await sandbox.images.check('openenv-bundle/does-not-exist:000000000000').catch((e: unknown) => e);
    expect((err as SandboxError).reason).toBe('image_unavailable');
    await expect(sandbox.ping()).resolves.toBeUndefined();
    const nowhere = new DockerSandbox({
      instance: uniqueInstance('nowhere'),
      bundleName: 'x',
      docker: new Dockerode({ socketPath: '/nonexistent/docker.sock' }),
    });
    const pingErr = await nowhere.ping().catch((e: unknown) => e);
    expect(pingErr).toBeInstanceOf(SandboxError);
    expect((pingErr as SandboxError).reason).toBe('engine_error');
    expect((pingErr as SandboxError).message).toMatch(/unreachable/);
    await nowhere.close();
  });
});
