/** `openenv-bundle check DIR [options]`: everything that can be known about a bundle before training. */
import { z } from 'zod';
import { buildArgRecord, buildArgsSchema, SERVER_OPTIONS } from '../config.js';
import { CHECK_CONCURRENCY, CHECK_INSTANCE_PREFIX, CHECK_TASKS_PER_GROUP } from '../defaults.js';
import { checkDynamic, type DynamicResult, type PlayTally } from '../authoring/check/run.js';
import { checkStatic, type StaticResult } from '../authoring/check-static.js';
import { formatGroup, groupFindings, type Finding } from '../authoring/findings.js';
import { defineCommand, EXIT, stopOnInterrupt } from './command.js';
import { UsageError } from './options.js';
import { exitWith } from './process-entry.js';
import { progressBar } from './progress.js';
import { jsonLine, visible } from './terminal-text.js';

/** finding groups the summary shows; --json lists every finding */
const SHOWN = 15;

const f3 = (x: number | null) => (x === null ? '–' : x.toFixed(3));

/** `reward 1.000 (correct 1.000, format 0.500)` */
function means(t: PlayTally): string {
  const scores = Object.entries(t.scores).map(([k, v]) => `${k} ${f3(v)}`);
  return `reward ${f3(t.reward)}${scores.length ? ` (${scores.join(', ')})` : ''}`;
}

/** What an env ran with, in one line: its runtime, what it was granted beyond the defaults, its root and user, and what the engine could not enforce. */
export function grantLine(g: DynamicResult['granted'][string]): string {
  const parts = [
    `locked down under ${g.runtime}`,
    g.added.length ? `capabilities the defaults and ${g.added.join(', ')}` : 'default capabilities',
    g.root === 'read-only' ? `read-only root (/tmp ${g.tmp_mb} MB)` : 'writable root',
    g.user ? `user ${g.user}` : "the image's user",
    g.storage_mb !== null ? `storage ${g.storage_mb} MB` : 'no storage bound',
    g.max_files !== null ? `max files ${g.max_files}` : 'no file bound',
  ];
  return parts.join(', ') + (g.not_enforced.length ? `; not enforced here: ${g.not_enforced.join('; ')}` : '');
}

/** What a check found: the object --json prints, and what the summary is read from. */
export interface CheckReport {
  ok: boolean;
  bundle: string;
  /** what the files hold, or why they do not load */
  files: string;
  problems: Finding[];
  warnings: Finding[];
  /** env → what its bundle.json grants it (check-static.ts), played or not; `played.granted` is what the engine gave */
  granted: StaticResult['granted'];
  played: {
    instance: string;
    images_s: number;
    tasks: number;
    episodes: number;
    /** seconds the plays took (images ready to the last play's end), and envs at once */
    plays_s: number;
    concurrency: number;
    golden: PlayTally;
    empty: PlayTally;
    envs: DynamicResult['envs'];
    granted: DynamicResult['granted'];
  } | null;
}

export function checkReport(
  dir: string,
  files: string,
  findings: readonly Finding[],
  dyn: DynamicResult | null,
  grants: StaticResult['granted'] = {},
): CheckReport {
  const problems = findings.filter((f) => f.level === 'problem');
  return {
    ok: problems.length === 0,
    bundle: dir,
    files,
    problems,
    warnings: findings.filter((f) => f.level === 'warning'),
    granted: grants,
    played: dyn && {
      instance: dyn.instance,
      images_s: dyn.images_s,
      tasks: dyn.tasks_checked,
      episodes: dyn.episodes,
      plays_s: dyn.plays_s,
      concurrency: dyn.concurrency,
      golden: dyn.golden,
      empty: dyn.empty,
      envs: dyn.envs,
      granted: dyn.granted,
    },
  };
}

