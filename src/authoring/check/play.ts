/**
 * One play of a task in check: an episode on the runtime, its steps called as a model would call
 * them, and what it saw kept (a Play); and how two plays, or a play's failure, are told.
 */
import { DeployFailedError } from '../../errors.js';
import type { LoadedBundle, Task } from '../../bundle/index.js';
import type { GoldenStep } from '../../bundle/schema.js';
import type { Episode } from '../../episodes/episode.js';
import type { CallObservation, Ending, Failure, Scores } from '../../protocol/observations.js';
import type { HarnessProgress } from '../../protocol/harness.js';
import type { OpenEnvRuntime } from '../../runtime.js';
import type { Findings } from '../findings.js';
import type { HarnessPlays } from '../check-harness.js';
import type { ReusedEnvs } from '../reused-envs.js';

/** One step as a model would have seen it: enough to tell two plays of a task apart. */
export interface PlayedStep {
  tool: string;
  text: string | null;
  is_error: boolean;
  error_type: string | null;
  /** the tool error's message (the env answered HTTP 500, bad arguments), when there was one */
  error: string | null;
}

export interface Play {
  steps: PlayedStep[];
  done: boolean;
  reward: number | null;
  scores: Scores | null;
  end_reason: string | null;
  failure: Failure | null;
  /** the reset's deploy time (container, readiness, /reset), seconds */
  deploy_s: number | null;
  /** episodes its env's container had served before it (0: a fresh container) */
  served_before: number;
  /** what its last verifier run printed (its transcript's `verifier` event), null when none ran */
  verifier_output: string | null;
  /** a harness task's play (check-harness.ts): what its harness did, once it ended */
  harness?: HarnessProgress | null;
}

/** where plays run: the runtime, check's env reuse when an env may be reused, and the scripted model of harness tasks */
export interface Stage {
  rt: OpenEnvRuntime;
  reuse: ReusedEnvs | null;
  harness: HarnessPlays | null;
}

/** what every check is given: the bundle, the findings it adds to, where plays run, and the count of plays */
export interface CheckRun {
  bundle: LoadedBundle;
  findings: Findings;
  stage: Stage;
  /** counts a play (an episode) and its deploy or /reset time */
  note(task: Task, p: Play): void;
}

/** a verifier's failure carries its output's tail, more telling than an env's log lines: more of it is shown */
const VERIFIER_REASONS = new Set<string>(['verifier_failed', 'verifier_timeout', 'invalid_scores']);
export const VERIFIER_TAIL_LINES = 15;

/** the last `lines` lines of an output, indented under a finding */
export function lastLines(text: string, lines: number, indent = '      '): string {
  return text.trim().split('\n').slice(-lines).join(`\n${indent}`);
}

export function describeFailure(f: Failure): string {
  const verifier = VERIFIER_REASONS.has(f.reason);
  const tail = f.log_tail
    ? verifier
      ? `; the verifier's output ends:\n      ${lastLines(f.log_tail, VERIFIER_TAIL_LINES)}`
      : `; the env's last log lines:\n      ${lastLines(f.log_tail, 5)}`
    : '';
  return `${f.reason} in phase ${f.phase}: ${f.message}${tail}`;
}

/** the output of the episode's last verifier run, from its transcript (null: none ran, or the transcript is gone) */
function verifierOutput(rt: OpenEnvRuntime, episodeId: string): string | null {
  const events = rt.history.transcript(episodeId)?.events ?? [];
  const last = events.filter((e) => e.kind === 'verifier').pop();
  return last && typeof last.output === 'string' ? last.output : null;
}

export async function play(
  { rt, reuse, harness }: Stage,
  task: Task,
  seed: number,
  steps: readonly GoldenStep[],
  opts: { hold?: boolean; fresh?: boolean } = {},
): Promise<{ play: Play; episode: Episode | null }> {
  const result: Play = {
    steps: [],
    done: false,
    reward: null,
    scores: null,
    end_reason: null,
    failure: null,
    deploy_s: null,
    served_before: 0,
    verifier_output: null,
  };
  // a harness task's model is a scripted one, given as the reset's upstream (check-harness.ts)
  const model = harness?.upstreamFor(task, steps) ?? null;
  const data = { task_id: task.task_id, seed, ...(model ? { model } : {}) };
  const ep = rt.manager.create(data, 'ws');
  if (opts.fresh) reuse?.fresh(ep.id);
  try {
    const reset = await rt.manager.start(ep);
    result.deploy_s = reset.observation.timings.deploy_s;
    if (model && harness) Object.assign(result, await harness.waitOut(ep));
    for (const step of model ? [] : steps) {
      const out = await ep.step({ type: 'call_tool', tool_name: step.tool, arguments: step.arguments ?? {} });
      const obs = out.observation as CallObservation & Partial<Ending>;
      const text = obs.result?.content[0]?.text ?? null;
      const isError = obs.result?.is_error === true;
      result.steps.push({
        tool: step.tool,
        text,
        is_error: isError,
        error_type: obs.error?.error_type ?? null,
        error: obs.error?.message ?? (isError ? text : null),
      });
      if (out.done) {
        result.done = true;
        result.reward = out.reward;
        result.scores = obs.scores ?? null;
        result.end_reason = obs.end_reason ?? null;
        result.failure = obs.failure ?? null;
        break;
      }
    }
  } catch (e) {
    if (!(e instanceof DeployFailedError)) throw e;
    result.failure = e.failure;
    result.done = true;
  }
  result.served_before = reuse?.servedBeforeOf(ep.id) ?? 0;
  result.verifier_output = verifierOutput(rt, ep.id);
  if (opts.hold && !result.done) return { play: result, episode: ep };
  await ep.close();
  return { play: result, episode: null };
}

/** What a play's model saw, as one comparable string per step. */
function fingerprint(p: Play): string[] {
  return [
    ...p.steps.map(({ tool, text, is_error, error_type }) => JSON.stringify({ tool, text, is_error, error_type })),
    JSON.stringify({ scores: p.scores, end_reason: p.end_reason, failure: p.failure?.reason ?? null }),
  ];
}

/** The first step (or the scores, past the steps) at which two plays differ, null when they do not. */
export function firstDifference(a: Play, b: Play, steps: number): { at: string; was: string; now: string } | null {
  const fa = fingerprint(a);
  const fb = fingerprint(b);
  const at = fa.findIndex((s, i) => s !== fb[i]);
  if (at === -1 && fa.length === fb.length) return null;
  const i = at === -1 ? Math.min(fa.length, fb.length) : at;
  return { at: i < steps ? `step ${i + 1}` : 'the scores', was: fa[i] ?? 'nothing', now: fb[i] ?? 'nothing' };
}
