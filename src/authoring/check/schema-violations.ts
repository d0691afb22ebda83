/**
 * The schema violations check: once per toolset, a call of each tool with arguments its
 * input_schema refuses, all in one episode; the env must answer each as the model's error
 * (400 or is_error) and the episode go on.
 */
import type { ValidateFunction } from 'ajv';
import type { Task } from '../../bundle/index.js';
import type { GoldenStep } from '../../bundle/schema.js';
import { CHECK_SEED } from '../../defaults.js';
import { describeErrors, violatingArguments } from '../json-schema.js';
import { describeFailure, play, type CheckRun, type Play } from './play.js';

/** a call that violates a tool's schema, and why it does */
export interface ViolatingCall {
  step: GoldenStep;
  why: string;
}

/** the calls that violate each tool's schema; a tool whose schema accepts any object gets a warning instead */
export function violatingCalls(run: CheckRun, task: Task, validators: Map<string, ValidateFunction> | undefined): ViolatingCall[] {
  const tools = run.bundle.manifest.toolsets[task.toolset]?.tools ?? [];
  const calls: ViolatingCall[] = [];
  for (const tool of tools) {
    const validate = validators?.get(tool.name);
    if (!validate) continue;
    const args = violatingArguments(tool.input_schema, validate);
    if (args === null) {
      run.findings.warning(`tool ${tool.name} (toolset ${task.toolset})`, 'its input_schema accepts any object: check could not make a call that violates it');
      continue;
    }
    validate(args);
    calls.push({ step: { tool: tool.name, arguments: args }, why: describeErrors(validate) });
  }
  return calls;
}

/** What the play of the violating calls says: one problem per call the env accepted, and one if the episode ended; [where, message] */
export function judgeViolations(toolset: string, calls: readonly ViolatingCall[], p: Play): [string, string][] {
  const problems: [string, string][] = [];
  p.steps.forEach((s, i) => {
    const call = calls[i];
    if (!call || s.is_error || s.error_type !== null) return;
    problems.push([
      `tool ${s.tool} (toolset ${toolset})`,
      `the env accepted ${JSON.stringify(call.step.arguments)}, which violates the input_schema (${call.why}); answer 400 {"error", "message"} or is_error so the model learns`,
    ]);
  });
  if (p.done) {
    const last = p.steps[p.steps.length - 1]?.tool ?? 'the first call';
    problems.push([
      `tool ${last} (toolset ${toolset})`,
      `a call that violates the input_schema ended the episode (${p.failure ? describeFailure(p.failure) : (p.end_reason ?? 'done')}); it must be the model's error and the episode go on`,
    ]);
  }
  return problems;
}

/** plays the violating calls of `task`'s toolset in one episode, held open until judged */
export async function checkSchemaViolations(run: CheckRun, task: Task, validators: Map<string, ValidateFunction> | undefined): Promise<void> {
  const calls = violatingCalls(run, task, validators);
  if (calls.length === 0) return;
  const { play: p, episode } = await play(
    run.stage,
    task,
    CHECK_SEED,
    calls.map((c) => c.step),
    { hold: true },
  );
  run.note(task, p);
  try {
    for (const [where, message] of judgeViolations(task.toolset, calls, p)) run.findings.problem(where, message);
  } finally {
    await episode?.close();
  }
}
