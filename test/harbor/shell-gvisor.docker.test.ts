/**
 * The shell toolset's suite (shell-suite.ts) under gVisor (the engine's `runsc`, registered by
 * deploy/register-runsc.sh, as CI does), and what gVisor changes that the sandbox undoes: its own
 * tmpfs at /tmp, which the engine's archive API (the file tools, a verifier's copies) cannot see.
 */
import { expect, it } from 'vitest';
import { GVISOR_TMP_KEEPER } from '../../src/sandbox/docker/containers.js';
import { ShellToolset } from '../../src/tools/shell/index.js';
import { describeDocker } from '../support/docker.js';
import { startShellContainer } from '../support/shell-container.js';
import { ensureDebianBase, LOCAL_DEBIAN_IMAGE } from './helpers.js';
import { describeShellToolset } from './shell-suite.js';

describeShellToolset('runsc');

describeDocker('a shell env under gVisor', () => {
  it("keeps /tmp on the container's layer, where the file tools and the engine see what the shell writes", async () => {
    ensureDebianBase();
    const box = await startShellContainer(LOCAL_DEBIAN_IMAGE, { runtime: 'runsc' });
    const shell = new ShellToolset(box.exec);
    try {
      const said = async (command: string) => {
        const o = await shell.call('bash', { command });
        if (o.kind !== 'reply') throw new Error(o.message);
        return o.reply.text;
      };
      expect(await said('uname -r')).toBe('4.4.0\n[exit code 0]');
      // gVisor mounts its own tmpfs only on an empty /tmp: the keeper is there, and /tmp is no mount
      expect(await said(`cat /${GVISOR_TMP_KEEPER.path}; grep -c ' /tmp ' /proc/mounts || true`)).toBe(`${GVISOR_TMP_KEEPER.text}0\n[exit code 0]`);
      await said('printf from-the-shell > /tmp/out.txt');
      const read = await shell.call('read_file', { path: '/tmp/out.txt' });
      expect(read.kind === 'reply' && read.reply.text).toBe('from-the-shell');
      expect(await shell.call('write_file', { path: '/tmp/in.txt', content: 'from-the-tool' })).toMatchObject({ kind: 'reply' });
      expect(await said('cat /tmp/in.txt')).toBe('from-the-tool\n[exit code 0]');
    } finally {
      await shell.close();
      await box.remove();
    }
  });
});
