/**
 * Stopping the agent on real containers, under runc and gVisor: every way a process of the agent's
 * tries to survive the stop is killed (a loop whose pid keeps moving, setsid, nohup, a double
 * fork, a process that ignores SIGTERM, 64 at once, a process in a new pid namespace where the
 * lock-down lets one be made), with the image's `sh`, `cat` and `kill` replaced by the agent's;
 * what the image ran before the agent (a service of its own) goes on; the env's process 1 is out
 * of the agent's reach (`kill -9 -1`, signals to 1).
 */
import { expect, it } from 'vitest';
import { AgentIntervals, containerClock, runTrusted, stopAgentProcesses } from '../../src/container/index.js';
import type { EnvRuntime } from '../../src/sandbox/sandbox.js';
import { ShellToolset } from '../../src/tools/shell/index.js';
import { describeDocker } from '../support/docker.js';
import { startShellContainer, type ShellContainer } from '../support/shell-container.js';
import { LOCAL_DEBIAN_IMAGE, ensureDebianBase } from '../harbor/helpers.js';

/**
 * the processes of the container but process 1 and the toolbox's own, as `pid ppid session comm`
 * lines (through the toolbox; builtins only: a listing that forked would list its own children)
 */
async function processes(box: ShellContainer): Promise<{ pid: number; ppid: number; sid: number; comm: string }[]> {
  const r = await runTrusted(
    box.exec,
    'openenv-test-ps',
    'for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = 1 ] || [ "$p" = $$ ] && continue; read -r l < $d/stat 2>/dev/null || continue; read -r c < $d/comm 2>/dev/null || continue; r=${l##*) }; set -- $r; [ "$1" = Z ] || echo "$p $2 $4 $c"; done',
  );
  return r.stdout
    .toString()
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [pid, ppid, sid, ...comm] = l.split(' ');
      return { pid: Number(pid), ppid: Number(ppid), sid: Number(sid), comm: comm.join(' ') };
    });
}

async function bash(shell: ShellToolset, command: string, timeout_s = 60): Promise<string> {
  const o = await shell.call('bash', { command, timeout_s });
  if (o.kind !== 'reply') throw new Error(o.message);
  return o.reply.text;
}

/**
 * The agent's attacks, as its commands: each leaves processes that try to outlive the stop. Every
 * one writes a line to /tmp/alive every 50 ms, so that one left running would show.
 */
const ATTACKS: Record<string, string> = {
  'a loop whose pid keeps moving (fork, the parent exits)':
    'perl -e \'while (1) { exit if fork; open(my $f, ">>", "/tmp/alive"); print $f "hop\\n"; close $f; select(undef, undef, undef, 0.05) }\' >/dev/null 2>&1 &',
  'setsid, nohup and a double fork':
    "setsid bash -c 'while :; do echo s >> /tmp/alive; sleep 0.05; done' >/dev/null 2>&1 < /dev/null & nohup bash -c 'while :; do echo n >> /tmp/alive; sleep 0.05; done' >/dev/null 2>&1 & (bash -c 'while :; do echo d >> /tmp/alive; sleep 0.05; done' >/dev/null 2>&1 &) ",
  'a process that ignores SIGTERM, SIGINT and SIGHUP': 'bash -c \'trap "" TERM INT HUP; while :; do echo t >> /tmp/alive; sleep 0.05; done\' >/dev/null 2>&1 &',
  '64 of them at once': "for i in $(seq 64); do bash -c 'while :; do echo m >> /tmp/alive; sleep 0.05; done' >/dev/null 2>&1 & done",
  // the lock-down refuses the namespace (no SYS_ADMIN, the engine's seccomp profile: see the test below); the loop runs either way
  'a process in a new pid namespace (where the lock-down lets one be made)':
    'loop=\'while :; do echo u >> /tmp/alive; sleep 0.05; done\'; (unshare -p -f bash -c "$loop" || unshare -U -r -p -f bash -c "$loop" || { echo \'namespace refused\' >&2; bash -c "$loop"; }) >/dev/null 2>/tmp/unshare.err & sleep 0.3',
};

