/**
 * `openenv-bundle build` as a user runs it: the built binary, a child process, on real Docker. A
 * tiny bundle of two env images (FROM the local Node base, a file of their own each): the first
 * run builds both under the tags the server's builder gives them; the second finds both already
 * present; with one Dockerfile broken it exits 1 with the build's error and last lines, the other
 * image still present; --push to a registry of the test's own pushes both, and the pull commands
 * it wrote bring an image back to an engine that lost it, under the tag a server looks for. Every
 * image the suite made (its bundle's label, the pushed names) is removed after.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import Dockerode from 'dockerode';
import type { PrebuildReport } from '../../src/authoring/prebuild.js';
import { buildEnvImage } from '../../src/sandbox/engine/image-build.js';
import { LABELS } from '../../src/sandbox/sandbox.js';
import { describeDocker, LOCAL_NODE_IMAGE } from '../support/docker.js';
import { startLocalRegistry, type LocalRegistry } from '../support/local-registry.js';
import { ensureDebianBase, LOCAL_DEBIAN_IMAGE } from '../harbor/helpers.js';

const CLI = path.resolve(import.meta.dirname, '../../dist/cli/openenv-bundle.js');

function build(args: string[]) {
  return spawnSync(process.execPath, [CLI, 'build', ...args], { encoding: 'utf8', timeout: 600_000 });
}

function lines(args: string[]): string[] {
  return execFileSync('docker', args, { encoding: 'utf8' })
    .split('\n')
    .map((s) => s.trim())
    .filter(Boolean);
}

const hasImage = (ref: string) => spawnSync('docker', ['image', 'inspect', ref], { stdio: 'ignore' }).status === 0;

/** a bundle of two envs, `a` and `b`, each FROM the local Node base with a file of its own */
async function writeBundle(dir: string, name: string, nonce: string): Promise<void> {
  const envs: Record<string, unknown> = {};
  const toolsets: Record<string, unknown> = {};
  const tasks: string[] = [];
  for (const env of ['a', 'b']) {
    await mkdir(path.join(dir, 'envs', env), { recursive: true });
    await writeFile(path.join(dir, 'envs', env, 'Dockerfile'), `FROM ${LOCAL_NODE_IMAGE}\nCOPY mark /opt/mark\n`);
    await writeFile(path.join(dir, 'envs', env, 'mark'), `${env}-${nonce}\n`);
    envs[env] = { build: `envs/${env}`, port: 8000, resources: { memory_mb: 128, cpus: 0.5, pids: 64 } };
    toolsets[env] = {
      env,
      tools: [{ name: 'noop', description: 'does nothing', input_schema: { type: 'object', properties: {}, additionalProperties: false } }],
    };
    tasks.push(JSON.stringify({ task_id: `t-${env}`, toolset: env, system_prompt: 'Do nothing.', turns: ['do nothing'] }));
  }
  await mkdir(path.join(dir, 'tasks'), { recursive: true });
  await writeFile(path.join(dir, 'tasks/train.jsonl'), `${tasks.join('\n')}\n`);
  const manifest = {
    name,
    version: '1.0.0',
    description: 'two env images for openenv-bundle build',
    default_split: 'train',
    splits: { train: 'tasks/train.jsonl' },
    envs,
    toolsets,
    max_turns: 1,
  };
  await writeFile(path.join(dir, 'bundle.json'), `${JSON.stringify(manifest, null, 2)}\n`);
}

