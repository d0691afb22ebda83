/**
 * `check` on a harness task (docs/gateway.md, "checking a harness task"): a harness episode offers
 * one tool, `wait`, and the server runs the task's harness, which calls its model through the
 * episode's gateway. So check plays it as a trainer would, with the model swapped for a scripted
 * one (scripted-model.ts) given as the episode's reset upstream: the golden play's model answers
 * with the golden solution's steps as `bash` tool calls, which the shipped harness runs; the empty
 * play's model answers "done" at once. The golden play needs the shipped harness (another CMD may
 * speak another API, or take tool calls of other names) and steps it can carry (bash, write_file,
 * read_file, end_turn): else check says so and plays the empty run only.
 */
import type { LoadedBundle, Task } from '../bundle/index.js';
import { END_TURN } from '../bundle/index.js';
import type { GoldenStep } from '../bundle/schema.js';
import { HARNESS } from '../defaults.js';
import type { Episode } from '../episodes/episode.js';
import { harnessOf } from '../episodes/harness-task.js';
import type { HarnessProgress } from '../protocol/harness.js';
import { WAIT_TOOL_NAME } from '../protocol/harness.js';
import type { Upstream } from '../protocol/model.js';
import type { CallObservation, Ending, Failure, Scores } from '../protocol/observations.js';
import { BASH_TOOL, READ_FILE_TOOL, WRITE_FILE_TOOL } from '../tools/shell/index.js';
import { SCRIPTED_MODEL_NAME, ScriptedModel, type ModelScript } from './scripted-model.js';

/** the shipped harness's file name, which a task's harness command names when it runs it */
const SHIPPED_NAME = HARNESS.shippedPath.split('/').pop()!;

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** the harness command runs the shipped harness (harness/openenv_harness.py), which runs `bash` tool calls */
export function runsShippedHarness(command: readonly string[]): boolean {
  return command.some((part) => part.includes(SHIPPED_NAME));
}

/** One golden step as a bash command the shipped harness runs; a string saying why not, else. */
function commandOf(step: GoldenStep): { command: string } | { cannot: string } {
  const a = (step.arguments ?? {}) as Record<string, unknown>;
  if (step.tool === BASH_TOOL && typeof a.command === 'string') return { command: a.command };
  if (step.tool === WRITE_FILE_TOOL && typeof a.path === 'string' && typeof a.content === 'string') {
    const dir = a.path.includes('/') ? a.path.slice(0, a.path.lastIndexOf('/')) || '/' : '.';
    const b64 = Buffer.from(a.content, 'utf8').toString('base64');
    return { command: `mkdir -p -- ${shellQuote(dir)} && printf %s ${shellQuote(b64)} | base64 -d > ${shellQuote(a.path)}` };
  }
  if (step.tool === READ_FILE_TOOL && typeof a.path === 'string') return { command: `cat -- ${shellQuote(a.path)}` };
  return { cannot: `its step "${step.tool}" is not one the shipped harness can run (bash, write_file, read_file, end_turn)` };
}

/**
 * The model's script for a play of `steps` (the golden solution, or end_turn on every turn): each
 * turn's steps up to its end_turn as bash commands, found by the turn's instruction.
 */
export function scriptOf(task: Task, steps: readonly GoldenStep[]): ModelScript | { cannot: string } {
  const turns: ModelScript['turns'] = task.turns.map((instruction) => ({ instruction, commands: [] }));
  let i = 0;
  for (const step of steps) {
    if (step.tool === END_TURN) {
      i++;
      continue;
    }
    const c = commandOf(step);
    if ('cannot' in c) return c;
    const turn = turns[i];
    if (!turn) return { cannot: `it has steps after its last turn's end_turn` };
    turn.commands.push(c.command);
  }
  return { turns };
}

/**
 * Why check cannot play a harness task's golden solution through its harness (null: it can);
 * the empty run is played all the same.
 */
export function harnessGoldenBlocker(bundle: LoadedBundle, task: Task): string | null {
  const spec = harnessOf(bundle, task);
  if (!spec || !task.golden) return null;
  const ran = `check played the empty run only (a scripted model answering "done" at once through the gateway); the golden solution was not played`;
  if (!runsShippedHarness(spec.command))
    return `the harness command (${JSON.stringify(spec.command)}) is not the shipped harness (${HARNESS.shippedPath}), whose replies check can script: ${ran}`;
  const s = scriptOf(task, task.golden);
  if ('cannot' in s) return `the golden solution cannot be given to the shipped harness as model replies (${s.cannot}): ${ran}`;
  return null;
}

/**
 * What check says of a harness run that did not end on its own with exit 0 (its model call
 * refused, a crash, its time budget passed), with its output's tail; null for a run that did.
 */
export function harnessRunNote(h: HarnessProgress): string | null {
  if (h.ended === 'exited' && h.exit_code === 0) return null;
  const how =
    h.ended === 'time_budget'
      ? 'ran out of its time budget'
      : h.ended === 'exited'
        ? `exited with ${h.exit_code ?? 'an unknown code'}`
        : 'did not run to its end';
  const tail = h.output_tail.trim().split('\n').slice(-5).join('\n      ');
  return `${how} after ${h.model_calls} model call(s)${tail ? `; its output's last lines:\n      ${tail}` : ''}`;
}

/** what a harness play ended with, for check's Play */
export interface HarnessPlayEnd {
  done: boolean;
  reward: number | null;
  scores: Scores | null;
  end_reason: string | null;
  failure: Failure | null;
  harness: HarnessProgress | null;
}

/** Harness plays of one check: the scripted model they call, and how a play is given it and waited out. */
export class HarnessPlays {
  private constructor(
    private readonly bundle: LoadedBundle,
    readonly model: ScriptedModel,
  ) {}

  /** Starts the scripted model when the sample has a harness task; null when it has none. */
  static async start(bundle: LoadedBundle, sample: readonly Task[]): Promise<HarnessPlays | null> {
    if (!sample.some((t) => harnessOf(bundle, t) !== null)) return null;
    const model = new ScriptedModel();
    await model.start();
    return new HarnessPlays(bundle, model);
  }

  isHarness(task: Task): boolean {
    return harnessOf(this.bundle, task) !== null;
  }

  /** the reset's `model` for a play of `steps` (null: not a harness task); steps it cannot script play as "done" */
  upstreamFor(task: Task, steps: readonly GoldenStep[]): Upstream | null {
    if (!this.isHarness(task)) return null;
    const s = scriptOf(task, steps);
    const script = 'cannot' in s ? { turns: task.turns.map((instruction) => ({ instruction, commands: [] })) } : s;
    return { base_url: this.model.add(script), headers: {}, model: SCRIPTED_MODEL_NAME };
  }

  /** Waits the episode out (`wait` until it is done), as a trainer's client would. */
  async waitOut(ep: Episode): Promise<HarnessPlayEnd> {
    for (;;) {
      const out = await ep.step({ type: 'call_tool', tool_name: WAIT_TOOL_NAME, arguments: { timeout_s: HARNESS.waitMaxS } });
      if (!out.done) continue;
      const obs = out.observation as CallObservation & Partial<Ending>;
      return {
        done: true,
        reward: out.reward,
        scores: obs.scores ?? null,
        end_reason: obs.end_reason ?? null,
        failure: obs.failure ?? null,
        harness: obs.harness ?? null,
      };
    }
  }

  close(): Promise<void> {
    return this.model.close();
  }
}
