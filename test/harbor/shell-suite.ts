/**
 * The built-in shell toolset on real containers (made with the shell env's create options on a
 * network of the test's own), under a runtime the caller names (shell.docker.test.ts: runc;
 * shell-gvisor.docker.test.ts: runsc): one persistent shell per episode, calls killed at their
 * timeout with what they started, output bounded, files read and written byte for byte through
 * the toolbox as the shell's user, a dead shell replaced and the model told, and an image whose own
 * command would exit kept up by the toolbox's keeper.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import type { EnvRuntime } from '../../src/sandbox/sandbox.js';
import { ShellToolset, type ShellToolOutcome, type ShellToolReply } from '../../src/tools/shell/index.js';
import { runToEnd } from '../../src/container/index.js';
import { keeperCommand } from '../../src/sandbox/toolbox.js';
import { describeDocker, LOCAL_PYTHON_IMAGE, waitFor } from '../support/docker.js';
import { SHELL_TEST_LABEL, startShellContainer } from '../support/shell-container.js';
import { EnvSecuritySchema } from '../../src/sandbox/lockdown.js';
import { LOCAL_DEBIAN_IMAGE, ensureDebianBase, shellBox } from './helpers.js';

function reply(o: ShellToolOutcome): ShellToolReply {
  if (o.kind !== 'reply') throw new Error(`expected a reply, got ${o.kind}: ${o.message}`);
  return o.reply;
}

export function describeShellToolset(runtime: EnvRuntime): void {
  describeDocker(`the shell toolset in a container (${runtime})`, () => {
    const held = shellBox(runtime);
    const bash = async (command: string, timeout_s?: number) => reply(await held.shell.call('bash', { command, ...(timeout_s ? { timeout_s } : {}) }));
    /**
     * the shell's reply counting the processes whose command line matches `pattern`; a process
     * that ends between the glob and the read (this loop's own) is not counted, and says nothing
     */
    const countRunning = (pattern: string) =>
      bash(`for p in /proc/[0-9]*; do { tr '\\0' ' ' < $p/cmdline; } 2>/dev/null; echo; done | grep -c '${pattern}' || true`);

    it("keeps an image up whose own command would exit at once (the Debian base runs bash with no input): the toolbox's keeper is its process 1", async () => {
      const info = await held.box.docker.getContainer(held.box.id).inspect();
      expect(info.State.Running).toBe(true);
      expect(info.HostConfig.Init).toBe(false);
      expect(info.Config.Cmd).toEqual(keeperCommand(held.box.exec.toolbox!));
      const r = await bash('echo ready; pwd');
      expect(r.text).toBe('ready\n/app\n[exit code 0]');
    });

    it('carries the working directory and exported variables over between calls, as a terminal does', async () => {
      await bash('mkdir -p /tmp/work/deeper && cd /tmp/work && export GREETING="hello world" MULTI="line one\nline two"');
      await bash('cd deeper; export LEVEL=2; PLAIN=not-exported');
      const r = await bash('pwd; echo "$GREETING|$LEVEL|${PLAIN:-unset}"; printf "%s\\n" "$MULTI"');
      expect(r.text).toBe('/tmp/work/deeper\nhello world|2|unset\nline one\nline two\n[exit code 0]');
      expect(r.result).toMatchObject({ exit_code: 0, cwd: '/tmp/work/deeper', timed_out: false });
      // unset and exit carry over too; exit ends the command, not the shell
      await bash('unset LEVEL; cd /; exit 7').then((x) => expect(x.text).toBe('[exit code 7]'));
      expect((await bash('echo "[${LEVEL:-gone}]"; pwd')).text).toBe('[gone]\n/\n[exit code 0]');
    });

    it('returns stdout and stderr together, the exit code, invalid UTF-8 replaced, and a syntax error as the shell says it', async () => {
      expect((await bash('echo out; echo err >&2; printf "\\xff\\xfe caf\\xc3\\xa9"; exit 3')).text).toBe('out\nerr\n\uFFFD\uFFFD café\n[exit code 3]');
      const broken = await bash('echo "unclosed');
      expect(broken.text).toMatch(/unexpected EOF while looking for matching/);
      expect(broken.result.exit_code).toBe(2);
      // the shell reads the next command normally: no quote or newline of a command confuses it
      expect((await bash("echo 'next'")).text).toBe('next\n[exit code 0]');
      // a command that reads stdin gets an empty one instead of the shell's own input
      expect((await bash('cat; echo after-cat')).text).toBe('after-cat\n[exit code 0]');
    });

    it('kills a call at its timeout with every process it started, says so as the tool error, and the episode goes on', async () => {
      const started = Date.now();
      const r = await bash('echo before; (sleep 300; echo orphan) & sleep 301 & sleep 302; echo never', 1);
      expect(Date.now() - started).toBeLessThan(8000);
      expect(r.is_error).toBe(true);
      expect(r.text).toBe('before\n[timed out after 1 s: the command was killed, with every process it started]');
      expect(r.result).toMatchObject({ timed_out: true, exit_code: 137, shell_died: false });
      // nothing of it is left running
      expect((await countRunning('sleep 30[012]')).text).toBe('0\n[exit code 0]');
      // the shell goes on, with its state
      expect((await bash('echo still-here; pwd')).text).toBe('still-here\n/\n[exit code 0]');
    });

    it('stops the command in flight when told to (a time budget passed), says why, and the shell goes on', async () => {
      const running = held.shell.call('bash', {
        command: 'rm -f /tmp/int-started; (sleep 300; echo orphan) & touch /tmp/int-started; echo started; sleep 301',
      });
      await waitFor(async () => (await runToEnd(held.box.exec, { cmd: ['test', '-f', '/tmp/int-started'] })).exitCode === 0, 20_000, 'the command started');
      held.shell.interrupt("the task's time budget passed while it ran");
      const r = reply(await running);
      expect(r.is_error).toBe(true);
      expect(r.text).toBe("started\n[stopped: the task's time budget passed while it ran; the command was killed, with every process it started]");
      expect(r.result).toMatchObject({ interrupted: true, timed_out: false, exit_code: 137, shell_died: false });
      expect((await countRunning('sleep 30[01]')).text).toBe('0\n[exit code 0]');
      // nothing in flight: nothing to stop
      held.shell.interrupt('nothing');
      expect((await bash('echo next')).text).toBe('next\n[exit code 0]');
    });

    it('leaves what a call started in the background running, and shows what it prints between calls with the next call', async () => {
      await bash('rm -f /tmp/bg-done; (sleep 0.2; echo from-the-background; touch /tmp/bg-done) &');
      // wait, outside the shell, until the background job has printed
      await waitFor(async () => (await runToEnd(held.box.exec, { cmd: ['test', '-f', '/tmp/bg-done'] })).exitCode === 0, 20_000, 'the background job printed');
      expect((await bash('echo now')).text).toBe('from-the-background\nnow\n[exit code 0]');
    });

    it('bounds 10 MB of output: the head and the tail kept, a mark with the bytes dropped', async () => {
      const r = await bash('head -c 10000000 /dev/zero | tr "\\0" "a"; echo; echo THE-END');
      const total = 10_000_000 + 1 + 8;
      expect(r.result.output_bytes).toBe(total);
      expect(r.result.dropped_bytes).toBe(total - 16 * 1024 * 2);
      expect(r.text.startsWith('a'.repeat(16 * 1024) + '\n[... ')).toBe(true);
      expect(r.text).toContain(`[... ${total - 32768} bytes dropped: the output was ${total} bytes; its first 16384 and last 16384 are shown ...]`);
      expect(r.text.endsWith('a\nTHE-END\n[exit code 0]')).toBe(true);
      expect(r.text.length).toBeLessThan(34 * 1024);
    });

    it('writes and reads back files byte for byte: text exactly, any binary as base64, in slices', async () => {
      const text = 'line one\r\nnon-ASCII: é ✓ 😀\n\ttabs and no final newline';
      const w = reply(await held.shell.call('write_file', { path: 'notes/new/dir/a.txt', content: text }));
      expect(w.text).toBe(`wrote ${Buffer.byteLength(text)} bytes to /notes/new/dir/a.txt, a new file`);
      expect(reply(await held.shell.call('read_file', { path: '/notes/new/dir/a.txt' })).text).toBe(text);
      // every byte value, made in the container, read back exactly
      await bash('cd /; for i in $(seq 0 255); do printf "\\\\$(printf %03o $i)"; done > /tmp/all-bytes.bin');
      const all = reply(await held.shell.call('read_file', { path: '/tmp/all-bytes.bin' }));
      expect(all.result).toMatchObject({ encoding: 'base64', size: 256, next_offset: null });
      expect(Buffer.from(all.text.split('\n')[1]!, 'base64')).toEqual(Buffer.from(Array.from({ length: 256 }, (_, i) => i)));
      // 300 KiB of random bytes put in through the archive API, read back in slices of 64 KiB
      const big = randomBytes(300 * 1024);
      const { singleFileTar } = await import('../../src/sandbox/container-exec.js');
      await held.box.exec.putArchive('/tmp', singleFileTar('big.bin', big, { mode: 0o644, uid: 0, gid: 0 }));
      const parts: Buffer[] = [];
      for (let offset: number | null = 0; offset !== null;) {
        const r = reply(await held.shell.call('read_file', { path: '/tmp/big.bin', offset, limit: 65536 }));
        parts.push(Buffer.from(r.text.split('\n')[1]!, 'base64'));
        offset = r.result.next_offset as number | null;
      }
      expect(Buffer.concat(parts).equals(big)).toBe(true);
      // overwriting keeps the file's permissions; the shell sees the exact bytes
      await bash('chmod 0751 /notes/new/dir/a.txt');
      reply(await held.shell.call('write_file', { path: '/notes/new/dir/a.txt', content: 'é\n\0end' }));
      expect((await bash('find /notes/new/dir/a.txt -printf "%m\\n"; od -An -tx1 /notes/new/dir/a.txt | xargs')).text).toBe(
        '751\nc3 a9 0a 00 65 6e 64\n[exit code 0]',
      );
    });

    it('reads a long text in slices that never cut a character, and follows symbolic links', async () => {
      await bash('python3 -c "import sys; sys.stdout.write(\'é\' * 40000)" > /tmp/accents.txt; ln -sf /tmp/accents.txt /tmp/link.txt');
      const first = reply(await held.shell.call('read_file', { path: '/tmp/link.txt', limit: 65535 }));
      expect(first.result).toMatchObject({ encoding: 'utf-8', size: 80000, bytes: 65534, next_offset: 65534 });
      expect(first.text).toBe(`${'é'.repeat(32767)}\n[read_file: bytes 0–65534 of 80000; read on with offset=65534]`);
      const rest = reply(await held.shell.call('read_file', { path: '/tmp/link.txt', offset: 65534 }));
      expect(rest.text).toBe(`${'é'.repeat(40000 - 32767)}\n[read_file: bytes 65534–80000 of 80000]`);
    });

    it("reaches a read-only root's /tmp (the env's own tmpfs, which the archive API cannot see) through the toolbox, byte for byte, links into it too", async () => {
      const security = EnvSecuritySchema.parse({ root: 'read-only', tmp_mb: 16 });
      const box = await startShellContainer(LOCAL_DEBIAN_IMAGE, { workdir: '/tmp', runtime, security });
      const shell = new ShellToolset(box.exec, { workdir: '/tmp' });
      const sh = async (command: string) => reply(await shell.call('bash', { command })).text;
      try {
        // it is a tmpfs on a read-only root, and the archive API does not see what the shell writes there
        expect(await sh('touch /app-x 2>&1 | grep -c "Read-only" ; grep -c " /tmp tmpfs " /proc/mounts')).toBe('1\n1\n[exit code 0]');
        await sh('printf "from bash\\n" > /tmp/by-bash.txt; mkdir -p /tmp/d; ln -sf /tmp/by-bash.txt /tmp/link.txt');
        expect(await box.exec.stat('/tmp/by-bash.txt')).toBeNull();

        expect(reply(await shell.call('read_file', { path: 'by-bash.txt' }))).toMatchObject({ is_error: false, text: 'from bash\n' });
        expect(reply(await shell.call('read_file', { path: '/tmp/link.txt' })).text).toBe('from bash\n');
        // a file the tools write, bash reads, in folders they make, with the shell's user's ownership
        const text = 'line one\r\nnon-ASCII: é ✓ 😀\n\tno final newline';
        const w = reply(await shell.call('write_file', { path: '/tmp/new/deeper/a.txt', content: text }));
        expect(w).toMatchObject({ is_error: false, result: { bytes: Buffer.byteLength(text), created: true } });
        expect(await sh('base64 -w0 /tmp/new/deeper/a.txt; echo; stat -c %u /tmp/new/deeper/a.txt 2>/dev/null || id -u')).toBe(
          `${Buffer.from(text).toString('base64')}\n${await sh('id -u').then((t) => t.split('\n')[0])}\n[exit code 0]`,
        );
        expect(reply(await shell.call('read_file', { path: '/tmp/new/deeper/a.txt' })).text).toBe(text);
        // binary (a slice of 0xff bytes, each of which looks like the start of a 4-byte character:
        // binary is not cut short to a character boundary), and an overwrite through a link keeps
        // the link and changes its target
        await sh(
          "{ head -c 100 /dev/zero | tr '\\0' a; head -c 200 /dev/zero | tr '\\0' '\\377'; } > /tmp/bin; printf 'old' > /tmp/target; ln -sf /tmp/target /tmp/via",
        );
        const bin = Buffer.from((await sh('base64 -w0 /tmp/bin')).split('\n')[0]!, 'base64');
        const b = reply(await shell.call('read_file', { path: '/tmp/bin', offset: 100, limit: 50 }));
        expect(b.result).toMatchObject({ size: 300, offset: 100, bytes: 50, next_offset: 150 });
        expect(b.text.split('\n')[1]).toBe(bin.subarray(100, 150).toString('base64'));
        expect(reply(await shell.call('write_file', { path: '/tmp/via', content: 'new' })).result).toMatchObject({ created: false });
        expect(await sh('cat /tmp/target; [ -L /tmp/via ] && echo " still a link"')).toBe('new still a link\n[exit code 0]');
        // what is not a file says so, as elsewhere
        expect(reply(await shell.call('read_file', { path: '/tmp/nope' }))).toMatchObject({ is_error: true, text: 'no such file: /tmp/nope' });
        expect(reply(await shell.call('read_file', { path: '/tmp/d' }))).toMatchObject({
          is_error: true,
          text: '/tmp/d is a directory, not a file: list it with bash (ls -la /tmp/d)',
        });
        // elsewhere too, and the read-only root refuses a write as it refuses the shell's
        expect(reply(await shell.call('read_file', { path: '/etc/hostname' })).is_error).toBe(false);
        expect(reply(await shell.call('write_file', { path: '/etc/new.txt', content: 'x' }))).toMatchObject({
          is_error: true,
          text: expect.stringMatching(/^cannot write \/etc\/new.txt/),
        });
      } finally {
        await shell.close();
        await box.remove();
      }
    });

    it('answers a missing path, a directory and bad arguments clearly, the episode going on', async () => {
      expect(reply(await held.shell.call('read_file', { path: '/no/such/file' }))).toMatchObject({ is_error: true, text: 'no such file: /no/such/file' });
      expect(reply(await held.shell.call('read_file', { path: '/etc' }))).toMatchObject({
        is_error: true,
        text: '/etc is a directory, not a file: list it with bash (ls -la /etc)',
      });
      expect(reply(await held.shell.call('write_file', { path: '/tmp', content: 'x' }))).toMatchObject({
        is_error: true,
        text: '/tmp is a directory, not a file',
      });
      expect(await held.shell.call('bash', { command: '' })).toMatchObject({ kind: 'invalid_args' });
      expect(await held.shell.call('bash', { command: 'ls', timeout_s: 0 })).toMatchObject({ kind: 'invalid_args' });
      expect(await held.shell.call('bash', { command: 'ls', cwd: '/' })).toMatchObject({
        kind: 'invalid_args',
        message: 'unknown argument "cwd"; the arguments are command, timeout_s',
      });
      expect(await held.shell.call('read_file', { path: 'x', limit: 0 })).toMatchObject({ kind: 'invalid_args' });
      expect(await held.shell.call('write_file', { path: 'x' })).toMatchObject({ kind: 'invalid_args' });
      expect((await bash('echo fine')).text).toBe('fine\n[exit code 0]');
    });

    it("ends a shell whose control channel (fd 3) the command floods, at once, and starts a new one: the server's time is not the model's", async () => {
      const started = Date.now();
      const flooded = await bash('yes > /proc/$$/fd/3', 60);
      expect(Date.now() - started).toBeLessThan(20_000);
      expect(flooded.result).toMatchObject({ shell_died: true });
      const next = await bash('echo fine');
      expect(next.text).toMatch(
        /^\[a new shell was started: the previous shell had ended \(it was ended: something wrote more than \d+ bytes to its control channel \(fd 3\)\);[^\]]*\]\nfine\n\[exit code 0\]$/,
      );
    });

    it("starts afresh when the state the last command left breaks a new shell, and says so; a shell broken since it ran is the agent's doing", async () => {
      const box = await startShellContainer(LOCAL_DEBIAN_IMAGE, { workdir: '/app', runtime });
      const shell = new ShellToolset(box.exec, { workdir: '/app' });
      const run = async (command: string) => reply(await shell.call('bash', { command }));
      try {
        await run('cd /tmp && export KEPT=yes');
        // the state file poisoned after the job saved it: any shell that applies it exits at once
        await run('(sleep 1; echo "exit 3" >> /tmp/.openenv-shell-$EUID) >/dev/null 2>&1 & kill -9 $$');
        await new Promise((r) => setTimeout(r, 2000));
        const fresh = await run('pwd; echo "[${KEPT:-unset}]"');
        expect(fresh.text).toMatch(
          /^\[a new shell was started: the previous shell had ended \(.*\); the state the last completed command left broke it \(.*exited with code 3\)\), so this one starts afresh in the working directory, with none of the exported variables\]\n\/app\n\[unset\]\n\[exit code 0\]$/,
        );
        // bash gone after a shell ran: no new shell can start, and the error says a shell ran before
        await run('rm -f "$(command -v bash)"; kill -9 $$').catch(() => undefined);
        const { ShellStartError } = await import('../../src/tools/shell/index.js');
        const broken = await shell.call('bash', { command: 'echo hi' }).catch((e: unknown) => e);
        expect(broken).toBeInstanceOf(ShellStartError);
        expect((broken as InstanceType<typeof ShellStartError>).brokenAfterRunning).toBe(true);
      } finally {
        await shell.close();
        await box.remove();
      }
    });

    it('replaces a shell that died, tells the model, and restores the last completed state', async () => {
      await bash('cd /tmp/work && export KEPT=yes');
      const died = await bash('echo going; kill -9 $$');
      expect(died.is_error).toBe(true);
      expect(died.text).toMatch(/^going\n\[the shell exited while this command ran; the next call starts a new one/);
      expect(died.result).toMatchObject({ shell_died: true, exit_code: null });
      const next = await bash('pwd; echo "$KEPT"');
      expect(next.text).toMatch(
        /^\[a new shell was started: the previous shell had ended \(it exited with code 137, killed\); .*\]\n\/tmp\/work\nyes\n\[exit code 0\]$/,
      );
      expect(next.result.shell_restarted).toBe(true);
      expect((await bash('echo again')).result.shell_restarted).toBe(false);
    });
  });

  describeDocker(`the shell toolset and an image without a shell (${runtime})`, () => {
    it("a shell of a non-root user holds no capability of the container's: it cannot write root's folders (under gVisor the first process of an exec kept them)", async () => {
      ensureDebianBase();
      const box = await startShellContainer(LOCAL_DEBIAN_IMAGE, { runtime });
      const shell = new ShellToolset(box.exec, { workdir: '/tmp', user: '1000:1000' });
      try {
        const r = reply(
          await shell.call('bash', {
            command: 'id -u; grep CapEff /proc/$$/status; echo x > /usr/local/bin/planted || echo refused; echo y > /etc/ld.so.preload || echo refused',
          }),
        );
        expect(r.text).toMatch(/^1000\nCapEff:\t0000000000000000\n(.|\n)*refused\n(.|\n)*refused\n\[exit code 0\]$/);
        const probe = await runToEnd(box.exec, { cmd: ['ls', '/usr/local/bin/planted', '/etc/ld.so.preload'] });
        expect(probe.exitCode).not.toBe(0);
        // a program not on PATH is said as such
        const missing = await runToEnd(box.exec, { cmd: ['no-such-program'], user: '1000:1000' });
        expect([missing.exitCode, missing.output.text]).toEqual([127, 'no-such-program: not found on PATH\n']);
      } finally {
        await shell.close();
        await box.remove();
      }
    });

    it("fails clearly: the container stays up (its keeper is the toolbox's), and the shell cannot start, saying it needs bash", async () => {
      const box = await startShellContainer(LOCAL_PYTHON_IMAGE, { runtime });
      try {
        await new Promise((r) => setTimeout(r, 500));
        expect((await box.docker.getContainer(box.id).inspect()).State.Running).toBe(true);
        const shell = new ShellToolset(box.exec);
        await expect(shell.call('bash', { command: 'echo hi' })).rejects.toThrow(/could not start.*need bash/);
      } finally {
        await box.remove();
      }
      expect(execFileSync('docker', ['ps', '-aq', '--filter', `label=${SHELL_TEST_LABEL}`], { encoding: 'utf8' }).trim()).toBe('');
    });
  });
}
