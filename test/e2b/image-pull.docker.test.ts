/**
 * A sandbox whose metadata names an image the engine lacks: the server pulls it from its registry
 * and the sandbox runs it. The registry is Debian's `docker-registry` (the distribution registry)
 * on 127.0.0.1 and a free port, with its own data folder, stopped after; Docker trusts
 * 127.0.0.0/8 as an insecure registry by default, so the engine pulls from it over plain HTTP
 * with no change to the daemon. The image is a fresh one (the local Debian base and a layer of
 * random bytes of its own), pushed there and removed from the engine, so the pull downloads it.
 * Two sandboxes asking for it at once share one pull; its progress is in the server's log and in
 * each waiting sandbox's console transcript.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Sandbox } from 'e2b';
import { describeDocker, waitFor } from '../support/docker.js';
import { startLocalRegistry, type LocalRegistry } from '../support/local-registry.js';
import { ensureDebianBase, LOCAL_DEBIAN_IMAGE, startE2bServer, TEMPLATE, type E2bServer } from './helpers.js';

const hasImage = (ref: string) => {
  try {
    execFileSync('docker', ['image', 'inspect', ref], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};

describeDocker('an image pulled for a sandbox', () => {
  let registry: LocalRegistry;
  let image: string;
  let s: E2bServer;

  beforeAll(async () => {
    ensureDebianBase();
    registry = await startLocalRegistry('openenv-e2b-registry-');

    // an image of its own: the Debian base and a layer no other image has, so the pull downloads it
    const nonce = randomBytes(6).toString('hex');
    image = `${registry.address}/openenv-e2b-pull/debian:${nonce}`;
    execFileSync('docker', ['build', '-q', '-t', image, '-'], {
      input: `FROM ${LOCAL_DEBIAN_IMAGE}\nRUN head -c 6000000 /dev/urandom > /opt/blob && echo ${nonce} > /opt/nonce\n`,
      stdio: ['pipe', 'ignore', 'pipe'],
    });
    execFileSync('docker', ['push', image], { stdio: 'ignore' });
    execFileSync('docker', ['rmi', image], { stdio: 'ignore' });
    expect(hasImage(image)).toBe(false);

    s = await startE2bServer(['--e2b-image-key', 'image', '--e2b-images', `${registry.address}/openenv-e2b-pull/*`]);
  }, 300_000);

  afterAll(async () => {
    if (s) {
      s.proc.child.kill('SIGTERM');
      expect((await s.proc.exited).code).toBe(0);
    }
    if (image && hasImage(image)) execFileSync('docker', ['rmi', '-f', image], { stdio: 'ignore' });
    registry?.stop();
  });

  it('is pulled from its registry once for two sandboxes asking at once, its progress in the log and the console; both run it', async () => {
    const sdk = { apiKey: s.token, apiUrl: s.env.E2B_API_URL, sandboxUrl: s.env.E2B_SANDBOX_URL, timeoutMs: 300_000 };
    const [a, b] = await Promise.all([Sandbox.create(TEMPLATE, { ...sdk, metadata: { image } }), Sandbox.create(TEMPLATE, { ...sdk, metadata: { image } })]);
    try {
      expect(hasImage(image)).toBe(true);
      for (const sb of [a!, b!]) {
        const r = await sb.commands.run('cat /opt/nonce; wc -c < /opt/blob', { user: 'root' });
        expect(r.stdout).toBe(`${image.split(':').pop()}\n6000000\n`);
      }
    } finally {
      await a!.kill();
      await b!.kill();
    }
    const log = s.proc.lines().filter((l) => l.image === image);
    const events = log.map((l) => l.event);
    expect(events.filter((e) => e === 'image_pull')).toHaveLength(1);
    expect(events.filter((e) => e === 'image_pulled')).toHaveLength(1);
    const progress = log.filter((l) => l.event === 'image_pull_progress');
    // every 5 s while it lasts, the first at once (a pull from this host is over within seconds)
    expect(progress.length).toBeGreaterThan(0);
    expect(progress[0]).toMatchObject({ layers: expect.any(Number), bytes: expect.any(Number), total_bytes: expect.any(Number) });
    expect(log.find((l) => l.event === 'image_pulled')).toMatchObject({ pull_s: expect.any(Number) });

    for (const sb of [a!, b!]) {
      const t = (await (await fetch(`${s.url}/console/episodes/${sb.sandboxId}`, { headers: { authorization: `Bearer ${s.token}` } })).json()) as {
        events: { kind: string; tool_name?: string; arguments?: { image?: string }; result?: { bytes: number; total_bytes: number } }[];
      };
      const pulls = t.events.filter((e) => e.kind === 'tool_call' && e.tool_name === 'image.pull');
      expect(pulls.length, sb.sandboxId).toBeGreaterThan(0);
      expect(pulls.every((e) => e.arguments?.image === image)).toBe(true);
      // the console heard it go: from its first tenth to its last
      const last = pulls.at(-1)!.result!;
      expect(last.total_bytes).toBeGreaterThanOrEqual(6_000_000);
      expect(last.bytes).toBe(last.total_bytes);
    }
    await waitFor(async () => !(await a!.isRunning()), 10_000, 'a is gone');
  });
});