/** The report as a person reads it: what was played and its means, then the findings, identical ones grouped, distinct ones first. */
export function formatCheck(r: CheckReport): string {
  const lines = [`check ${r.bundle}`, `  files: ${r.files}`];
  const p = r.played;
  if (p) {
    lines.push(`  images: ready in ${p.images_s.toFixed(1)} s`);
    lines.push(
      `  played ${p.tasks} task(s) in ${p.episodes} episode(s): golden at max ${p.golden.passed}/${p.golden.played}, empty at or under the floor ${p.empty.passed}/${p.empty.played}`,
    );
    lines.push(
      `  plays: ${p.episodes} episode(s) in ${p.plays_s.toFixed(1)} s, ${(p.plays_s > 0 ? p.episodes / p.plays_s : 0).toFixed(1)} episode(s)/s, ${p.concurrency} env(s) at once`,
    );
    if (p.golden.played) lines.push(`  golden solutions: mean ${means(p.golden)}`);
    if (p.empty.played) lines.push(`  empty solutions: mean ${means(p.empty)}`);
    for (const e of p.envs) {
      const reused =
        e.reused_mean_s === null ? '' : `; /reset on a reused container mean ${e.reused_mean_s.toFixed(3)} s over ${e.reused} episode(s) (clean_reset)`;
      lines.push(`  env ${e.env}: deploy + /reset mean ${e.mean_s.toFixed(3)} s, max ${e.max_s.toFixed(3)} s over ${e.deploys} deploy(s)${reused}`);
    }
    for (const [env, g] of Object.entries(p.granted)) lines.push(`  env ${env}: ${grantLine(g)}`);
  } else {
    // not played: what bundle.json grants each env
    for (const [env, g] of Object.entries(r.granted)) lines.push(`  env ${env}: ${grantLine(g)}`);
  }
  const groups = groupFindings([...r.problems, ...r.warnings]);
  for (const g of groups.slice(0, SHOWN)) lines.push(`  ${formatGroup(g).replace(/\n/g, '\n  ')}`);
  if (groups.length > SHOWN) lines.push(`  … ${groups.length - SHOWN} more (--json lists them all)`);
  lines.push(
    r.problems.length === 0
      ? `ok: no problem${r.warnings.length ? `, ${r.warnings.length} warning(s)` : ''}`
      : `${r.problems.length} problem(s), ${r.warnings.length} warning(s)`,
  );
  return lines.join('\n');
}

