/** `openenv-bundle import harbor SRC… --out DIR`: Harbor tasks as a bundle (docs/harbor.md). */
import { ImportError, engineHasImages, importHarbor, parseBaseImageRule, type ImportResult } from '../authoring/harbor/index.js';
import { BundleError } from '../bundle/index.js';
import { EXIT, UsageError, type CliIo, type Subcommand } from './command.js';
import { HELP_FLAG, flagLines, parseFlags, type Flag } from './flags.js';

const FORMATS = ['harbor'] as const;

const FLAGS: Flag[] = [
  { name: 'out', short: 'o', value: 'DIR', help: 'the bundle folder to write (must not exist, or be empty)' },
  { name: 'name', value: 'NAME', help: "the bundle's name (default: DIR's name)" },
  { name: 'version', value: 'V', help: "the bundle's version (default 1.0.0)" },
  {
    name: 'base-image',
    value: 'FROM=LOCAL',
    multiple: true,
    help: 'build FROM the local image LOCAL where a Dockerfile names FROM (repository[:tag]; a pinned digest is set aside); repeatable',
  },
  { name: 'eval', value: 'TASK', multiple: true, help: 'put this task in the eval split (repeatable, or comma-separated)' },
  { name: 'eval-share', value: 'F', help: 'put this share of the tasks (0–1, chosen by a hash of their ids) in the eval split (default: all train)' },
  { name: 'ignore-internet', help: 'import tasks that allow the internet anyway: they run without it' },
  { name: 'skip-refused', help: 'import the tasks that can be, leaving out the refused ones (listed)' },
  { name: 'force', help: 'replace DIR when it holds a bundle' },
  { name: 'json', help: 'print the result as one JSON object on stdout' },
  HELP_FLAG,
];

export const IMPORT_USAGE = [
  'Usage: openenv-bundle import harbor SRC... --out DIR [options]',
  '',
  'Writes Harbor tasks (the Terminal-Bench format; SRC is a task folder or a dataset folder of them)',
  "as a bundle: each task's environment/ becomes its own shell env (an image built by content hash),",
  "instruction.md its prompt, tests/ its verifier (copied to /tests only after the agent's turn),",
  'solution/solve.sh its golden solution (one bash call), [[steps]] its turns; task.toml maps to',
  'time budgets, timeouts, resources, workdir, env and task groups. A field that cannot be served',
  'refuses its task, naming it; one that changes nothing the agent or the grade sees is noted. Base',
  'images the engine does not have are named: map them with --base-image.',
  '',
  'Options:',
  ...flagLines(FLAGS),
  '',
  'Exit codes: 0 written, 1 a task refused (nothing written unless --skip-refused), 2 a command line to fix.',
].join('\n');

function list(values: unknown): string[] {
  return ((values as string[] | undefined) ?? [])
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter(Boolean);
}

function report(r: ImportResult): string {
  const lines: string[] = [];
  const counts = ['train', 'eval'].map((s) => [s, r.tasks.filter((t) => t.split === s).length] as const).filter(([, n]) => n > 0);
  if (r.written) {
    lines.push(`imported ${r.tasks.length} Harbor task(s) into ${r.out} (bundle ${r.bundle}): ${counts.map(([s, n]) => `${s} ${n}`).join(', ')}`);
    const multi = r.tasks.filter((t) => t.turns > 1).length;
    const noGolden = r.tasks.filter((t) => !t.golden).length;
    lines.push(
      `  ${r.tasks.length} env(s), one per task${multi ? `; ${multi} multi-step task(s)` : ''}${noGolden ? `; ${noGolden} without a golden solution` : ''}`,
    );
  } else {
    lines.push(`nothing written to ${r.out}`);
  }
  if (r.refused.length) {
    lines.push(`refused ${r.refused.length} task(s)${r.written ? ' (left out: --skip-refused)' : ' (import the others with --skip-refused)'}:`);
    for (const t of r.refused) for (const f of t.findings) lines.push(`  task ${t.id}: ${f.field}: ${f.message}`);
  }
  if (r.notes.length) {
    lines.push('notes:');
    for (const n of r.notes) {
      const who = n.tasks.length <= 3 ? n.tasks.join(', ') : `${n.tasks.slice(0, 3).join(', ')} and ${n.tasks.length - 3} more`;
      lines.push(`  ${n.field}: ${n.message} (${n.tasks.length === 1 ? 'task' : `${n.tasks.length} tasks:`} ${who})`);
    }
  }
  if (r.missingImages === null) {
    lines.push('base images: not checked (no Docker engine answers)');
  } else if (r.missingImages.length) {
    lines.push('base images the Docker engine does not have (the builds need them):');
    for (const m of r.missingImages)
      lines.push(`  ${m.image}, for ${m.tasks.length} task(s): map it, e.g. --base-image ${m.image}=openenv-local/debian:bookworm`);
  }
  if (r.written) lines.push(`next: openenv-bundle check ${r.out} --static`);
  return lines.join('\n');
}

export async function runImport(argv: string[], io: CliIo): Promise<number> {
  let opts;
  let json: boolean;
  try {
    const { positionals, values } = parseFlags(argv, FLAGS, { min: 2, max: Number.MAX_SAFE_INTEGER, names: 'the format (harbor) and at least one SRC' });
    const [format, ...sources] = positionals as [string, ...string[]];
    if (!(FORMATS as readonly string[]).includes(format))
      throw new UsageError(`unknown format ${JSON.stringify(format)}: the formats are ${FORMATS.join(', ')}`);
    const out = values.out as string | undefined;
    if (!out) throw new UsageError('--out DIR is required: the bundle folder to write');
    const shareText = values['eval-share'] as string | undefined;
    const evalShare = shareText === undefined ? undefined : Number(shareText);
    if (evalShare !== undefined && !(Number.isFinite(evalShare) && evalShare >= 0 && evalShare <= 1))
      throw new UsageError(`--eval-share must be a number from 0 to 1, got ${JSON.stringify(shareText)}`);
    const evalTasks = list(values.eval);
    if (evalShare !== undefined && evalTasks.length) throw new UsageError('--eval and --eval-share choose the eval split two ways: give one');
    let baseImages;
    try {
      baseImages = list(values['base-image']).map(parseBaseImageRule);
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
    json = values.json === true;
    opts = {
      sources,
      out,
      ...(values.name ? { name: values.name as string } : {}),
      ...(values.version ? { version: values.version as string } : {}),
      ...(evalShare !== undefined ? { evalShare } : {}),
      evalTasks,
      baseImages,
      ignoreInternet: values['ignore-internet'] === true,
      skipRefused: values['skip-refused'] === true,
      force: values.force === true,
      hasImages: engineHasImages,
    };
  } catch (e) {
    if (e instanceof UsageError) {
      io.stderr.write(`error: ${e.message}\n\n${IMPORT_USAGE}\n`);
      return EXIT.usage;
    }
    throw e;
  }
  let result: ImportResult;
  try {
    result = await importHarbor(opts);
  } catch (e) {
    if (e instanceof ImportError || e instanceof BundleError) {
      io.stderr.write(`error: ${e.message}\n`);
      return e instanceof ImportError ? EXIT.usage : EXIT.problems;
    }
    throw e;
  }
  io.stdout.write(json ? `${JSON.stringify(result)}\n` : `${report(result)}\n`);
  return result.written ? EXIT.ok : EXIT.problems;
}

export const importCommand: Subcommand = {
  name: 'import',
  summary: 'import tasks of another format (Harbor) as a bundle',
  usage: IMPORT_USAGE,
  run: runImport,
};
