/**
 * Generates bundles/gridsim-v1: tasks/{train,eval,wiring}.jsonl, bundle.json and README.md.
 * Byte-for-byte deterministic: every draw comes from the seeded PRNG of
 * bundles/gridsim-v1/envs/gridsim/src/prng.ts,
 * keyed by a fixed string, and nothing depends on the clock, the machine or Math.random.
 *
 *   npx tsx scripts/gridsim/generate.ts [--out <dir>]     (default: bundles/gridsim-v1)
 *
 * The env image's app/server.mjs is built separately by scripts/gridsim/build-env.ts.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ARCHETYPES, DURATIONS, toInt, type Battery } from '../../bundles/gridsim-v1/envs/gridsim/src/battery.js';
import { optimize } from '../../bundles/gridsim-v1/envs/gridsim/src/optimum.js';
import { fromCents, moneyToUsd } from '../../bundles/gridsim-v1/envs/gridsim/src/physics.js';
import { Rng } from '../../bundles/gridsim-v1/envs/gridsim/src/prng.js';
import { firstPrompt, parseTaskData, seasonOf, SYSTEM_PROMPT, weekdayOf, type TaskData } from '../../bundles/gridsim-v1/envs/gridsim/src/task.js';
import { TOOLS } from '../../bundles/gridsim-v1/envs/gridsim/src/tools.js';
import { dayPricesCents, datesBetween, FIRST_DATE, LAST_DATE, POINTS } from './prices.js';
import { baseline, formatReport, SPIKE_USD } from './stats.js';

export const TRAIN_SIZE = 2000;
export const SEASONS = ['winter', 'spring', 'summer', 'fall'] as const;
/**
 * Eval days per (duration, season): 67/67/66 per duration and 50 per season, 200 in all.
 */
export const EVAL_CELLS: Record<number, Record<(typeof SEASONS)[number], number>> = {
  1: { winter: 17, spring: 17, summer: 17, fall: 16 },
  2: { winter: 17, spring: 17, summer: 16, fall: 17 },
  4: { winter: 16, spring: 16, summer: 17, fall: 17 },
};
export const WIRING_KINDS = ['optimal', 'idle', 'infeasible', 'no_submit'] as const;

type Point = (typeof POINTS)[number];

export interface TaskRowOut {
  task_id: string;
  toolset: string;
  system_prompt: string;
  turns: string[];
  data: TaskData;
  meta: Record<string, unknown>;
  /** the stored optimal schedule, submitted: what `openenv-bundle check` plays and expects 1 from */
  golden: { tool: string; arguments: Record<string, unknown> }[];
}

/** A day qualifies when its optimum is at least $0.5 per MWh of capacity (score never divides by ~0). */
function qualifies(optimumMoney: number, battery: Battery): boolean {
  const energyKwh = Math.round(battery.energy_mwh * 1000);
  return optimumMoney >= energyKwh * 5_000; // 0.5 $/MWh · kWh/1000 · 10^7 money units per $
}

/** The task of (date, point, battery), or null when the day does not qualify. */
export function makeTask(date: string, point: Point, battery: Battery, extraMeta: Record<string, unknown> = {}): TaskRowOut | null {
  const cents = dayPricesCents(date, point);
  const opt = optimize(toInt(battery), cents);
  if (!qualifies(opt.profit, battery)) return null;
  const data: TaskData = {
    date,
    point,
    battery,
    prices: cents.map(fromCents),
    optimum_profit: moneyToUsd(opt.profit),
    optimal_schedule: opt.schedule,
  };
  const task = parseTaskData(data); // the row must pass the env's own validation
  const max = Math.max(...cents);
  return {
    task_id: `dam-v1-${date}-${point}-${battery.id}`,
    toolset: 'gridsim',
    system_prompt: SYSTEM_PROMPT,
    turns: [firstPrompt(task)],
    data,
    meta: {
      season: seasonOf(date),
      year: Number(date.slice(0, 4)),
      weekday: weekdayOf(date),
      point,
      battery: battery.id,
      duration_h: battery.hours,
      spike: max >= SPIKE_USD * 100,
      max_price: fromCents(max),
      min_price: fromCents(Math.min(...cents)),
      negative_hours: cents.filter((c) => c < 0).length,
      synthetic: true,
      ...extraMeta,
    },
    golden: [{ tool: 'submit_schedule', arguments: { schedule: opt.schedule } }],
  };
}

