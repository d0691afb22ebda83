/**
 * A task's prebuilt image and its Dockerfile, and compose files, as users run them: the built
 * CLI imports the fixtures (test/fixtures/harbor-tasks/) and `check --json` plays them on real
 * Docker. Offline, the prebuilt+Dockerfile task's image is missing: the import says it builds the
 * Dockerfile, and the golden solution reaches the max (the ledger the Dockerfile COPYs is there);
 * with a local image of the docker_image's name, `auto` uses it, and the golden reaches the max
 * on it. The compose file changing only main imports and its golden (which reads the variable
 * the file sets) reaches the max (a sidecar service: sidecars.docker.test.ts). `pack` of an
 * imported bundle holds no absolute path of this machine.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeDocker } from '../support/docker.js';
import { BASE_IMAGE_RULE, ensureDebianBase } from './helpers.js';

const CLI = path.resolve(import.meta.dirname, '../../dist/cli/openenv-bundle.js');
const FIXTURES = path.resolve(import.meta.dirname, '../fixtures/harbor-tasks');
const TASK_IMAGE = 'example.org/tb2/prebuilt-task:1.0';

function run(args: string[]) {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 600_000, env: { ...process.env, NO_COLOR: '1' } });
}

function docker(args: string[]): string {
  return execFileSync('docker', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

const imageExists = (ref: string) => spawnSync('docker', ['image', 'inspect', ref], { stdio: 'ignore' }).status === 0;

/** `check --json` of a bundle: its report */
function check(dir: string) {
  const r = run(['check', dir, '--tasks', 'all', '--json']);
  expect(r.status, r.stdout + r.stderr).toBe(0);
  return JSON.parse(r.stdout) as {
    ok: boolean;
    played: { golden: { passed: number; played: number; reward: number }; empty: { passed: number; played: number } };
  };
}

describeDocker('import harbor: prebuilt images, Dockerfiles and compose files, then check', () => {
  let tmp: string;
  /** a name of this run: the bundles' names, so the images check builds (openenv-bundle/<name>-<env>:<hash>) are this run's */
  const nonce = `imgc${process.pid}${Date.now().toString(36)}`;
  let taggedByUs = false;

  beforeAll(() => {
    ensureDebianBase();
    tmp = mkdtempSync(path.join(tmpdir(), 'harbor-images-'));
    // the test's first half needs the engine without the task's image: one of that name is not ours to remove
    expect(imageExists(TASK_IMAGE), `${TASK_IMAGE} is on the engine already: this test makes and removes it`).toBe(false);
  });

  afterAll(() => {
    if (taggedByUs) spawnSync('docker', ['image', 'rm', TASK_IMAGE], { stdio: 'ignore' });
    const ours = docker(['image', 'ls', '--format', '{{.Repository}}:{{.Tag}}', '--filter', `reference=openenv-bundle/${nonce}-*`])
      .split('\n')
      .filter(Boolean);
    for (const ref of ours) spawnSync('docker', ['image', 'rm', ref], { stdio: 'ignore' });
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it('the image missing: the import says it builds the Dockerfile; its golden plays at the max; with a local image of that name, auto uses it', () => {
    const built = path.join(tmp, 'built');
    const imp = run([
      'import',
      'harbor',
      path.join(FIXTURES, 'prebuilt-and-dockerfile'),
      '--out',
      built,
      '--name',
      `${nonce}-built`,
      '--base-image',
      BASE_IMAGE_RULE,
    ]);
    expect(imp.status, imp.stdout + imp.stderr).toBe(0);
    expect(imp.stdout).toContain(
      '[environment] docker_image: the engine does not have this image: environment/Dockerfile is built instead (--images auto; --images prebuilt has the engine pull it at serve time) (task prebuilt-and-dockerfile)',
    );
    // never a bare base for the task's own image
    expect(imp.stdout).not.toMatch(/--base-image example\.org/);
    const first = check(built);
    expect(first.played.golden).toMatchObject({ passed: 1, played: 1, reward: 1 });
    expect(first.played.empty).toMatchObject({ passed: 1, played: 1 });

    // the image check built from the Dockerfile, named as the task's prebuilt image
    const builtImage = docker(['image', 'ls', '--format', '{{.Repository}}:{{.Tag}}', '--filter', `reference=openenv-bundle/${nonce}-built-*`]).split('\n')[0]!;
    expect(builtImage).toMatch(new RegExp(`^openenv-bundle/${nonce}-built-prebuilt-and-dockerfile:[0-9a-f]{12}$`));
    docker(['tag', builtImage, TASK_IMAGE]);
    taggedByUs = true;

    const pre = path.join(tmp, 'prebuilt');
    const imp2 = run([
      'import',
      'harbor',
      path.join(FIXTURES, 'prebuilt-and-dockerfile'),
      '--out',
      pre,
      '--name',
      `${nonce}-pre`,
      '--base-image',
      BASE_IMAGE_RULE,
      '--json',
    ]);
    expect(imp2.status, imp2.stdout + imp2.stderr).toBe(0);
    const result = JSON.parse(imp2.stdout);
    expect(result.tasks).toEqual([expect.objectContaining({ id: 'prebuilt-and-dockerfile', image: 'docker_image' })]);
    expect(result.notes).toContainEqual({
      field: '[environment] docker_image',
      message: 'used: the engine has this image (--images auto); its environment/Dockerfile is not built',
      tasks: ['prebuilt-and-dockerfile'],
    });
    expect(result.missingImages).toEqual([]);
    const second = check(pre);
    expect(second.played.golden).toMatchObject({ passed: 1, played: 1, reward: 1 });
  }, 900_000);

  it('a compose file changing only main imports, and its golden (reading the variable the file sets) plays at the max', () => {
    const out = path.join(tmp, 'compose');
    const imp = run([
      'import',
      'harbor',
      path.join(FIXTURES, 'compose-main-only'),
      '--out',
      out,
      '--name',
      `${nonce}-compose`,
      '--base-image',
      BASE_IMAGE_RULE,
    ]);
    expect(imp.status, imp.stdout + imp.stderr).toBe(0);
    expect(imp.stdout).toContain('environment/docker-compose.yaml services.main.network_mode: none: kept (every env here has no network)');
    const report = check(out);
    expect(report.played.golden).toMatchObject({ passed: 1, played: 1, reward: 1 });
    expect(report.played.empty).toMatchObject({ passed: 1, played: 1 });
  }, 900_000);

  it('pack of an imported bundle holds no absolute path of this machine', () => {
    const out = path.join(tmp, 'compose');
    const packed = run(['pack', out, '--out', tmp, '--json']);
    expect(packed.status, packed.stdout + packed.stderr).toBe(0);
    const file = JSON.parse(packed.stdout).file as string;
    const contents = execFileSync('tar', ['-xzOf', file], { encoding: 'latin1', maxBuffer: 64 << 20 });
    expect(contents).toContain('"source":"compose-main-only"');
    for (const p of [tmp, FIXTURES, process.cwd()]) expect(contents.includes(p), `the archive holds ${p}`).toBe(false);
  });
});
