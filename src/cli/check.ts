/** `openenv-bundle check DIR [options]`: everything that can be known about a bundle before training. */
import { buildArgRecord } from '../config.js';
import { CHECK_CONCURRENCY, CHECK_TASKS_PER_GROUP } from '../defaults.js';
import { checkDynamic, type DynamicResult } from '../authoring/check-dynamic.js';
import { checkStatic } from '../authoring/check-static.js';
import { formatFinding, type Finding } from '../authoring/findings.js';
import { EXIT, UsageError, type CliIo, type Subcommand } from './command.js';
import { HELP_FLAG, flagLines, parseFlags, type Flag } from './flags.js';

const FLAGS: Flag[] = [
  { name: 'tasks', value: 'N', help: `tasks played per split and toolset, spread over each, or "all" (default ${CHECK_TASKS_PER_GROUP})` },
  { name: 'split', value: 'S', help: 'play only this split (default: every split)' },
  { name: 'static', help: 'check the files only: no Docker, nothing played' },
  { name: 'build-arg', value: 'KEY=VALUE', multiple: true, help: 'build argument for the env images (repeatable; also OPENENV_BUILD_ARG)' },
  { name: 'concurrency', value: 'N', help: `envs running at once (default ${CHECK_CONCURRENCY})` },
  { name: 'json', help: 'print the result as one JSON object on stdout' },
  HELP_FLAG,
];

export const CHECK_USAGE = [
  'Usage: openenv-bundle check DIR [options]',
  '',
  'Checks a bundle (a folder or a .tar.gz) before training. Static: the manifest and task rows (as',
  "the server loads them), every tool's input_schema compiles as JSON Schema, the score the reward",
  "names is declared, every golden solution is well-formed calls of its task's tools. Dynamic, on",
  "Docker through the server's own machinery: builds every env image, then for a sample of tasks",
  'plays the golden solution (each score must reach its declared max), the empty solution (end_turn',
  'on every turn: at most the declared floor, never an env failure), the same task and seed twice',
  '(the same results, unless bundle.json says "ignores_seed"), and one call per tool that violates',
  "its schema (must be the model's error, the episode going on); reports each env's deploy time.",
  '',
  'Options:',
  ...flagLines(FLAGS),
  '',
  'Exit codes: 0 no problem (warnings allowed), 1 problems found, 2 a command line to fix.',
].join('\n');

interface CheckArgs {
  dir: string;
  tasks: number | 'all';
  split?: string;
  staticOnly: boolean;
  buildArgs: Record<string, string>;
  concurrency: number;
  json: boolean;
}

function parse(argv: string[], env: NodeJS.ProcessEnv): CheckArgs {
  const { positionals, values } = parseFlags(argv, FLAGS, { min: 1, max: 1, names: 'the bundle folder (DIR)' });
  const tasksText = (values.tasks as string | undefined) ?? String(CHECK_TASKS_PER_GROUP);
  const tasks = tasksText === 'all' ? 'all' : Number(tasksText);
  if (tasks !== 'all' && !(Number.isInteger(tasks) && tasks >= 1))
    throw new UsageError(`--tasks must be a whole number ≥ 1 or "all", got ${JSON.stringify(tasksText)}`);
  const concurrency = Number((values.concurrency as string | undefined) ?? CHECK_CONCURRENCY);
  if (!(Number.isInteger(concurrency) && concurrency >= 1))
    throw new UsageError(`--concurrency must be a whole number ≥ 1, got ${JSON.stringify(values.concurrency)}`);
  const list = [...(env.OPENENV_BUILD_ARG ?? '').split(/\s+/).filter(Boolean), ...((values['build-arg'] as string[] | undefined) ?? [])];
  for (const kv of list) if (!/^[A-Za-z_][A-Za-z0-9_]*=/.test(kv)) throw new UsageError(`--build-arg expects KEY=VALUE, got ${JSON.stringify(kv)}`);
  return {
    dir: positionals[0] as string,
    tasks,
    split: values.split as string | undefined,
    staticOnly: values.static === true,
    buildArgs: buildArgRecord(list),
    concurrency,
    json: values.json === true,
  };
}

/** `[#########-----------]  9/20 playing tasks`, redrawn in place on a terminal. */
function progressBar(io: CliIo): ((done: number, total: number, what: string) => void) | undefined {
  if (!io.stderr.isTTY) return undefined;
  return (done, total, what) => {
    const width = 30;
    const filled = total === 0 ? 0 : Math.round((done / total) * width);
    io.stderr.write(
      `\r[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${done}/${total} ${what}\x1b[K${done === total && what !== 'building env images' ? '\n' : ''}`,
    );
  };
}