function shuffle<T>(rng: Rng, xs: T[]): T[] {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = rng.int(0, i);
    [xs[i], xs[j]] = [xs[j] as T, xs[i] as T];
  }
  return xs;
}

export interface Generated {
  train: TaskRowOut[];
  eval: TaskRowOut[];
  wiring: TaskRowOut[];
}

export function generateTasks(): Generated {
  const dates = [...datesBetween(FIRST_DATE, LAST_DATE)];
  const datesBySeason = Object.fromEntries(SEASONS.map((s) => [s, dates.filter((d) => seasonOf(d) === s)])) as Record<(typeof SEASONS)[number], string[]>;
  const byDuration = new Map<number, Battery[]>(DURATIONS.map((h) => [h, ARCHETYPES.filter((b) => b.hours === h)]));
  /** date × point pairs already used: no pair appears twice in the bundle */
  const used = new Set<string>();
  const draw = (rng: Rng, datePool: string[], batteries: Battery[], extraMeta?: Record<string, unknown>): TaskRowOut => {
    for (;;) {
      const date = rng.pick(datePool);
      const point = rng.pick(POINTS);
      const battery = rng.pick(batteries);
      const key = `${date}|${point}`;
      if (used.has(key)) continue;
      const row = makeTask(date, point, battery, extraMeta);
      if (!row) continue;
      used.add(key);
      return row;
    }
  };

  const evalRng = new Rng('gridsim-v1/eval');
  const evalRows: TaskRowOut[] = [];
  for (const h of DURATIONS) {
    for (const season of SEASONS) {
      const n = EVAL_CELLS[h]?.[season] ?? 0;
      for (let i = 0; i < n; i++) evalRows.push(draw(evalRng, datesBySeason[season], byDuration.get(h) ?? []));
    }
  }
  shuffle(evalRng, evalRows); // any prefix of eval is then a fair sample

  const wiringRng = new Rng('gridsim-v1/wiring');
  const wiring = WIRING_KINDS.map((kind) => draw(wiringRng, dates, byDuration.get(1) ?? [], { wiring: kind }));

  const trainRng = new Rng('gridsim-v1/train');
  const train: TaskRowOut[] = [];
  for (let i = 0; i < TRAIN_SIZE; i++) train.push(draw(trainRng, dates, [...ARCHETYPES]));
  return { train, eval: evalRows, wiring };
}

/** the scores the README reports, four decimals, as the splits' baselines the console draws */
function baselines(g: Generated): Record<string, { idle: number; greedy: number; optimum: number }> {
  const four = (x: number) => Number(x.toFixed(4));
  const of = (rows: readonly TaskRowOut[]) => {
    const b = baseline(rows);
    return { idle: four(b.idle), greedy: four(b.greedy), optimum: four(b.optimum) };
  };
  return { eval: of(g.eval), train: of(g.train) };
}

export function manifest(g: Generated): Record<string, unknown> {
  return {
    name: 'gridsim-v1',
    version: '1.0.0',
    description: 'One grid battery, one day of synthetic ERCOT-like day-ahead prices: schedule it.',
    default_split: 'train',
    splits: { train: 'tasks/train.jsonl', eval: 'tasks/eval.jsonl', wiring: 'tasks/wiring.jsonl' },
    envs: {
      gridsim: {
        build: 'envs/gridsim',
        port: 8000,
        ready_path: '/health',
        deploy_timeout_s: 60,
        resources: { memory_mb: 256, cpus: 0.5, pids: 128 },
        environment: { LOG_LEVEL: 'info' },
        // its /reset replaces its one episode object: check plays its tasks on reused containers
        clean_reset: true,
      },
    },
    toolsets: { gridsim: { env: 'gridsim', tools: TOOLS } },
    max_turns: 4,
    reward: 'mean',
    groups: { battery_h: 'meta.duration_h', point: 'meta.point', season: 'meta.season' },
    baselines: baselines(g),
    // the optimum scores 1, idling all day 0.2; ending every turn without a call submits nothing: 0
    scores: { schedule: { min: 0, max: 1, floor: 0.2 } },
    // a task is one fixed day: /reset's seed changes nothing
    ignores_seed: true,
  };
}

