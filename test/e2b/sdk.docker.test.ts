/**
 * The server as an E2B provider, driven by the real `e2b` SDK from npm (no stand-in) the way
 * slime's agent layer drives it: sandboxes created by template and by a metadata image, commands
 * as root and as a created user (envs, cwd, a timeout, a non-zero exit), slime's detached
 * launcher polled through a marker file, files written (a string, bytes, a 50 MB stream) and
 * read, listed, killed, timed out, paused and resumed; and what is refused (a wrong key, a wrong
 * access token, another sandbox's id, an image not allowed, a missing image).
 */
import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CommandExitError, Sandbox, TimeoutError } from 'e2b';
import { describeDocker, waitFor } from '../support/docker.js';
import { e2bSuiteServer, LOCAL_DEBIAN_IMAGE, sandboxContainers, TEMPLATE } from './helpers.js';

describeDocker('E2B sandboxes through the real SDK', () => {
  const server = e2bSuiteServer(['--e2b-image-key', 'image', '--e2b-images', 'openenv-local/debian:*,openenv-local/missing*', '--max-concurrent-envs', '4']);

  describe('a sandbox of a template (an env of the bundle)', () => {
    it('runs commands as root and as a created user, with envs, cwd and a timeout; a failure carries its exit code and output', async () => {
      const sb = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000 });
      try {
        expect(sb.sandboxId).toMatch(/^[a-z0-9]{20}$/);
        const r = await sb.commands.run('echo out; echo err >&2; echo "$FOO"; pwd; id -un', { user: 'root', envs: { FOO: 'bar baz' } });
        expect(r).toMatchObject({ exitCode: 0, stdout: 'out\nbar baz\n/workspace\nroot\n', stderr: 'err\n' });
        expect((await sb.commands.run('pwd', { cwd: '/tmp' })).stdout).toBe('/tmp\n');

        await sb.commands.run('useradd -m agent', { user: 'root' });
        const asAgent = await sb.commands.run('id -un; echo $HOME; touch mine; stat -c %U mine', { user: 'agent', cwd: '/home/agent' });
        expect(asAgent.stdout).toBe('agent\n/home/agent\nagent\n');

        const failed = await sb.commands.run('echo partial; echo why >&2; exit 7', { user: 'root' }).catch((e: unknown) => e);
        expect(failed).toBeInstanceOf(CommandExitError);
        expect(failed).toMatchObject({ exitCode: 7, stdout: 'partial\n', stderr: 'why\n' });

        // the call's timeout kills the command (its whole group), as envd's does
        const sleeping = async () =>
          (
            await sb.commands.run('for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = sleep ] && echo ${p#/proc/}; done; true', { user: 'root' })
          ).stdout.trim();
        const started = Date.now();
        const slow = sb.commands.run('sleep 30 & sleep 30; echo never', { timeoutMs: 3000 }).catch((e: unknown) => e);
        await waitFor(async () => (await sleeping()).split('\n').length === 2, 10_000, 'both sleeps run');
        expect(await slow).toBeInstanceOf(Error);
        expect(Date.now() - started).toBeLessThan(20_000);
        await waitFor(async () => (await sleeping()) === '', 15_000, 'the timed-out command and what it started are gone');

        const unknown = await sb.commands.run('true', { user: 'nobody-here' }).catch((e: unknown) => e);
        expect(String(unknown)).toMatch(/user "nobody-here" does not exist in this sandbox/);
      } finally {
        await sb.kill();
      }
    });

    it("runs slime's detached launcher (runuser, setsid, a marker file polled until the exit code appears), which outlives the call that started it", async () => {
      const sb = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000 });
      try {
        await sb.commands.run('useradd -m -s /bin/bash agent && chown -R agent:agent /workspace', { user: 'root' });
        const launcher = '#!/bin/bash\ncd /workspace\nsleep 3\necho "$K1-$K2-$(id -un)" > /workspace/launched.txt\necho $? > /tmp/.run.done\n';
        await sb.files.write('/tmp/.run.sh', launcher, { user: 'agent' });
        const spawn = await sb.commands.run(
          "chmod +x /tmp/.run.sh; runuser -u agent --whitelist-environment=K1,K2 -- bash -c 'setsid bash /tmp/.run.sh < /dev/null > /tmp/.run.out 2>&1 &'",
          { user: 'root', envs: { K1: 'one', K2: 'two' }, timeoutMs: 30_000 },
        );
        expect(spawn.exitCode).toBe(0);
        let marker = '';
        for (let i = 0; i < 30 && !marker; i++) {
          await new Promise((r) => setTimeout(r, 1000));
          const poll = await sb.commands.run('test -f /tmp/.run.done && cat /tmp/.run.done', { user: 'agent', timeoutMs: 15_000 }).catch(() => null);
          if (poll) marker = poll.stdout.trim();
        }
        expect(marker).toBe('0');
        expect(await sb.files.read('/workspace/launched.txt', { user: 'agent' })).toBe('one-two-agent\n');
      } finally {
        await sb.kill();
      }
    });

    it('writes a string, bytes and a 50 MB stream, and reads them back byte for byte, owned by the user named', async () => {
      const sb = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000 });
      try {
        await sb.commands.run('useradd -m agent', { user: 'root' });
        await sb.files.write('/workspace/deep/new/dir/hello.txt', 'héllo\n', { user: 'agent' });
        expect(await sb.files.read('/workspace/deep/new/dir/hello.txt')).toBe('héllo\n');
        expect((await sb.commands.run('stat -c %U /workspace/deep/new/dir/hello.txt /workspace/deep', { user: 'root' })).stdout).toBe('agent\nagent\n');

        const bytes = randomBytes(70_000);
        await sb.files.write('/tmp/blob.bin', bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length) as ArrayBuffer, { user: 'root' });
        expect(Buffer.from(await sb.files.read('/tmp/blob.bin', { format: 'bytes', user: 'root' })).equals(bytes)).toBe(true);

        const size = 50 * 1024 * 1024;
        const hash = createHash('sha256');
        let sent = 0;
        const stream = new ReadableStream<Uint8Array>({
          pull(controller) {
            if (sent >= size) return controller.close();
            const chunk = randomBytes(Math.min(1024 * 1024, size - sent));
            hash.update(chunk);
            sent += chunk.length;
            controller.enqueue(chunk);
          },
        });
        const info = await sb.files.write('/tmp/big.bin', stream, { user: 'root', useOctetStream: true, requestTimeoutMs: 600_000 });
        expect(info).toMatchObject({ name: 'big.bin', path: '/tmp/big.bin' });
        const digest = hash.digest('hex');
        expect((await sb.commands.run('sha256sum /tmp/big.bin | cut -d" " -f1', { user: 'root' })).stdout.trim()).toBe(digest);
        const back = await sb.files.read('/tmp/big.bin', { format: 'stream', user: 'root' });
        const h2 = createHash('sha256');
        let got = 0;
        for await (const c of back as unknown as AsyncIterable<Uint8Array>) {
          h2.update(c);
          got += c.length;
        }
        expect(got).toBe(size);
        expect(h2.digest('hex')).toBe(digest);

        // through a link, keeping an existing file's mode and owner, as envd's open() does; gzip undone
        await sb.commands.run('echo old > /tmp/target && chmod 600 /tmp/target && chown agent /tmp/target && ln -s /tmp/target /tmp/link', { user: 'root' });
        await sb.files.write('/tmp/link', 'new\n', { user: 'root' });
        expect((await sb.commands.run('cat /tmp/target; stat -c "%a %U %F" /tmp/target /tmp/link', { user: 'root' })).stdout).toBe(
          'new\n600 agent regular file\n777 root symbolic link\n',
        );
        expect(await sb.files.read('/tmp/link')).toBe('new\n');
        await sb.files.write('/tmp/gz.txt', 'unzipped on the way in', { gzip: true, user: 'root' });
        expect(await sb.files.read('/tmp/gz.txt')).toBe('unzipped on the way in');
        expect(await sb.files.read('/tmp', { user: 'root' }).catch((e: unknown) => String(e))).toMatch(/folder/);

        const missing = await sb.files.read('/nope/nothing').catch((e: unknown) => e);
        expect(String(missing)).toMatch(/does not exist/);
        const listed = await sb.files.list('/workspace/deep');
        expect(listed.map((e) => [e.name, e.type])).toEqual([['new', 'dir']]);
        expect(await sb.files.exists('/tmp/big.bin')).toBe(true);
        await sb.files.rename('/tmp/blob.bin', '/tmp/moved/blob.bin');
        expect((await sb.files.getInfo('/tmp/moved/blob.bin')).size).toBe(70_000);
        await sb.files.remove('/tmp/moved');
        expect(await sb.files.exists('/tmp/moved')).toBe(false);
        expect(await sb.files.makeDir('/tmp/made')).toBe(true);
        expect(await sb.files.makeDir('/tmp/made')).toBe(false);
      } finally {
        await sb.kill();
      }
    });

    it('is listed (by metadata and state), found, killed (its container removed), and gone for every call after', async () => {
      const a = await Sandbox.create(TEMPLATE, { metadata: { run: 'list-a', who: 'x' } });
      const b = await Sandbox.create(TEMPLATE, { metadata: { run: 'list-b' } });
      try {
        const items = await Sandbox.list({ query: { metadata: { run: 'list-a' } } }).nextItems();
        expect(items.map((s) => s.sandboxId)).toEqual([a.sandboxId]);
        expect(items[0]).toMatchObject({ templateId: TEMPLATE, state: 'running', metadata: { run: 'list-a', who: 'x' } });
        const running = await Sandbox.list({ query: { state: ['running'] } }).nextItems();
        expect(running.map((s) => s.sandboxId)).toEqual(expect.arrayContaining([a.sandboxId, b.sandboxId]));
        expect((await Sandbox.getInfo(b.sandboxId)).metadata).toEqual({ run: 'list-b' });
        expect(sandboxContainers(a.sandboxId)).toHaveLength(1);
        expect(await a.kill()).toBe(true);
        expect(sandboxContainers(a.sandboxId)).toHaveLength(0);
        expect(await Sandbox.kill(a.sandboxId)).toBe(false);
        await expect(Sandbox.getInfo(a.sandboxId)).rejects.toThrow(/not found/i);
        expect(await a.isRunning()).toBe(false);
        await expect(a.commands.run('true')).rejects.toThrow();
      } finally {
        await a.kill().catch(() => undefined);
        await b.kill();
      }
    });

    it('is shown in the console as an episode of transport e2b, its commands and file operations its transcript, its cost read at its end', async () => {
      const sb = await Sandbox.create(TEMPLATE, { metadata: { run: 'console' } });
      await sb.commands.run('echo seen-in-console', { user: 'root' });
      await sb.files.write('/tmp/c.txt', 'c');
      await sb.kill();
      const t = (await (await fetch(`${server.url}/console/episodes/${sb.sandboxId}`, { headers: { authorization: `Bearer ${server.token}` } })).json()) as any;
      expect(t).toMatchObject({ episode_id: sb.sandboxId, transport: 'e2b', task_id: TEMPLATE, split: 'e2b', phase: 'done', end_reason: 'closed' });
      const calls = t.events.filter((e: any) => e.kind === 'tool_call');
      expect(calls.map((e: any) => e.tool_name)).toEqual(['commands.run', 'files.write']);
      expect(calls[0]).toMatchObject({ arguments: { cmd: 'echo seen-in-console', user: 'root' }, result: { exit_code: 0, stdout: 'seen-in-console\n' } });
      expect(calls[1]).toMatchObject({ arguments: { path: '/tmp/c.txt' }, result: { bytes: 1 } });
      expect(t.events[t.events.length - 1].kind).toBe('end');
      expect(t.cost).toMatchObject({ wall_s: expect.any(Number) });
    });

    it('is killed at its timeout, and lives on when its timeout is set later', async () => {
      const short = await Sandbox.create(TEMPLATE, { timeoutMs: 3000 });
      const extended = await Sandbox.create(TEMPLATE, { timeoutMs: 3000 });
      await extended.setTimeout(120_000);
      await waitFor(async () => !(await short.isRunning()), 20_000, 'the short sandbox is killed at its timeout');
      await waitFor(() => sandboxContainers(short.sandboxId).length === 0, 20_000, "the short sandbox's container is removed");
      expect(await extended.isRunning()).toBe(true);
      expect((await extended.commands.run('echo alive')).stdout).toBe('alive\n');
      const info = await extended.getInfo();
      expect(info.endAt.getTime() - Date.now()).toBeGreaterThan(60_000);
      await extended.kill();
    });

    it('is paused (the engine freezes it, calls are refused) and resumed by connect, its files and processes kept', async () => {
      const sb = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000 });
      try {
        await sb.files.write('/tmp/kept.txt', 'kept');
        await sb.commands.run('sleep 600', { background: true, user: 'root', timeoutMs: 0 });
        expect(await sb.pause()).toBe(true);
        expect((await sb.getInfo()).state).toBe('paused');
        expect(await sb.pause()).toBe(false);
        const refused = await sb.commands.run('true', { requestTimeoutMs: 10_000 }).catch((e: unknown) => e);
        expect(refused).toBeInstanceOf(Error);
        const again = await Sandbox.connect(sb.sandboxId, { timeoutMs: 120_000 });
        expect((await again.getInfo()).state).toBe('running');
        expect(await again.files.read('/tmp/kept.txt')).toBe('kept');
        expect((await again.commands.list()).map((p) => p.args.join(' '))).toContain('-l -c sleep 600');
      } finally {
        await sb.kill();
      }
    });
  });

  it("grades as slime's evaluate does: the agent's diff from one sandbox, applied with git apply in a second, clean sandbox of the same image, its tests run, the reward read", async () => {
    const work = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000 });
    let diff: string;
    try {
      await work.commands.run('useradd -m -s /bin/bash agent && chown -R agent:agent /workspace && git config --system --add safe.directory "*"', {
        user: 'root',
      });
      await work.files.write('/workspace/calc.py', 'def add(a, b):\n    return a + b\n', { user: 'agent' });
      await work.files.write('/workspace/PROBLEM_STATEMENT.md', 'fix add\n', { user: 'agent' });
      diff = (await work.commands.run("cd /workspace && git add -N . && git diff -- . ':(exclude)PROBLEM_STATEMENT.md'", { user: 'agent', timeoutMs: 120_000 }))
        .stdout;
      expect(diff).toContain('+    return a + b');
    } finally {
      await work.kill();
    }
    const grade = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000 });
    try {
      // clean: the first sandbox's work is nowhere here
      expect((await grade.commands.run('cd /workspace && git status --porcelain && cat calc.py', { user: 'root' })).stdout).toBe(
        'def add(a, b):\n    return a - b\n',
      );
      await grade.files.write('/workspace/__patch__.diff', diff, { user: 'root' });
      await grade.commands.run('cd /workspace && git apply --whitespace=nowarn __patch__.diff', { user: 'root' });
      const tests = await grade.commands.run('cd /workspace && bash test_calc.sh', { user: 'root', timeoutMs: 120_000 });
      const reward = Number(/REWARD=(\d+)/.exec(tests.stdout)?.[1]);
      expect(reward).toBe(1);
    } finally {
      await grade.kill();
    }
  });

  it("a task id names its task's env (each imported Harbor task's env is a template)", async () => {
    const sb = await Sandbox.create('fix-add');
    try {
      expect((await sb.getInfo()).templateId).toBe('fix-add');
      expect((await sb.commands.run('cat /workspace/calc.py', { user: 'root' })).stdout).toContain('def add');
    } finally {
      await sb.kill();
    }
  });

  describe("a sandbox of an image named by its metadata (slime's routing)", () => {
    it('runs the image when --e2b-images allows it', async () => {
      const sb = await Sandbox.create({ metadata: { image: LOCAL_DEBIAN_IMAGE, size: 'md' }, timeoutMs: 120_000 });
      try {
        expect((await sb.getInfo()).templateId).toBe('base');
        expect((await sb.commands.run('test -f /etc/debian_version && echo debian', { user: 'root' })).stdout).toBe('debian\n');
      } finally {
        await sb.kill();
      }
    });

    it('refuses an image no pattern allows, naming the option; tries to pull an allowed image the engine lacks, and says why it could not', async () => {
      await expect(Sandbox.create({ metadata: { image: 'busybox:latest' } })).rejects.toThrow(
        /busybox:latest does not exist among the images this server may run.*--e2b-images/,
      );
      await expect(Sandbox.create({ metadata: { image: 'openenv-local/missing-image:1' } })).rejects.toThrow(
        /openenv-local\/missing-image:1 could not be pulled/,
      );
    });
  });

  describe('what is refused', () => {
    it('a wrong API key, a wrong access token, and another sandbox id with its token', async () => {
      await expect(Sandbox.create(TEMPLATE, { apiKey: `e2b_${'0'.repeat(40)}` })).rejects.toThrow(/Unauthorized|not this server's token/);
      const a = await Sandbox.create(TEMPLATE);
      const b = await Sandbox.create(TEMPLATE);
      try {
        const envd = process.env.E2B_SANDBOX_URL!;
        const call = (id: string, token: string) =>
          fetch(`${envd}/process.Process/List`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'e2b-sandbox-id': id, 'x-access-token': token },
            body: '{}',
          });
        const tokenOf = async (id: string) =>
          (
            (await (await fetch(`${process.env.E2B_API_URL}/sandboxes/${id}`, { headers: { 'x-api-key': server.token } })).json()) as {
              envdAccessToken: string;
            }
          ).envdAccessToken;
        const ta = await tokenOf(a.sandboxId);
        const tb = await tokenOf(b.sandboxId);
        expect((await call(a.sandboxId, ta)).status).toBe(200);
        expect((await call(a.sandboxId, 'x'.repeat(48))).status).toBe(401);
        expect((await call(a.sandboxId, tb)).status).toBe(401);
        expect((await call('no-such-sandbox-00000', ta)).status).toBe(502);
        // the sandbox side never takes the server's own token for a sandbox's
        expect((await call(b.sandboxId, server.token)).status).toBe(401);
      } finally {
        await a.kill();
        await b.kill();
      }
    });

    it('what E2B serves and this server does not, by name, in E2B error shape', async () => {
      const res = await fetch(`${process.env.E2B_API_URL}/templates`, { headers: { 'x-api-key': server.token } });
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({ code: 404, message: expect.stringMatching(/GET \/e2b\/templates does not exist/) });
      await expect(Sandbox.create(TEMPLATE, { mcp: { exa: { apiKey: 'x' } } } as never)).rejects.toThrow(/mcp does not exist on this server/);
      await expect(Sandbox.create('no-such-template')).rejects.toThrow(/template "no-such-template" does not exist/);
      await expect(Sandbox.create(TEMPLATE, { timeoutMs: 10 * 3600_000 })).rejects.toThrow(/--episode-timeout/);
    });
  });

  it('reports the timeout error of a command the SDK itself gave up on', async () => {
    const sb = await Sandbox.create(TEMPLATE);
    try {
      const e = await sb.commands.run('sleep 20', { timeoutMs: 1000 }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(TimeoutError);
    } finally {
      await sb.kill();
    }
  });
});