describeDocker('openenv-bundle build, run as a process', () => {
  const nonce = randomBytes(4).toString('hex');
  const name = `build-test-${nonce}`;
  let tmp: string;
  let bundle: string;
  let registry: LocalRegistry | null = null;
  /** every name pushed or pulled, removed after */
  const remoteRefs: string[] = [];

  beforeAll(async () => {
    tmp = await mkdtemp(path.join(tmpdir(), 'openenv-build-cmd-'));
    bundle = path.join(tmp, name);
    await writeBundle(bundle, name, nonce);
  });

  afterAll(async () => {
    for (const ref of remoteRefs) if (hasImage(ref)) spawnSync('docker', ['rmi', '-f', ref], { stdio: 'ignore' });
    const ids = [...new Set(lines(['images', '-q', '--filter', `label=${LABELS.bundle}=${name}`]))];
    if (ids.length) execFileSync('docker', ['rmi', '-f', ...ids], { stdio: 'ignore' });
    expect(lines(['images', '-q', '--filter', `label=${LABELS.bundle}=${name}`])).toEqual([]);
    registry?.stop();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  /** the tags of the bundle's images on the engine */
  const tags = () => lines(['images', '--format', '{{.Repository}}:{{.Tag}}', '--filter', `label=${LABELS.bundle}=${name}`]).sort();

  it("builds both images under the server builder's tags, then finds them already present", async () => {
    const first = build([bundle]);
    expect(first.status, first.stdout + first.stderr).toBe(0);
    expect(first.stdout).toContain(`build ${name}: 2 image(s), 2 at once`);
    expect(first.stdout).toMatch(/\[\d\/2\] env a: built openenv-bundle\/build-test-[0-9a-f]+-a:[0-9a-f]{12} in /);
    expect(first.stdout).toMatch(/\[\d\/2\] env b: built openenv-bundle\/build-test-[0-9a-f]+-b:[0-9a-f]{12} in /);
    expect(first.stdout).toContain('2 image(s): 2 built, 0 already present, 0 pulled, 0 failed');
    expect(tags()).toHaveLength(2);
    // the server's builder, given the same request, finds the very tag and builds nothing
    const progress: string[] = [];
    const tag = await buildEnvImage(
      new Dockerode(),
      { bundleName: name, envName: 'a', contextDir: path.join(bundle, 'envs/a'), buildArgs: {}, onProgress: (l) => progress.push(l) },
      new Map(),
    );
    expect(tags()).toContain(tag);
    expect(progress).toEqual([`image ${tag} is up to date`]);

    const second = build([bundle, '--concurrency', '1']);
    expect(second.status, second.stdout + second.stderr).toBe(0);
    expect(second.stdout).toContain(`build ${name}: 2 image(s), 1 at once`);
    expect(second.stdout).toMatch(/\[1\/2\] env a: already present openenv-bundle\/\S+-a:[0-9a-f]{12}\n/);
    expect(second.stdout).toMatch(/\[2\/2\] env b: already present /);
    expect(second.stdout).toContain('2 image(s): 0 built, 2 already present, 0 pulled, 0 failed');
    expect(tags()).toHaveLength(2);
  }, 600_000);

  it('a broken Dockerfile: exit 1 with its error and last lines; the other image is still present', async () => {
    const broken = path.join(tmp, 'broken');
    await writeBundle(broken, name, nonce);
    // its first step fails (on the Debian base: the Node one has no shell): no layer of it is left on the engine
    ensureDebianBase();
    await writeFile(path.join(broken, 'envs/b/Dockerfile'), `FROM ${LOCAL_DEBIAN_IMAGE}\nRUN echo doomed-${nonce} && exit 3\n`);
    const r = build([broken]);
    expect(r.status, r.stdout + r.stderr).toBe(1);
    expect(r.stdout).toMatch(/env a: already present /);
    expect(r.stdout).toMatch(
      /env b: failed after [\d.]+ s: cannot build the image of env `b` from .*(returned a non-zero code: 3|did not complete successfully)/,
    );
    expect(r.stdout).toContain(`| doomed-${nonce}`);
    expect(r.stdout).toContain('2 image(s): 0 built, 1 already present, 0 pulled, 1 failed');
    expect(r.stdout).not.toContain('next:');
    expect(tags()).toHaveLength(2);
  }, 600_000);

  it('--push: both pushed to the registry; the written pull commands bring an image back under its tag', async () => {
    registry = await startLocalRegistry('openenv-build-registry-');
    const report = path.join(tmp, 'images.json');
    const r = build([bundle, '--push', registry.address, '--write', report]);
    expect(r.status, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain(`pushed ${registry.address}/openenv-bundle/`);
    expect(r.stdout).toContain(`pushed 2 image(s) to ${registry.address}. next (docs/images.md):`);
    expect(r.stdout).toContain(`--registry ${registry.address}`);
    const written = JSON.parse(await readFile(report, 'utf8')) as PrebuildReport;
    expect(written.registry).toBe(registry.address);
    expect(written.images.map((i) => i.state)).toEqual(['present', 'present']);
    const a = written.images.find((i) => i.name === 'a')!;
    expect(a.pushed).toMatch(new RegExp(`^${registry.address}/openenv-bundle/${name}-a:[0-9a-f]{12}@sha256:[0-9a-f]{64}$`));
    for (const i of written.images) remoteRefs.push(i.pushed!.split('@')[0]!, i.pull[0]!.split(' ').at(-1)!);

    // the engine loses image a (its tag and the pushed name), then gets it back as the report says
    execFileSync('docker', ['rmi', a.ref!, a.pushed!.split('@')[0]!], { stdio: 'ignore' });
    expect(hasImage(a.ref!)).toBe(false);
    expect(a.pull).toHaveLength(2);
    for (const cmd of a.pull) {
      const [bin, ...argv] = cmd.split(' ');
      expect(bin).toBe('docker');
      execFileSync('docker', argv, { stdio: 'ignore' });
    }
    expect(hasImage(a.ref!)).toBe(true);
    expect(lines(['image', 'inspect', '--format', `{{index .Config.Labels "${LABELS.env}"}}`, a.ref!])).toEqual(['a']);
    const again = build([bundle]);
    expect(again.status, again.stdout + again.stderr).toBe(0);
    expect(again.stdout).toContain('2 image(s): 0 built, 2 already present, 0 pulled, 0 failed');
  }, 600_000);
});
