/**
 * Plays a verified task of a loaded bundle straight through the shell and verifier rooms, as
 * the episode machinery will once they are wired in: a container of the task's env (the shell
 * env's options, a network of its own), each turn prepared (upload, setup.sh, ready check), the
 * policy's calls through the shell toolset, the turn's verifier at its end, min_reward stopping
 * early, the turns' scores combined. `golden` plays the task's golden solution; `empty` calls
 * nothing.
 */
import type { LoadedBundle, Task } from '../../src/bundle/index.js';
import { ShellToolset } from '../../src/tools/shell/index.js';
import { DEFAULT_TURN_REWARD, combineTurnScores, meetsMinReward, prepareTurn, runVerifier, type Scores, type VerifierSpec } from '../../src/verifier/index.js';
import { startShellContainer } from './shell-container.js';

export interface Play {
  scores: Scores;
  /** each played turn's scores */
  perTurn: Scores[];
  /** the turn after which min_reward stopped the episode, if it did */
  stoppedAfter: number | null;
  /** what went wrong outside the grade (a tool error of the golden solution, a verifier failure) */
  calls: { tool: string; isError: boolean; text: string }[];
}

const mean = (s: Scores) => {
  const v = Object.values(s);
  return v.length ? v.reduce((a, b) => a + b, 0) / v.length : 0;
};

export async function playVerified(bundle: LoadedBundle, task: Task, image: string, policy: 'golden' | 'empty'): Promise<Play> {
  const env = bundle.envOf(task).spec;
  const box = await startShellContainer(image, {
    environment: env.environment,
    memoryMb: env.resources.memory_mb,
    cpus: env.resources.cpus,
    pids: env.resources.pids,
    ...(env.workdir ? { workdir: env.workdir } : {}),
  });
  const shell = new ShellToolset(box.exec, env.workdir ? { workdir: env.workdir } : {});
  try {
    const workdir = env.workdir ?? ((await box.docker.getContainer(box.id).inspect()).Config.WorkingDir || '/');
    // the golden solution, turn by turn (end_turn closes a turn)
    const byTurn: { tool: string; arguments?: Record<string, unknown> }[][] = [[]];
    for (const step of task.golden ?? []) {
      if (step.tool === 'end_turn') byTurn.push([]);
      else byTurn[byTurn.length - 1]!.push(step);
    }
    const perTurn: Scores[] = [];
    const calls: Play['calls'] = [];
    let stoppedAfter: number | null = null;
    const turns = task.turns.length;
    for (let i = 0; i < turns; i++) {
      const spec = task.per_turn?.[i];
      if (spec?.upload !== undefined || spec?.ready_check) {
        const ready = await prepareTurn(box.exec, {
          workdir,
          setupTimeoutMs: 60_000,
          ...(spec.upload !== undefined ? { upload: `${bundle.dir}/${spec.upload}` } : {}),
          ...(spec.ready_check
            ? {
                readyCheck: {
                  command: spec.ready_check.command,
                  intervalMs: spec.ready_check.interval_s * 1000,
                  timeoutMs: spec.ready_check.timeout_s * 1000,
                  retries: spec.ready_check.retries,
                },
              }
            : {}),
        });
        if (!ready.ok) throw new Error(`task ${task.task_id} turn ${i + 1}: ${ready.message}\n${ready.output}`);
      }
      if (policy === 'golden') {
        for (const step of byTurn[i] ?? []) {
          const o = await shell.call(step.tool, step.arguments ?? {});
          if (o.kind !== 'reply') throw new Error(`task ${task.task_id}: golden ${step.tool} refused: ${o.message}`);
          calls.push({ tool: step.tool, isError: o.reply.is_error, text: o.reply.text });
        }
      }
      const verifier = spec?.verifier ?? (i === turns - 1 ? task.verifier : undefined);
      if (!verifier) continue;
      const vspec: VerifierSpec = { testsDir: `${bundle.dir}/${verifier.tests}`, timeoutMs: verifier.timeout_s * 1000, env: verifier.env, workdir };
      const out = await runVerifier(box.exec, vspec);
      if (out.status !== 'scored') throw new Error(`task ${task.task_id} turn ${i + 1}: ${out.message}\n${out.run.output.text}`);
      perTurn.push(out.scores);
      if (spec?.min_reward !== undefined && !meetsMinReward(out.scores, spec.min_reward, mean).ok && i < turns - 1) {
        stoppedAfter = i + 1;
        break;
      }
    }
    const perTurnVerified = (task.per_turn ?? []).some((t) => t.verifier !== undefined);
    const scores = perTurnVerified ? combineTurnScores(task.turn_reward ?? DEFAULT_TURN_REWARD, perTurn, turns) : perTurn[perTurn.length - 1]!;
    return { scores, perTurn, stoppedAfter, calls };
  } finally {
    await shell.close();
    await box.remove();
  }
}