function summary(dir: string, staticLine: string, dyn: DynamicResult | null, findings: Finding[]): string {
  const problems = findings.filter((f) => f.level === 'problem');
  const warnings = findings.filter((f) => f.level === 'warning');
  const lines = [`check ${dir}`, `  files: ${staticLine}`];
  if (dyn) {
    lines.push(`  images: ready in ${dyn.images_s.toFixed(1)} s`);
    lines.push(
      `  played ${dyn.tasks_checked} task(s) in ${dyn.episodes} episode(s): golden at max ${dyn.golden.passed}/${dyn.golden.played}, empty at or under the floor ${dyn.empty.passed}/${dyn.empty.played}`,
    );
    for (const e of dyn.envs)
      lines.push(`  env ${e.env}: deploy + /reset mean ${e.mean_s.toFixed(3)} s, max ${e.max_s.toFixed(3)} s over ${e.deploys} deploy(s)`);
  }
  const shown = 15;
  for (const f of [...problems, ...warnings].slice(0, shown)) lines.push(`  ${formatFinding(f).replace(/\n/g, '\n  ')}`);
  if (problems.length + warnings.length > shown) lines.push(`  … ${problems.length + warnings.length - shown} more (--json lists them all)`);
  lines.push(
    problems.length === 0
      ? `ok: no problem${warnings.length ? `, ${warnings.length} warning(s)` : ''}`
      : `${problems.length} problem(s), ${warnings.length} warning(s)`,
  );
  return lines.join('\n');
}

export async function runCheck(argv: string[], io: CliIo): Promise<number> {
  let args: CheckArgs;
  try {
    args = parse(argv, io.env);
  } catch (e) {
    if (e instanceof UsageError) {
      io.stderr.write(`error: ${e.message}\n\n${CHECK_USAGE}\n`);
      return EXIT.usage;
    }
    throw e;
  }
  const st = await checkStatic(args.dir);
  const findings: Finding[] = [...st.findings.list];
  let dyn: DynamicResult | null = null;
  let staticLine = 'the bundle does not load';
  if (st.bundle) {
    const b = st.bundle;
    const tools = Object.values(b.manifest.toolsets).reduce((n, t) => n + t.tools.length, 0);
    staticLine = `${b.byId.size} task(s) in ${Object.keys(b.splits).length} split(s), ${Object.keys(b.manifest.toolsets).length} toolset(s), ${tools} tool(s)`;
    if (args.split !== undefined && !Object.hasOwn(b.splits, args.split)) {
      io.stderr.write(`error: --split ${args.split}: the bundle's splits are ${Object.keys(b.splits).join(', ')}\n`);
      await b.cleanup();
      return EXIT.usage;
    }
    // Ctrl-C or a stop: tear down what was deployed, then report
    const interrupt = new AbortController();
    const onSignal = () => interrupt.abort();
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    try {
      if (!args.staticOnly && st.findings.problems.length === 0) {
        dyn = await checkDynamic(b, st.validators, {
          tasks: args.tasks,
          split: args.split,
          buildArgs: args.buildArgs,
          concurrency: args.concurrency,
          onProgress: args.json ? undefined : progressBar(io),
          signal: interrupt.signal,
        });
        findings.push(...dyn.findings.list);
      }
    } catch (e) {
      findings.push({ level: 'problem', where: 'docker', message: `the bundle could not be played: ${(e as Error).message}` });
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      await b.cleanup();
    }
  }
  const problems = findings.filter((f) => f.level === 'problem').length;
  if (args.json) {
    io.stdout.write(
      `${JSON.stringify({
        ok: problems === 0,
        bundle: args.dir,
        files: staticLine,
        problems: findings.filter((f) => f.level === 'problem'),
        warnings: findings.filter((f) => f.level === 'warning'),
        played: dyn && {
          instance: dyn.instance,
          images_s: dyn.images_s,
          tasks: dyn.tasks_checked,
          episodes: dyn.episodes,
          golden: dyn.golden,
          empty: dyn.empty,
          envs: dyn.envs,
        },
      })}\n`,
    );
  } else {
    io.stdout.write(`${summary(args.dir, staticLine, dyn, findings)}\n`);
  }
  return problems === 0 ? EXIT.ok : EXIT.problems;
}

export const checkCommand: Subcommand = {
  name: 'check',
  summary: 'check a bundle: its files, then its golden and empty solutions, seeds and schemas on Docker',
  usage: CHECK_USAGE,
  run: runCheck,
};
