/**
 * A harness episode's part (docs/gateway.md, "harness episodes"): the task (or its bundle) names a
 * harness, a command the server runs in the env's container, once per turn, with that turn's
 * instruction, as Harbor runs its installed agents. Before each run the instruction is written to
 * HARNESS.instructionFile and the harness this project ships to HARNESS.shippedPath; the command
 * runs with OPENENV_INSTRUCTION_FILE, OPENENV_INSTRUCTION (the text, when it is short enough for a
 * variable), OPENENV_TURN and the harness's own `env`, besides the container's environment (where
 * the gateway's OPENAI_BASE_URL etc. are). A run ends when the process exits or its time budget
 * passes (its process group is then killed; a verifier kills what is left); the harness-run play
 * (plays/harness-run.ts) then scores the turn. Progress for a client's `wait` comes from here.
 */
import { mkdtemp, readFile, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HarnessManifest, LoadedBundle, Task } from '../bundle/index.js';
import { HARNESS } from '../defaults.js';
import type { HarnessExit, HarnessProgress } from '../protocol/harness.js';
import type { ContainerExec } from '../sandbox/container-exec.js';
import { copyInAs, runKillable, type KillableResult } from '../container/index.js';

/** the harness this project ships (harness/openenv_harness.py), beside dist/ and src/ */
export const SHIPPED_HARNESS = fileURLToPath(new URL('../../harness/openenv_harness.py', import.meta.url));

/** the longest instruction also passed as OPENENV_INSTRUCTION (longer ones: the file only) */
const MAX_INSTRUCTION_VAR_BYTES = 64 * 1024;
/** setTimeout's largest delay: a run without a budget is ended by the episode's own timeout */
const NO_BUDGET_MS = 2 ** 31 - 1;

/** the harness a task runs: its own, else its bundle's; null for an ordinary (stepped) task */
export function harnessOf(bundle: LoadedBundle, task: Task): HarnessManifest | null {
  return task.harness ?? bundle.manifest.harness ?? null;
}

/** one run's end, for the transcript (its `harness` event) and the episode */
export interface HarnessRun {
  turn: number;
  ended: HarnessExit;
  exitCode: number | null;
  durationMs: number;
  output: KillableResult['output'];
}

export interface ModelUse {
  calls: number;
  tokens: number;
}

export class HarnessTask {
  private firstStartedAt: number | null = null;
  private running = false;
  private turn = 1;
  private last: HarnessRun | null = null;
  private lastUse: ModelUse = { calls: 0, tokens: 0 };

  constructor(
    private readonly spec: HarnessManifest,
    private readonly task: Task,
    private readonly exec: ContainerExec,
    private readonly opts: {
      /** the env's working directory (its manifest's workdir), else the image's */
      workdir?: string;
      /** the agent's user (uid:gid), whom the harness runs as; default: the image's */
      user?: string;
      /** the episode's model use so far (null: no credential, or revoked) */
      use: () => ModelUse | null;
      now?: () => number;
    },
  ) {}

  private now(): number {
    return (this.opts.now ?? Date.now)();
  }

  /**
   * The budget of turn `i`'s run, from now: the harness's timeout_s and the task's time_budget_s
   * count from the first run's start, the turn's own time_budget_s from this one's.
   */
  private budgetMs(i: number): number {
    const started = this.firstStartedAt ?? this.now();
    const spent = this.now() - started;
    const whole = [this.spec.timeout_s, this.task.time_budget_s].filter((s): s is number => s !== undefined).map((s) => s * 1000 - spent);
    const turn = this.task.per_turn?.[i]?.time_budget_s;
    const left = Math.min(...whole, turn === undefined ? Infinity : turn * 1000);
    return Math.max(0, Math.min(left, NO_BUDGET_MS));
  }

  /** Turn `i` (0-based): the instruction and the shipped harness put in the container, then the command run to its end or its budget. */
  async runTurn(i: number): Promise<HarnessRun> {
    const instruction = this.task.turns[i]!;
    await this.putFiles(instruction);
    this.turn = i + 1;
    this.firstStartedAt ??= this.now();
    const budget = this.budgetMs(i);
    const env: Record<string, string> = {
      ...this.spec.env,
      OPENENV_INSTRUCTION_FILE: HARNESS.instructionFile,
      OPENENV_TURN: String(i + 1),
      ...(Buffer.byteLength(instruction) <= MAX_INSTRUCTION_VAR_BYTES ? { OPENENV_INSTRUCTION: instruction } : {}),
    };
    this.running = true;
    try {
      const req = {
        cmd: [...this.spec.command],
        env,
        ...(this.opts.workdir ? { workdir: this.opts.workdir } : {}),
        ...(this.opts.user ? { user: this.opts.user } : {}),
      };
      const r = await runKillable(this.exec, req, budget, {
        headBytes: HARNESS.outputHeadBytes,
        tailBytes: HARNESS.outputTailBytes,
      });
      this.last = { turn: i + 1, ended: r.timedOut ? 'time_budget' : 'exited', exitCode: r.exitCode, durationMs: r.durationMs, output: r.output };
      return this.last;
    } finally {
      this.running = false;
      this.noteUse();
    }
  }

  /** HARNESS.dir with the instruction and the shipped harness in it, owned by root, readable by all */
  private async putFiles(instruction: string): Promise<void> {
    const local = await mkdtemp(path.join(tmpdir(), 'openenv-harness-'));
    try {
      const dir = path.join(local, path.posix.basename(HARNESS.dir));
      await mkdir(dir, { mode: 0o755 });
      await writeFile(path.join(dir, path.posix.basename(HARNESS.instructionFile)), instruction, { mode: 0o644 });
      await writeFile(path.join(dir, path.posix.basename(HARNESS.shippedPath)), await readFile(SHIPPED_HARNESS), { mode: 0o755 });
      // by the toolbox's tar, as root: the folder is root's, which a harness of another user cannot change
      await copyInAs(this.exec, local, path.posix.dirname(HARNESS.dir), '0');
    } finally {
      await rm(local, { recursive: true, force: true });
    }
  }

  /** keeps the model use as it is now (before the credential is revoked, it is gone after) */
  noteUse(): void {
    const u = this.opts.use();
    if (u) this.lastUse = { calls: u.calls, tokens: u.tokens };
  }

  progress(): HarnessProgress {
    this.noteUse();
    return {
      turn: this.turn,
      running: this.running,
      elapsed_s: this.firstStartedAt === null ? 0 : Math.round(this.now() - this.firstStartedAt) / 1000,
      model_calls: this.lastUse.calls,
      model_tokens: this.lastUse.tokens,
      ended: this.last?.ended ?? null,
      exit_code: this.last?.exitCode ?? null,
      output_tail: this.running ? '' : (this.last?.output.text ?? ''),
    };
  }
}

/** A `wait` reply's text: the progress for a person. */
export function progressText(p: HarnessProgress, done: boolean): string {
  const calls = `${p.model_calls} model call(s), ${p.elapsed_s} s`;
  if (done)
    return `The episode ended (the harness ${p.ended === 'time_budget' ? 'ran out of its time budget' : p.ended === 'exited' ? `exited with ${p.exit_code}` : 'was stopped'}; ${calls}).`;
  return p.running ? `The harness runs turn ${p.turn} (${calls}).` : `The harness's turn ${p.turn} is being scored (${calls}).`;
}