function describeStop(runtime: EnvRuntime): void {
  describeDocker(`stopping the agent (${runtime})`, () => {
    it.each(Object.entries(ATTACKS))("kills the agent's processes, whatever they do, with the image's sh, cat and kill replaced: %s", async (what, attack) => {
      ensureDebianBase();
      // under gVisor (Debian's runsc, ptrace platform) 64 loops forking at once take the sandbox past
      // any host-thread budget sized per process (docs/security.md): that case gets room, the stop is what is tested here
      const pids = runtime === 'runsc' && what.startsWith('64') ? 4096 : 512;
      const box = await startShellContainer(LOCAL_DEBIAN_IMAGE, { workdir: '/app', runtime, pids });
      const shell = new ShellToolset(box.exec, { workdir: '/app', user: '0:0' });
      try {
        // the image runs a service of its own before the agent's part: it must go on after the stop
        const service = await runTrusted(
          box.exec,
          'openenv-test-service',
          '"$1" setsid "$1" sh -c "while :; do echo svc > /tmp/service; sleep 0.05; done" </dev/null >/dev/null 2>&1 & echo $!',
          [box.exec.toolbox!],
        );
        expect(service.exitCode).toBe(0);
        // setsid made it a session of its own, which its sleeps share
        const serviceSession = Number(service.stdout.toString().trim());
        const size = async (f: string) => Number((await runTrusted(box.exec, 'size', 'stat -c %s "$1" 2>/dev/null || echo 0', [f])).stdout.toString().trim());
        // the service runs before the agent's part begins, as an image's does: on a loaded machine the
        // background start could otherwise come after the clock's mark, and be counted the agent's
        for (const deadline = Date.now() + 20_000; (await size('/tmp/service')) === 0 && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 50));
        expect(await size('/tmp/service'), 'the service never wrote /tmp/service').toBeGreaterThan(0);
        const intervals = new AgentIntervals();
        intervals.begin(await containerClock(box.exec));
        // the agent replaces what a server would run from the image, then attacks
        await bash(shell, 'for b in sh cat kill ps; do p=$(command -v $b); printf "#!/bin/bash\\necho fooled\\n" > $p; done; echo replaced');
        expect(await bash(shell, `${attack}\nsleep 1000 >/dev/null 2>&1 &`)).toMatch(/\[exit code 0\]$/);
        // the attack is under way: its processes write
        // (polled, not one fixed wait: under gVisor on a loaded machine 64 loops starting at once can
        // take more than a second before the first of them writes)
        const started = await size('/tmp/alive');
        let grew = started;
        for (const deadline = Date.now() + 20_000; grew <= started && Date.now() < deadline;) {
          await new Promise((r) => setTimeout(r, 100));
          grew = await size('/tmp/alive');
        }
        expect(grew, 'the attack never wrote /tmp/alive').toBeGreaterThan(started);
        await shell.close();
        const stopped = await stopAgentProcesses(box.exec, intervals);
        const listing = async () => JSON.stringify(await processes(box));
        expect(stopped.left, `${JSON.stringify(stopped)} ${await listing()}`).toBe(0);
        expect(stopped.killed, `${JSON.stringify(stopped)} ${await listing()}`).toBeGreaterThan(0);
        // nothing of the agent's writes any more; the image's service still does
        const before = await size('/tmp/alive');
        await runTrusted(box.exec, 'truncate', ': > /tmp/service');
        await new Promise((r) => setTimeout(r, 500));
        expect(await size('/tmp/alive')).toBe(before);
        expect(await size('/tmp/service')).toBeGreaterThan(0);
        // the keeper's sleep (its child) and the image's service (its session): nothing of the agent's
        const left = (await processes(box)).filter((p) => p.ppid !== 1 && p.sid !== serviceSession);
        expect(left).toEqual([]);
      } finally {
        await shell.close();
        await box.remove();
      }
    });

    it('a new pid namespace: refused under runc (no SYS_ADMIN, no user namespace); under gVisor one in a user namespace is made, and the attack above ran in it', async () => {
      ensureDebianBase();
      const box = await startShellContainer(LOCAL_DEBIAN_IMAGE, { workdir: '/app', runtime });
      const shell = new ShellToolset(box.exec, { workdir: '/app', user: '0:0' });
      try {
        const said = await bash(
          shell,
          'unshare -p -f true 2>/dev/null && echo pid-ns made; unshare -U -r -p -f true 2>/dev/null && echo user-ns made; echo tried',
        );
        expect(said).toBe(runtime === 'runc' ? 'tried\n[exit code 0]' : 'user-ns made\ntried\n[exit code 0]');
      } finally {
        await shell.close();
        await box.remove();
      }
    });

    it("keeps the env up whatever the agent signals: kill -9 -1 ends the agent's own shell, process 1 takes no signal it can ignore", async () => {
      ensureDebianBase();
      const box = await startShellContainer(LOCAL_DEBIAN_IMAGE, { workdir: '/app', runtime });
      const shell = new ShellToolset(box.exec, { workdir: '/app', user: '0:0' });
      try {
        const died = await shell.call('bash', { command: 'kill -TERM 1; kill -INT 1; kill -HUP 1; kill -USR1 1; kill -QUIT 1; sleep 0.2; kill -9 -1' });
        expect(died).toMatchObject({ kind: 'reply', reply: { result: { shell_died: true } } });
        expect((await box.docker.getContainer(box.id).inspect()).State.Running).toBe(true);
        const again = await bash(shell, 'echo still here');
        expect(again).toMatch(/^\[a new shell was started: .*\]\nstill here\n\[exit code 0\]$/);
        if (runtime === 'runc') {
          // the kernel gives a namespace's process 1 no SIGKILL from inside it
          await bash(shell, 'kill -9 1; sleep 0.3; echo done');
          expect((await box.docker.getContainer(box.id).inspect()).State.Running).toBe(true);
        }
      } finally {
        await shell.close();
        await box.remove();
      }
    });
  });
}

describeStop('runc');
describeStop('runsc');
