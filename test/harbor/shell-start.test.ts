/**
 * A shell that cannot start says why, and the episode reads it: bash's own "fork: retry:
 * Resource temporarily unavailable" while it starts means the container's processes hold its
 * pids limit (a fork bomb), which ends the episode env_pids_exhausted (the model's doing) even
 * where the server cannot read the container's count, or reads it in a trough of the bomb's
 * swings (CI once ended such an episode env_unreachable, retryable, from a count under 109 of 128).
 */
import { describe, expect, it } from 'vitest';
import { envVerdict } from '../../src/failures.js';
import type { ContainerExec, OutputHandlers } from '../../src/sandbox/container-exec.js';
import { ShellSession, ShellStartError } from '../../src/tools/shell/index.js';

const FORK_RETRY = 'bash: fork: retry: Resource temporarily unavailable';
const LIMITS = { headBytes: 4096, tailBytes: 4096, killGraceMs: 100, startTimeoutMs: 300 };

/** an exec whose process writes `stderr` and then hangs (`exits`: false) or exits with code 254 */
function execSaying(stderr: string, exits: boolean): ContainerExec {
  return {
    start: async (_req: unknown, h: OutputHandlers) => {
      let ended = false;
      const end = () => {
        if (ended) return;
        ended = true;
        h.end();
      };
      setImmediate(() => {
        h.stderr(Buffer.from(stderr));
        if (exits) end();
      });
      return { write() {}, pause() {}, resume() {}, close: end, exitCode: async () => (exits ? 254 : null) };
    },
  } as unknown as ContainerExec;
}

async function startError(exec: ContainerExec): Promise<ShellStartError> {
  const session = new ShellSession(exec, {}, LIMITS);
  const err = await session.run('echo hi', 5_000).then(
    () => null,
    (e: unknown) => e,
  );
  await session.close().catch(() => undefined);
  expect(err).toBeInstanceOf(ShellStartError);
  return err as ShellStartError;
}

describe('a shell that cannot start', () => {
  it("whose forks fail at the limit until its start times out: the error quotes bash, and the episode's verdict is env_pids_exhausted", async () => {
    const e = await startError(execSaying(`${FORK_RETRY}\n${FORK_RETRY}\n`, false));
    expect(e.message).toBe(`the shell did not start within 0.3 s (it said: ${FORK_RETRY})`);
    expect(e.outOfProcesses).toBe(FORK_RETRY);
    const running = { running: true, exitCode: null, oomKilled: false, logTail: '' };
    // the sandbox's count fell in a trough (or cannot be read): the shell's words decide
    expect(envVerdict(running, { outOfProcesses: e.outOfProcesses })).toEqual({
      reason: 'env_pids_exhausted',
      what: `its shell could not start a process (${FORK_RETRY})`,
      extra: { exit_code: null, log_tail: '' },
    });
    expect(envVerdict(null, { outOfProcesses: e.outOfProcesses }).reason).toBe('env_pids_exhausted');
    // without them, the same look is an unreachable env
    expect(envVerdict(running, {}).reason).toBe('env_unreachable');
  });

  it('that gave up forking and exited: a process could not start, not a missing bash', async () => {
    const e = await startError(execSaying(`${FORK_RETRY}\nbash: fork: Resource temporarily unavailable\n`, true));
    expect(e.outOfProcesses).toBe(FORK_RETRY);
    expect(e.message).toMatch(/^the shell could not start a process \(bash --noprofile --norc: it exited with code 254\): bash: fork: retry/);
  });

  it('for another reason: no fork failure is read into it', async () => {
    const e = await startError(execSaying('OCI runtime exec failed: exec: "bash": executable file not found in $PATH\n', true));
    expect(e.outOfProcesses).toBeNull();
    expect(e.message).toMatch(/the shell tools need bash in the env's image$/);
    const silent = await startError(execSaying('', false));
    expect(silent.message).toBe('the shell did not start within 0.3 s');
    expect(silent.outOfProcesses).toBeNull();
  });

  it('says which failure it is by its kind, and the advice apart from what happened', async () => {
    expect((await startError(execSaying(`${FORK_RETRY}\n`, false))).kind).toBe('start_timeout');
    expect((await startError(execSaying(`${FORK_RETRY}\nbash: fork: Resource temporarily unavailable\n`, true))).kind).toBe('out_of_processes');
    const missing = await startError(execSaying('exec: "bash": executable file not found in $PATH\n', true));
    expect(missing.kind).toBe('no_shell');
    expect(missing.message).toBe(`${missing.what}; the shell tools need bash in the env's image`);
    // a shell ran in this container before, and neither a new nor a fresh one starts: the agent broke it
    const session = new ShellSession(execSaying('exec: "bash": executable file not found in $PATH\n', true), { ranBefore: true }, LIMITS);
    const broken = await session.run('echo hi', 5_000).then(
      () => null,
      (e: unknown) => e as ShellStartError,
    );
    await session.close().catch(() => undefined);
    expect(broken).toMatchObject({ kind: 'broken_after_running', brokenAfterRunning: true });
    expect(broken!.message).toMatch(/the shell tools need bash in the env's image \(a shell ran in this env earlier in the episode\)$/);
  });
});
