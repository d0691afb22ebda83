/**
 * The in-place verifier's toolchain check (src/verifier/toolchain.ts), on the engine's change lists
 * as it writes them: what tampers with what test.sh runs, what does not (the agent's work, Python's
 * bytecode caches, a folder listed because of what changed in it, the server's own paths), and what
 * a task adds or allows.
 */
import { describe, expect, it } from 'vitest';
import type { FileChange } from '../../src/sandbox/container-exec.js';
import { protectedPaths, rootAdditions, tamperedPaths } from '../../src/verifier/toolchain.js';

const added = (path: string): FileChange => ({ path, kind: 'added' });
const modified = (path: string): FileChange => ({ path, kind: 'modified' });
const deleted = (path: string): FileChange => ({ path, kind: 'deleted' });

const scope = {
  pathVar: '/root/.local/bin:/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/app/bin',
  home: '/root',
  workdir: '/app',
  server: ['/tests', '/logs', '/.openenv-toolbox-0123456789ab'],
};

describe('the toolchain check', () => {
  it('covers the system, the loader, users, Python in /etc, schedules, PATH (a venv, ~/.local) and the home: not the workdir on PATH', () => {
    const p = protectedPaths(scope);
    for (const x of ['/usr', '/bin', '/lib64', '/etc/ld.so.preload', '/etc/passwd', '/var/spool/cron', '/root/.local', '/opt/venv', '/usr/local']) {
      expect(p).toContain(x);
    }
    expect(p).not.toContain('/app');
    expect(p).not.toContain('/app/bin');
    expect(p).not.toContain('/');
  });

  it.each([
    ['a bash planted on PATH', [modified('/usr'), modified('/usr/local'), modified('/usr/local/bin'), added('/usr/local/bin/bash')], ['/usr/local/bin/bash']],
    ['python3 replaced', [modified('/usr/bin'), modified('/usr/bin/python3.11')], ['/usr/bin/python3.11']],
    ['mkdir deleted', [modified('/usr/bin'), deleted('/usr/bin/mkdir')], ['/usr/bin/mkdir']],
    ['/etc/ld.so.preload', [modified('/etc'), added('/etc/ld.so.preload')], ['/etc/ld.so.preload']],
    [
      'awk pointed elsewhere through /etc/alternatives',
      [modified('/etc'), modified('/etc/alternatives'), modified('/etc/alternatives/awk')],
      ['/etc/alternatives/awk'],
    ],
    ["perl's sitecustomize", [modified('/etc'), added('/etc/perl'), added('/etc/perl/sitecustomize.pl')], ['/etc/perl/sitecustomize.pl']],
    [
      "Debian's sitecustomize",
      [modified('/etc'), modified('/etc/python3.11'), modified('/etc/python3.11/sitecustomize.py')],
      ['/etc/python3.11/sitecustomize.py'],
    ],
    [
      'a user site hook',
      [added('/root/.local'), added('/root/.local/lib'), added('/root/.local/lib/python3.11/site-packages/usercustomize.py')],
      ['/root/.local/lib/python3.11/site-packages/usercustomize.py'],
    ],
    [
      'a venv package',
      [modified('/opt/venv/lib/python3.11/site-packages'), added('/opt/venv/lib/python3.11/site-packages/evil.pth')],
      ['/opt/venv/lib/python3.11/site-packages/evil.pth'],
    ],
    ['a crontab', [added('/var/spool/cron/crontabs/root')], ['/var/spool/cron/crontabs/root']],
    ['a chmod of a folder on PATH (listed with nothing in it)', [modified('/usr/local/bin')], ['/usr/local/bin']],
  ])('refuses %s', (_what, changes, expected) => {
    expect(tamperedPaths(changes, scope)).toEqual(expected);
  });

  it("leaves the agent's work, Python's bytecode caches, the server's paths and folders changed only by what is in them", () => {
    const changes = [
      modified('/app'),
      added('/app/solution.py'),
      modified('/app/bin'),
      added('/app/bin/tool'),
      modified('/tmp'),
      added('/tmp/.openenv-shell-0'),
      modified('/usr/lib/python3.11/collections'),
      added('/usr/lib/python3.11/collections/__pycache__'),
      added('/usr/lib/python3.11/collections/__pycache__/abc.cpython-311.pyc'),
      added('/tests'),
      added('/tests/test.sh'),
      modified('/logs'),
      added('/logs/verifier/reward.txt'),
      added('/.openenv-toolbox-0123456789ab'),
      modified('/root'),
      added('/root/.bash_history'),
    ];
    expect(tamperedPaths(changes, scope)).toEqual([]);
  });

  it('refuses a file (not a folder) added at the root, where tests in /tests find a conftest.py or pytest.ini', () => {
    const changes = [added('/conftest.py'), added('/pytest.ini'), added('/output'), added('/output/result.txt')];
    expect(rootAdditions(changes)).toEqual(['/conftest.py', '/pytest.ini', '/output']);
    expect(tamperedPaths(changes, scope, new Set(['/conftest.py', '/pytest.ini']))).toEqual(['/conftest.py', '/pytest.ini']);
  });

  it("takes the task's additions and what it allows", () => {
    const pip = [modified('/usr/local/lib/python3.11/site-packages'), added('/usr/local/lib/python3.11/site-packages/requests/__init__.py')];
    expect(tamperedPaths(pip, scope)).toEqual(['/usr/local/lib/python3.11/site-packages/requests/__init__.py']);
    expect(tamperedPaths(pip, { ...scope, allow: ['/usr/local/lib/python3.11/site-packages'] })).toEqual([]);
    expect(tamperedPaths([added('/opt/conda/bin/python')], scope)).toEqual([]);
    expect(tamperedPaths([added('/opt/conda/bin/python')], { ...scope, protect: ['/opt/conda'] })).toEqual(['/opt/conda/bin/python']);
  });
});
