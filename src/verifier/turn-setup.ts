/**
 * Before a turn's prompt (a Harbor step's workdir/ and healthcheck): a folder of the task is
 * copied into the env's working directory, a `setup.sh` at its top runs there (Harbor's reserved
 * name; such scripts usually delete themselves), and a ready check runs until it passes (failures
 * within its start period not counted, as Docker's HEALTHCHECK does). A failure says which part
 * failed, with the output.
 */
import { readdir } from 'node:fs/promises';
import { copyInAs, runKillable } from '../container/index.js';
import type { ContainerExec } from '../sandbox/container-exec.js';

export const SETUP_SCRIPT = 'setup.sh';

export interface ReadyCheck {
  /** a shell command: exit 0 means ready */
  command: string;
  intervalMs: number;
  timeoutMs: number;
  /** attempts before the check counts as failed */
  retries: number;
  /** failed attempts that start within this long of the first do not count toward `retries` (Docker's start period); default 0 */
  startPeriodMs?: number;
  /** the wait between attempts within the start period; default `intervalMs` */
  startIntervalMs?: number;
}

export interface TurnSetup {
  /** a folder of this machine whose contents go into `workdir` */
  upload?: string;
  /** the env's working directory (absolute) */
  workdir: string;
  /** how long setup.sh may run */
  setupTimeoutMs: number;
  readyCheck?: ReadyCheck;
  /** who runs setup.sh and the ready check; default: the image's USER */
  user?: string;
  /** who the upload is copied in as (the agent's user: the workdir is the agent's); default: `user` */
  uploadUser?: string;
  env?: Record<string, string>;
}

export type TurnSetupResult = { ok: true } | { ok: false; message: string; output: string };

const bounds = { headBytes: 4096, tailBytes: 4096 };

export async function prepareTurn(exec: ContainerExec, setup: TurnSetup): Promise<TurnSetupResult> {
  const common = { workdir: setup.workdir, ...(setup.user ? { user: setup.user } : {}), ...(setup.env ? { env: setup.env } : {}) };
  if (setup.upload !== undefined) {
    // as the turn's user, by the toolbox's tar: a link the agent left in the workdir cannot lead a write of root's elsewhere
    try {
      await copyInAs(exec, setup.upload, setup.workdir, setup.uploadUser ?? setup.user ?? null);
    } catch (e) {
      return { ok: false, message: `could not copy the turn's files into ${setup.workdir}`, output: (e as Error).message };
    }
    if ((await readdir(setup.upload)).includes(SETUP_SCRIPT)) {
      const ran = await runKillable(exec, { cmd: ['bash', SETUP_SCRIPT], ...common }, setup.setupTimeoutMs, bounds);
      if (ran.timedOut)
        return { ok: false, message: `the turn's ${SETUP_SCRIPT} was still running after ${setup.setupTimeoutMs / 1000} s`, output: ran.output.text };
      if (ran.exitCode !== 0) return { ok: false, message: `the turn's ${SETUP_SCRIPT} failed with exit code ${ran.exitCode}`, output: ran.output.text };
    }
  }
  const check = setup.readyCheck;
  if (check) {
    let last: string;
    const started = Date.now();
    const startPeriodMs = check.startPeriodMs ?? 0;
    let counted = 0;
    let attempts = 0;
    for (;;) {
      const inStartPeriod = Date.now() - started < startPeriodMs;
      attempts++;
      const ran = await runKillable(exec, { cmd: ['bash', '-c', check.command], ...common }, check.timeoutMs, bounds);
      if (!ran.timedOut && ran.exitCode === 0) return { ok: true };
      last = ran.timedOut ? `${ran.output.text}${ran.output.text ? '\n' : ''}(timed out after ${check.timeoutMs / 1000} s)` : ran.output.text;
      // a failure within the start period does not count (Docker's semantics)
      if (!inStartPeriod && ++counted >= check.retries) break;
      await new Promise((r) => setTimeout(r, inStartPeriod ? (check.startIntervalMs ?? check.intervalMs) : check.intervalMs));
    }
    const period = startPeriodMs > 0 ? ` after its start period of ${startPeriodMs / 1000} s (${attempts} attempt(s) in all)` : '';
    return { ok: false, message: `the turn's ready check (${check.command}) did not pass in ${check.retries} attempt(s)${period}`, output: last };
  }
  return { ok: true };
}
