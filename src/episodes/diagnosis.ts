/**
 * An episode's env, looked at when a call to it went wrong: the sandbox reports what it sees
 * (running, exit code, OOM, a lost node), failures.ts decides what that means. One instance per
 * episode, looking at whatever env its lease holds now.
 */
import type { Logger } from 'pino';
import { callVerdict, envGone, envVerdict, type CallEvidence, makeFailure, resetCallVerdict, unexplainedDeployFailure, type EnvVerdict } from '../failures.js';
import type { Failure } from '../protocol/observations.js';
import { SandboxError, type EnvDiagnosis, type EnvHandle, type Sandbox } from '../sandbox/sandbox.js';
import { fmtS } from '../util/time.js';
import { EnvCallError } from './env-client.js';
import { TurnSetupError } from './plays/play.js';

/**
 * A dropped connection usually comes a moment before the engine marks the container exited: look
 * this many times, this far apart, before calling the env merely unreachable.
 */
export const DIAGNOSE_RETRY = { attempts: 10, delayMs: 100 } as const;

export class EnvInspector {
  constructor(
    private readonly sandbox: Pick<Sandbox, 'diagnose'>,
    /** the env the episode holds now (null before the deploy, and after a pooled env was replaced) */
    private readonly handle: () => EnvHandle | null,
    private readonly ids: { episode_id: string; task_id: string },
    private readonly log: Logger,
  ) {}

  /**
   * The env's container state after a failed call. A dropped connection usually comes a moment
   * before the engine marks the container exited: look again for up to a second before calling
   * the env merely unreachable. Null when the engine cannot say.
   */
  async look(): Promise<EnvDiagnosis | null> {
    const handle = this.handle();
    if (!handle) return null;
    let last: EnvDiagnosis | null = null;
    for (let i = 0; i < DIAGNOSE_RETRY.attempts; i++) {
      try {
        last = await this.sandbox.diagnose(handle);
      } catch {
        return last;
      }
      if (!last.running || last.oomKilled || last.pidsAtLimit !== undefined || i === DIAGNOSE_RETRY.attempts - 1) return last;
      await new Promise((r) => setTimeout(r, DIAGNOSE_RETRY.delayMs));
    }
    return last;
  }

  /** Why the env stopped answering (failures.ts's verdict on the look and on what the failed call said). */
  async verdict(said?: CallEvidence): Promise<EnvVerdict> {
    return envVerdict(await this.look(), said);
  }

  /** A call that got no usable answer: what it means, asking the engine whether the env exited on a timeout. */
  async judgeCall(e: unknown): Promise<ReturnType<typeof callVerdict>> {
    const kind = e instanceof EnvCallError ? e.kind : null;
    return callVerdict(kind, kind === 'timeout' ? await this.exited() : false);
  }

  /** Whether the env's container has stopped (its death seen, or the engine says so). */
  async gone(): Promise<boolean> {
    if (this.handle()?.gone?.aborted) return true;
    return envGone(await this.look());
  }

  /** The /reset of an env taken from the warm pool got no answer because the env is gone. */
  async pooledEnvDied(e: unknown): Promise<boolean> {
    if (!(e instanceof EnvCallError) || e.status !== undefined) return false;
    if (this.handle()?.gone?.aborted) return true;
    return envGone(await this.look());
  }

  /** Why getting or resetting the env failed: a turn's setup, the sandbox's reason, or the /reset call's (`resetCallMs`: its budget). */
  async deployFailure(e: unknown, resetCallMs: number): Promise<Failure> {
    if (e instanceof TurnSetupError) return makeFailure('setup_failed', 'reset', e.message, this.ids, { log_tail: e.output });
    if (e instanceof SandboxError) {
      return makeFailure(e.reason, 'deploy', e.message, this.ids, { exit_code: e.details.exitCode, log_tail: e.details.logTail });
    }
    if (e instanceof EnvCallError) {
      const verdict = resetCallVerdict(e.kind);
      if (verdict !== 'ask_env') return makeFailure(verdict.reason, 'reset', `the env did not answer /reset within ${fmtS(resetCallMs)}`, this.ids);
      const v = await this.verdict();
      return makeFailure(v.reason, 'reset', `the env failed its reset: ${e.message}`, this.ids, v.extra);
    }
    this.log.error({ err: e }, 'unexpected deploy error');
    return unexplainedDeployFailure(e, this.ids);
  }

  /** A call got no answer: is the env's container no longer running? (one engine call) */
  private async exited(): Promise<boolean> {
    const handle = this.handle();
    if (!handle) return false;
    return this.sandbox.diagnose(handle).then(
      (d) => !d.running,
      () => false,
    );
  }
}
