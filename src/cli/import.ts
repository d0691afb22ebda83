/** `openenv-bundle import harbor SRC… --out DIR`: Harbor tasks as a bundle (docs/harbor.md). */
import { z } from 'zod';
import { engineHasImages, IMAGE_CHOICES, ImportError, importHarbor, parseBaseImageRule, type ImportResult } from '../authoring/harbor/index.js';
import { defineCommand, EXIT } from './command.js';
import { UsageError } from './options.js';
import { jsonLine, visible } from './terminal-text.js';

const FORMATS = ['harbor'] as const;

/** repeatable values, each of which may also be a comma-separated list */
const list = (values: readonly string[]) =>
  values
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter(Boolean);

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
  } else {
    const bases = r.missingImages.filter((m) => m.kind === 'base');
    const own = r.missingImages.filter((m) => m.kind === 'task');
    if (bases.length) lines.push('base images the Docker engine does not have (the builds need them):');
    for (const m of bases) lines.push(`  ${m.image}, for ${m.tasks.length} task(s): map it, e.g. --base-image ${m.image}=openenv-local/debian:bookworm`);
    // a task's own prebuilt image holds the task's files: never a bare base in its place
    if (own.length) lines.push("tasks' own prebuilt images (docker_image) the Docker engine does not have:");
    for (const m of own)
      lines.push(
        `  ${m.image}, for ${m.tasks.join(', ')}: the engine pulls it when the env starts (it needs its registry), or load it under that name (docker load); a task with environment/Dockerfile can build it instead (--images dockerfile)`,
      );
  }
  if (r.written) lines.push(`next: openenv-bundle check ${r.out} --static`);
  return lines.join('\n');
}

export const importCommand = defineCommand({
  name: 'import',
  summary: 'import tasks of another format (Harbor) as a bundle',
  synopsis: 'harbor SRC... --out DIR [options]',
  about: [
    'Writes Harbor tasks (the Terminal-Bench format; SRC is a task folder or a dataset folder of them)',
    "as a bundle: each task's environment/ becomes its own shell env (an image built by content hash),",
    "instruction.md its prompt, tests/ its verifier (copied to /tests only after the agent's turn),",
    'solution/solve.sh its golden solution (one bash call), [[steps]] its turns; task.toml maps to',
    'time budgets, timeouts, resources, workdir, env and task groups. A field that cannot be served',
    'refuses its task, naming it; one that changes nothing the agent or the grade sees is noted. Base',
    "images the engine does not have are named: map them with --base-image. A task's own docker_image",
    'is used when the engine has it, else its Dockerfile is built (--images). A compose file that changes',
    'only main (no network, environment, working_dir, healthcheck) is taken. The images build without',
    "network (--build-with-network trusts the Dockerfiles with it). Only the tasks' own files and",
    'folders are read: a link, FIFO, socket or device among them refuses the task, naming it.',
  ],
  positionals: {
    format: {
      name: 'FORMAT',
      schema: z.enum(FORMATS, { errorMap: () => ({ message: `the formats are ${FORMATS.join(', ')}` }) }),
      help: "the tasks' format: harbor",
    },
    sources: { name: 'SRC', schema: z.array(z.string().min(1)).min(1), help: 'a Harbor task folder or a dataset folder of them', variadic: true },
  },
  options: {
    out: { schema: z.string().min(1), value: 'DIR', short: 'o', help: 'the bundle folder to write (must not exist, or be empty)' },
    name: { schema: z.string().min(1).optional(), value: 'NAME', shownDefault: "DIR's name", help: "the bundle's name" },
    version: { schema: z.string().min(1).default('1.0.0'), value: 'V', help: "the bundle's version" },
    baseImage: {
      schema: z.array(z.string()).default([]),
      value: 'FROM=LOCAL',
      repeatable: true,
      help: 'build FROM the local image LOCAL where a Dockerfile names FROM (repository[:tag]; a pinned digest is set aside); repeatable',
    },
    eval: {
      schema: z.array(z.string()).default([]),
      value: 'TASK',
      repeatable: true,
      help: 'put this task in the eval split (repeatable, or comma-separated)',
    },
    evalShare: {
      schema: z.coerce.number().min(0).max(1).optional(),
      value: 'F',
      shownDefault: 'all train',
      help: 'put this share of the tasks (0–1, chosen by a hash of their ids) in the eval split',
    },
    agent: {
      schema: z.string().min(1).optional(),
      value: 'CMD',
      help: "the harness the server runs in each task's env (the bundle's harness: sh -c CMD, with the instruction in $OPENENV_INSTRUCTION_FILE); e.g. 'python3 /tmp/openenv/openenv_harness.py', the shipped one",
    },
    images: {
      schema: z.enum(IMAGE_CHOICES, { errorMap: () => ({ message: `expected one of ${IMAGE_CHOICES.join(', ')}` }) }).default('auto'),
      value: 'HOW',
      help: 'a task naming both [environment] docker_image and environment/Dockerfile: auto uses the image when the engine has it, else builds the Dockerfile; prebuilt always uses the image (the engine pulls it at serve time); dockerfile always builds the Dockerfile',
    },
    ignoreInternet: { schema: z.boolean().default(false), help: 'import tasks that allow the internet anyway: they run without it' },
    buildWithNetwork: {
      schema: z.boolean().default(false),
      help: "build the tasks' images with the engine's network (for Dockerfiles that install packages; their RUN steps then reach the host's services too); default: without network",
    },
    skipRefused: { schema: z.boolean().default(false), help: 'import the tasks that can be, leaving out the refused ones (listed)' },
    force: { schema: z.boolean().default(false), help: 'replace DIR when it holds a bundle' },
    json: { schema: z.boolean().default(false), help: 'print the result as one JSON object on stdout' },
  },
  footer: ['Exit codes: 0 written, 1 a task refused (nothing written unless --skip-refused), 2 a command line to fix.'],
  async run(args, io) {
    const evalTasks = list(args.eval);
    if (args.evalShare !== undefined && evalTasks.length) throw new UsageError('--eval and --eval-share choose the eval split two ways: give one');
    let baseImages;
    try {
      baseImages = list(args.baseImage).map(parseBaseImageRule);
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
    let result: ImportResult;
    try {
      result = await importHarbor({
        sources: args.sources,
        out: args.out,
        version: args.version,
        ...(args.name !== undefined ? { name: args.name } : {}),
        ...(args.evalShare !== undefined ? { evalShare: args.evalShare } : {}),
        evalTasks,
        baseImages,
        ...(args.agent !== undefined ? { agent: args.agent } : {}),
        images: args.images,
        ignoreInternet: args.ignoreInternet,
        buildWithNetwork: args.buildWithNetwork,
        skipRefused: args.skipRefused,
        force: args.force,
        hasImages: engineHasImages,
      });
    } catch (e) {
      // a source or DIR to fix is the command line's
      if (e instanceof ImportError) throw new UsageError(e.message);
      throw e;
    }
    io.stdout.write(args.json ? `${jsonLine(result)}\n` : `${visible(report(result))}\n`);
    return result.written ? EXIT.ok : EXIT.problems;
  },
});
