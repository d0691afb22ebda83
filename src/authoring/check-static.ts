/**
 * The part of `openenv-bundle check` that needs no Docker: what loading checks (manifest, rows,
 * cross-references), then what serving does not need but training does: every tool's schema
 * compiles, the scores the reward names are declared, every golden solution is a well-formed
 * sequence of calls of its task's tools. It also says what each env is granted by its bundle.json
 * (the lock-down and its asks, engine/hardening.ts), as the engine would be told under runc.
 */
import type { ValidateFunction } from 'ajv';
import { BUILTIN_TOOLSETS, BundleError, END_TURN, formatIssue, loadBundle, toolSpecsOf, type LoadedBundle, type Task } from '../bundle/index.js';
import { REWARD_RULES } from '../episodes/reward.js';
import { ENV_LAYER_DEFAULTS } from '../defaults.js';
import { envLimits } from '../bundle/env-catalog.js';
import { granted, withLayerDefaults, type Granted } from '../sandbox/lockdown.js';
import { compileSchema, describeErrors, newValidator } from './json-schema.js';
import { Findings } from './findings.js';

export interface StaticResult {
  /** null when the bundle does not load */
  bundle: LoadedBundle | null;
  findings: Findings;
  /** toolset → tool → its compiled input_schema (tools whose schema compiles) */
  validators: Map<string, Map<string, ValidateFunction>>;
  /**
   * env → what its bundle.json grants it: the lock-down, its asks, its limits (a default server's
   * bounds of its writable layer where it sets none), under the runtime it asks for (else runc: a
   * server's --runtime runsc, or an engine that cannot keep a setting, changes it; a played check's
   * `granted` says what the engine gave). {} when the bundle does not load.
   */
  granted: Record<string, Granted>;
}

/** `task guess-train-0 (tasks/train.jsonl line 1)` */
export function taskWhere(bundle: LoadedBundle, task: Task): string {
  return `task ${task.task_id} (${bundle.manifest.splits[task.split] ?? task.split} line ${task.index + 1})`;
}

export async function checkStatic(dir: string): Promise<StaticResult> {
  const findings = new Findings();
  const validators = new Map<string, Map<string, ValidateFunction>>();
  let bundle: LoadedBundle;
  try {
    bundle = await loadBundle(dir);
  } catch (e) {
    if (!(e instanceof BundleError)) throw e;
    for (const issue of e.issues) {
      const text = formatIssue(issue);
      const colon = text.indexOf(': ');
      findings.problem(text.slice(0, colon), text.slice(colon + 2));
    }
    if (e.total > e.issues.length)
      findings.problem('bundle', `… and ${e.total - e.issues.length} more problems of the same kind (fix these and run check again)`);
    return { bundle: null, findings, validators, granted: {} };
  }
  const m = bundle.manifest;

  const ajv = newValidator();
  for (const [toolsetName, toolset] of Object.entries(m.toolsets)) {
    const compiled = new Map<string, ValidateFunction>();
    validators.set(toolsetName, compiled);
    toolset.tools.forEach((tool, i) => {
      const where = `bundle.json, field "toolsets.${toolsetName}.tools[${i}].input_schema" (tool ${tool.name})`;
      const out = compileSchema(ajv, tool.input_schema);
      if ('problem' in out) {
        findings.problem(where, `expected a JSON Schema that compiles: ${out.problem}; fix the schema (models are shown it as the tool's parameters)`);
        return;
      }
      compiled.set(tool.name, out.validate);
      if (tool.input_schema.type !== 'object') {
        findings.warning(where, `expected "type": "object" (arguments are always a JSON object), got ${JSON.stringify(tool.input_schema.type) ?? 'none'}`);
      }
    });
    // the built-in toolsets' tools (the server's own: their schemas compile)
    for (const tool of toolset.builtin.flatMap((b) => BUILTIN_TOOLSETS[b])) {
      const out = compileSchema(ajv, tool.input_schema);
      if ('validate' in out) compiled.set(tool.name, out.validate);
    }
  }

  const declared = m.scores;
  const reward = m.reward;
  if (declared === undefined) {
    findings.warning(
      'bundle.json, field "scores"',
      'no scores declared: check assumes every score lies in [0, 1] and an empty solution scores 0; declare each score\'s "min", "max" and "floor" so the server refuses scores out of range',
    );
    if (reward !== undefined && !REWARD_RULES.includes(reward)) {
      findings.problem(
        'bundle.json, field "reward"',
        `the reward is the score "${reward}", but no score is declared; add "scores": {"${reward}": {"min": 0, "max": 1}}`,
      );
    }
  } else if (reward !== undefined && !REWARD_RULES.includes(reward) && !Object.hasOwn(declared, reward)) {
    findings.problem(
      'bundle.json, field "reward"',
      `the reward is the score "${reward}", which "scores" does not declare (declared: ${Object.keys(declared).join(', ') || 'none'}); declare it or fix the name`,
    );
  }

  let withoutGolden = 0;
  for (const tasks of Object.values(bundle.splits)) {
    for (const task of tasks) {
      if (task.golden === undefined) {
        withoutGolden++;
        continue;
      }
      const tools = validators.get(task.toolset);
      const names = toolSpecsOf(m, task.toolset).map((t) => t.name);
      let endTurns = 0;
      task.golden.forEach((step, i) => {
        const where = `${taskWhere(bundle, task)}, field "golden[${i}]"`;
        if (step.tool === END_TURN) {
          endTurns++;
          return;
        }
        if (!names.includes(step.tool)) {
          findings.problem(where, `expected a tool of toolset "${task.toolset}" (${[...names, END_TURN].join(', ')}), got "${step.tool}"`);
          return;
        }
        const validate = tools?.get(step.tool);
        if (validate && !validate(step.arguments ?? {})) {
          findings.problem(where, `the arguments do not match ${step.tool}'s input_schema: ${describeErrors(validate)}`);
        }
      });
      if (endTurns > task.turns.length) {
        findings.problem(
          `${taskWhere(bundle, task)}, field "golden"`,
          `${endTurns} end_turn steps, but the task has ${task.turns.length} turn(s): the episode ends at the last one`,
        );
      }
    }
  }
  if (withoutGolden > 0) {
    findings.warning('task rows', `${withoutGolden} task(s) have no "golden" solution: check cannot tell whether a perfect player reaches the max there`);
  }
  const grants: Record<string, Granted> = {};
  for (const [name, env] of Object.entries(m.envs)) {
    const l = envLimits(env);
    // as a server with its default options runs it: the default bounds of its writable layer where the bundle sets none
    grants[name] = granted({
      resources: withLayerDefaults(l.resources, ENV_LAYER_DEFAULTS),
      ...(l.security ? { security: l.security } : {}),
      runtime: l.runtime ?? 'runc',
    });
  }
  return { bundle, findings, validators, granted: grants };
}
