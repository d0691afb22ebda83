/**
 * E2B sandboxes under gVisor (--runtime runsc, registered by deploy/register-runsc.sh as CI does):
 * the guest kernel is gVisor's, and what the file transfer puts through the engine's archive API
 * is seen inside, and what the sandbox's processes write is read out, both ways, /tmp included.
 */
import { expect, it } from 'vitest';
import { Sandbox } from 'e2b';
import { describeDocker } from '../support/docker.js';
import { e2bSuiteServer, TEMPLATE } from './helpers.js';

describeDocker('E2B sandboxes under gVisor', () => {
  e2bSuiteServer(['--runtime', 'runsc']);

  it("runs commands in gVisor's kernel, and files cross both ways", async () => {
    const sb = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000 });
    try {
      expect((await sb.commands.run('uname -r', { user: 'root' })).stdout).toBe('4.4.0\n');
      await sb.commands.run('useradd -m agent', { user: 'root' });
      await sb.files.write('/tmp/in.txt', 'from the SDK', { user: 'agent' });
      await sb.files.write('/workspace/in.txt', 'into the workspace', { user: 'agent' });
      // (coreutils' stat and ls call statx, which this gVisor refuses: python's os.stat does not)
      const owner = `python3 -c "import os, pwd; print(pwd.getpwuid(os.stat('/tmp/in.txt').st_uid).pw_name)"`;
      expect((await sb.commands.run(`cat /tmp/in.txt; echo; cat /workspace/in.txt; echo; ${owner}`, { user: 'agent' })).stdout).toBe(
        'from the SDK\ninto the workspace\nagent\n',
      );
      await sb.commands.run('printf from-inside > /tmp/out.txt; printf also > /workspace/out.txt', { user: 'root' });
      expect(await sb.files.read('/tmp/out.txt')).toBe('from-inside');
      expect(await sb.files.read('/workspace/out.txt')).toBe('also');
      // the filesystem service's toolbox under gVisor
      expect((await sb.files.list('/workspace')).map((e) => e.name)).toEqual(expect.arrayContaining(['in.txt', 'out.txt', 'calc.py']));
      expect(await sb.files.getInfo('/tmp/in.txt')).toMatchObject({ size: 12, owner: 'agent', type: 'file' });
    } finally {
      await sb.kill();
    }
  });
});