export function readme(g: Generated): string {
  const report = formatReport(g.eval, g.train);
  return `GridSim v1: schedule one grid battery for one day of synthetic, ERCOT-like day-ahead prices, graded against the day's exact optimum.

# gridsim-v1

Each task runs one grid battery for one day in an ERCOT-like day-ahead market. The model reads the
day's 24 hourly prices and the battery's limits, and submits a schedule: one integer per hour, to
charge (buy), sell or idle. The env grades it against the day's exact optimum.

- **Splits**: \`train\` (${g.train.length} days), \`eval\` (${g.eval.length} days, stratified evenly over 1-, 2- and 4-hour
  batteries and the four seasons), \`wiring\` (${g.wiring.length} days for the end-to-end wiring test; \`meta.wiring\`
  says what the test submits: the stored optimal schedule, all zeros, an infeasible schedule, nothing).
  No date × settlement point appears twice in the bundle. Task ids read
  \`dam-v1-<date>-<point>-<hours>h-<letter>\`.
- **Batteries**: 78 fixed archetypes, {1h, 2h, 4h} × a–z (\`2h-a\` is 90/90 MW, unit 30 MWh, k 3/3, 180 MWh,
  eta 0.85, c_deg $4/MWh, cycle cap 12 units, starting and ending empty). Each task's prompt shows its table.
- **Schedule**: 24 integers, hour ending 1…24, each in \`[-k_dis, +k_ch]\`: positive charges (buys) that many
  units, negative sells, 0 idles. \`3.0\` counts as 3; a JSON string holding the array is accepted too.
- **Physics**: the charge starts at \`s0\`, moves by each hour's action, must stay in \`[0, soc_levels]\`, end at
  least at \`s_end_min\`, and the units sold in the day are capped. Charging costs \`p·a·unit_mwh\`; selling
  earns \`(eta·p − c_deg)·|a|·unit_mwh\`. Money is computed exactly in integers (cents, percent, kWh).

## Tools (toolset \`gridsim\`, at most ${4} turns)

- \`get_situation()\`: the date, settlement point, battery table, prices and rules as text (also in the first prompt).
- \`check_schedule(schedule)\`: at most 3 uses: the hour-by-hour charge trace, cash flow, total profit and the
  first rule broken. Never the optimum or a score.
- \`submit_schedule(schedule)\`: grades once and ends the episode with \`scores: {"schedule": s}\`; later calls
  are refused. A malformed schedule is reported as the model's error and the episode goes on.
- An episode that ends without a submission scores 0.
- Each task row carries its stored optimal schedule as its \`golden\` solution (one \`submit_schedule\` call), which
  \`openenv-bundle check\` plays and expects 1 from; it is never shown to a model. \`bundle.json\` declares the score
  \`schedule\` in [0, 1] with floor 0.2, and that the env ignores seeds (a task is one fixed day).

## Score

0 with no submission or an infeasible one; otherwise \`clamp(0.2 + 0.8 · profit / optimum, 0, 1)\`, rounded to 6
decimals. Idling is exactly 0.2 and the optimum exactly 1. The optimum is a dynamic program over (hour, charge,
units sold); only days whose optimum is at least $0.5 per MWh of capacity are kept.

## Baseline

GridSim's greedy rule pairs the i-th cheapest hour (charge at \`k_ch\`) with the i-th dearest (sell at \`k_dis\`)
while \`eta·p_dear − c_deg > p_cheap\`, for at most ⌈soc_levels / min(k_ch, k_dis)⌉ pairs, then plays the wished
actions in time order, clipped to what the charge, the power and the cycle cap allow. On this bundle
(\`npx tsx scripts/gridsim/baseline.ts\`):

\`\`\`
${report}
\`\`\`

\`bundle.json\` declares these figures as the \`eval\` and \`train\` splits' baselines (idle, greedy, optimum), and
three task groups read from each task's \`meta\`: \`battery_h\` (the battery's duration: 1, 2 or 4 h), \`point\` (the
settlement point) and \`season\`. The web console draws the baselines on its reward charts and breaks rewards down
by group.

## Prices: synthetic, ERCOT-like

The prices are **synthetic**: real ERCOT data is not available offline and its redistribution falls under
ERCOT's terms, so a seeded generator (\`scripts/gridsim/prices.ts\`) makes them. They follow public facts about
ERCOT's day-ahead market: hourly prices; the floor of −$250/MWh and the offer cap of the date ($9,000 until
2021, $5,000 from 2022); around-the-clock averages of about $25–40 in most years (about $38 in 2019, North hub
about $55.50 in 2023 and $27.33 in 2024; 2022 high with natural-gas prices), higher in summer; overnight lows,
a winter morning peak, a midday solar dip that grows over the years, an evening net-load peak; negative hours
rare (1–2 % of hours) and concentrated at the West and Panhandle hubs at night and in spring middays;
occasional evening scarcity spikes to hundreds or thousands of $/MWh. Dates run from ${FIRST_DATE} to ${LAST_DATE}
over the 7 hubs and 8 load zones. Multi-day events such as Winter Storm Uri (February 2021) are not replayed.
The generator's shape and noise were calibrated once so that the greedy rule lands at 0.76 ± 0.02 on eval, then
frozen.

## Reproducing

\`\`\`
npm run gridsim:generate      # tasks/*.jsonl, bundle.json, README.md (byte-for-byte deterministic)
npm run gridsim:build-env     # envs/gridsim/app/server.mjs, bundled by esbuild from envs/gridsim/src
npm run gridsim:baseline      # the figures above
\`\`\`

Run them from the repository root (the scripts are in \`scripts/gridsim/\`). The env's TypeScript source lives with the
bundle, in \`envs/gridsim/src/*.ts\`: the same code that generated the tasks, imported by the generator and the
baseline. The env image (\`envs/gridsim\`) is a \`node:http\` server with no npm dependency: it runs
\`app/server.mjs\`, one ESM file that esbuild bundles from \`envs/gridsim/src/server.ts\` and everything it imports,
depending only on \`node:\` builtins. That file is committed; after changing \`envs/gridsim/src\`, rebuild it with
\`npm run gridsim:build-env\` (\`npm run gridsim:check-env\` and a test fail while it is stale). Its
\`.dockerignore\` sends only \`app/server.mjs\` and the Dockerfile to the engine, never the source. The Dockerfile
builds \`FROM \${NODE_IMAGE}\` (default \`node:20-slim\`); an offline machine passes
\`--build-arg NODE_IMAGE=<a local image with node>\`.

## Licence

Code (the env's \`src/\` and \`app/\`, and the generator in the repository): Apache-2.0. Generated task data
(\`tasks/*.jsonl\`): CC-BY-4.0. The prices are synthetic and contain no ERCOT data.
`;
}