export const checkCommand = defineCommand({
  name: 'check',
  summary: 'check a bundle: its files, then its golden and empty solutions, seeds and schemas on Docker',
  synopsis: 'DIR [options]',
  about: [
    'Checks a bundle (a folder or a .tar.gz) before training. Static: the manifest and task rows (as',
    "the server loads them), every tool's input_schema compiles as JSON Schema, the score the reward",
    "names is declared, every golden solution is well-formed calls of its task's tools. Dynamic, on",
    "Docker through the server's own machinery: builds every env image, then for a sample of tasks",
    'plays the golden solution (each score must reach its declared max, every step without an',
    'error), the empty solution (end_turn on every turn: at most the declared floor, never an env',
    'failure), the same task and seed twice (the same results, unless bundle.json says',
    '"ignores_seed"), and one call per tool that violates its schema (must be the model\'s error, the',
    "episode going on); reports each env's deploy time and the mean reward and scores of each kind",
    'of play. The same finding in many tasks is one line. An env that says "clean_reset" plays its',
    'tasks on a few containers reset between plays; a play failing on a reused one is played again',
    'on a fresh one, and a share of the others too, which must give the same results. A harness',
    'task (its episode offers only wait) is played through the model gateway with a scripted model',
    "check starts on 127.0.0.1: golden = the golden steps as the shipped harness's bash calls, empty =",
    '"done" at once; with another harness command it plays the empty run only and says so',
    '(docs/gateway.md, "checking a harness task").',
  ],
  positionals: { dir: { name: 'DIR', schema: z.string().min(1), help: 'the bundle folder or .tar.gz' } },
  options: {
    tasks: {
      schema: z.union([z.literal('all'), z.coerce.number().int().positive()]).default(CHECK_TASKS_PER_GROUP),
      value: 'N|all',
      help: 'tasks played per split and toolset, spread over each, or all',
    },
    split: { schema: z.string().min(1).optional(), value: 'S', help: 'play only this split', shownDefault: 'every split' },
    static: { schema: z.boolean().default(false), help: 'check the files only: no Docker, nothing played' },
    buildArg: {
      schema: buildArgsSchema,
      value: 'KEY=VALUE',
      repeatable: true,
      help: 'build argument for the env images (repeatable), e.g. PYTHON_IMAGE=openenv-local/python:3 offline',
      env: ['OPENENV_BUILD_ARG'],
    },
    concurrency: { schema: z.coerce.number().int().positive().default(CHECK_CONCURRENCY), value: 'N', help: 'envs running at once' },
    freshEnvs: {
      schema: z.boolean().default(false),
      help: 'a fresh env for every episode, even where bundle.json says clean_reset',
    },
    imageBuildConcurrency: SERVER_OPTIONS.imageBuildConcurrency,
    instance: {
      ...SERVER_OPTIONS.instance,
      schema: SERVER_OPTIONS.instance.schema.removeDefault().optional(),
      help: "serve's --instance: the name labelled on every container and network check creates (all removed when it ends); a live server's name is refused",
      shownDefault: `${CHECK_INSTANCE_PREFIX} and a random suffix`,
    },
    subnetPool: SERVER_OPTIONS.subnetPool,
    json: { schema: z.boolean().default(false), help: 'print the result as one JSON object on stdout' },
  },
  footer: ['Exit codes: 0 no problem (warnings allowed), 1 problems found, 2 a command line to fix.'],
  async run(args, io) {
    const st = await checkStatic(args.dir);
    const findings: Finding[] = [...st.findings.list];
    let dyn: DynamicResult | null = null;
    let staticLine = 'the bundle does not load';
    if (st.bundle) {
      const b = st.bundle;
      const tools = Object.values(b.manifest.toolsets).reduce((n, t) => n + t.tools.length, 0);
      staticLine = `${b.byId.size} task(s) in ${Object.keys(b.splits).length} split(s), ${Object.keys(b.manifest.toolsets).length} toolset(s), ${tools} tool(s)`;
      if (args.split !== undefined && !Object.hasOwn(b.splits, args.split)) {
        await b.cleanup();
        throw new UsageError(`--split ${args.split}: the bundle's splits are ${Object.keys(b.splits).join(', ')}`);
      }
      // Ctrl-C or a stop: tear down what was deployed, then report; a second Ctrl-C leaves at once
      const stop = stopOnInterrupt(io, (second) => {
        if (second) exitWith(130);
      });
      const bar = progressBar(args.json ? { isTTY: false, write: () => undefined } : io.stderr);
      try {
        if (!args.static && st.findings.problems.length === 0) {
          dyn = await checkDynamic(b, st.validators, {
            tasks: args.tasks,
            split: args.split,
            buildArgs: buildArgRecord(args.buildArg),
            concurrency: args.concurrency,
            freshEnvs: args.freshEnvs,
            imageBuildConcurrency: args.imageBuildConcurrency,
            instance: args.instance,
            subnetPool: args.subnetPool,
            onProgress: (done, total, what) => bar.update(done, total, what),
            signal: stop.signal,
          });
          findings.push(...dyn.findings.list);
        }
      } catch (e) {
        findings.push({ level: 'problem', where: 'docker', message: `the bundle could not be played: ${(e as Error).message}` });
      } finally {
        bar.end();
        stop.dispose();
        await b.cleanup();
      }
    }
    const report = checkReport(args.dir, staticLine, findings, dyn, st.granted);
    io.stdout.write(`${args.json ? jsonLine(report) : visible(formatCheck(report))}\n`);
    return report.ok ? EXIT.ok : EXIT.problems;
  },
});