export function writeBundle(outDir: string): { files: string[]; generated: Generated } {
  const g = generateTasks();
  const jsonl = (rows: TaskRowOut[]) => rows.map((r) => JSON.stringify(r)).join('\n') + '\n';
  const files: Record<string, string> = {
    'tasks/train.jsonl': jsonl(g.train),
    'tasks/eval.jsonl': jsonl(g.eval),
    'tasks/wiring.jsonl': jsonl(g.wiring),
    'bundle.json': JSON.stringify(manifest(g), null, 2) + '\n',
    'README.md': readme(g),
  };
  for (const [rel, text] of Object.entries(files)) {
    const path = join(outDir, rel);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, text);
  }
  return { files: Object.keys(files), generated: g };
}

export const GENERATED_FILES = ['tasks/train.jsonl', 'tasks/eval.jsonl', 'tasks/wiring.jsonl', 'bundle.json', 'README.md'];

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const at = args.indexOf('--out');
  const here = dirname(fileURLToPath(import.meta.url));
  const outArg = at >= 0 ? args[at + 1] : join(here, '../../bundles/gridsim-v1');
  if (outArg === undefined) throw new Error('--out needs a directory');
  const outDir = resolve(outArg);
  const t0 = process.hrtime.bigint();
  const { files, generated } = writeBundle(outDir);
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  process.stdout.write(
    `wrote ${files.join(', ')} to ${outDir}: ${generated.train.length} train, ${generated.eval.length} eval, ${generated.wiring.length} wiring tasks in ${(ms / 1000).toFixed(1)} s\n`,
  );
}
