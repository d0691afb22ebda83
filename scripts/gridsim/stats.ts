/**
 * Figures of the bundle, shared by baseline.ts (which prints them from the committed files) and
 * generate.ts (which writes them into the README): greedy, idle and optimum scores on the eval
 * split, and price statistics of the generated days. Everything is recomputed from each row's
 * `data` with the one core in bundles/gridsim-v1/envs/gridsim/src.
 */
import { greedySchedule } from '../../bundles/gridsim-v1/envs/gridsim/src/greedy.js';
import { simulate } from '../../bundles/gridsim-v1/envs/gridsim/src/physics.js';
import { scoreMillionths } from '../../bundles/gridsim-v1/envs/gridsim/src/score.js';
import { parseTaskData } from '../../bundles/gridsim-v1/envs/gridsim/src/task.js';

/** A day "has a spike" when some hour reaches this price, $/MWh. */
export const SPIKE_USD = 250;

export interface Row {
  task_id: string;
  data: unknown;
  meta?: Record<string, unknown>;
}

export interface Baseline {
  days: number;
  greedy: number;
  greedyByDuration: Record<string, { days: number; mean: number }>;
  idle: number;
  optimum: number;
  greedyLosingShare: number;
}

export interface PriceStats {
  days: number;
  hours: number;
  mean: number;
  median: number;
  p99: number;
  max: number;
  min: number;
  negativeShare: number;
  spikeDayShare: number;
}

/** mean of scores given in millionths, exact to the sum, as a number */
function meanMillionths(xs: number[]): number {
  return xs.reduce((a, b) => a + b, 0) / xs.length / 1_000_000;
}

export function baseline(rows: readonly Row[]): Baseline {
  const all: number[] = [];
  const idle: number[] = [];
  const opt: number[] = [];
  const byDuration = new Map<number, number[]>();
  let losing = 0;
  for (const row of rows) {
    const task = parseTaskData(row.data);
    const g = simulate(task.b, task.pricesCents, greedySchedule(task.b, task.pricesCents));
    if (g.violation) throw new Error(`${row.task_id}: the greedy schedule is infeasible: ${g.violation.message}`);
    const s = scoreMillionths(g.profit, task.optimum);
    all.push(s);
    const hours = task.data.battery.hours;
    byDuration.set(hours, [...(byDuration.get(hours) ?? []), s]);
    if (g.profit < 0) losing++;
    const zero = simulate(task.b, task.pricesCents, new Array<number>(24).fill(0));
    idle.push(zero.violation ? 0 : scoreMillionths(zero.profit, task.optimum));
    const o = simulate(task.b, task.pricesCents, task.data.optimal_schedule);
    opt.push(o.violation ? 0 : scoreMillionths(o.profit, task.optimum));
  }
  const greedyByDuration: Baseline['greedyByDuration'] = {};
  for (const h of [...byDuration.keys()].sort((a, b) => a - b)) {
    const xs = byDuration.get(h) as number[];
    greedyByDuration[`${h}h`] = { days: xs.length, mean: meanMillionths(xs) };
  }
  return {
    days: rows.length,
    greedy: meanMillionths(all),
    greedyByDuration,
    idle: meanMillionths(idle),
    optimum: meanMillionths(opt),
    greedyLosingShare: losing / rows.length,
  };
}

export function priceStats(rows: readonly Row[]): PriceStats {
  const cents: number[] = [];
  let spikeDays = 0;
  for (const row of rows) {
    const task = parseTaskData(row.data);
    cents.push(...task.pricesCents);
    if (Math.max(...task.pricesCents) >= SPIKE_USD * 100) spikeDays++;
  }
  const sorted = [...cents].sort((a, b) => a - b);
  const n = sorted.length;
  // nearest-rank percentiles; the median of an even count is the mean of the middle two
  const rank = (q: number) => sorted[Math.min(n - 1, Math.ceil(q * n) - 1)] as number;
  const median = n % 2 ? (sorted[(n - 1) / 2] as number) : ((sorted[n / 2 - 1] as number) + (sorted[n / 2] as number)) / 2;
  return {
    days: rows.length,
    hours: n,
    mean: cents.reduce((a, b) => a + b, 0) / n / 100,
    median: median / 100,
    p99: rank(0.99) / 100,
    max: (sorted[n - 1] as number) / 100,
    min: (sorted[0] as number) / 100,
    negativeShare: cents.filter((c) => c < 0).length / n,
    spikeDayShare: spikeDays / rows.length,
  };
}

const f4 = (x: number) => x.toFixed(4);
const pct = (x: number) => `${(100 * x).toFixed(2)} %`;
const usd = (x: number) => `$${x.toFixed(2)}`;

/** The report baseline.ts prints and the README quotes, line for line. */
export function formatReport(evalRows: readonly Row[], trainRows: readonly Row[]): string {
  const b = baseline(evalRows);
  const t = baseline(trainRows);
  const p = priceStats([...trainRows, ...evalRows]);
  const lines = [
    `eval split: ${b.days} days`,
    `greedy mean score:        ${f4(b.greedy)}`,
    ...Object.entries(b.greedyByDuration).map(([k, v]) => `  ${k.padEnd(3)} batteries (${String(v.days).padStart(3)} days): ${f4(v.mean)}`),
    `idle (all zeros) mean:    ${f4(b.idle)}`,
    `optimum mean:             ${f4(b.optimum)}`,
    `greedy days losing money: ${pct(b.greedyLosingShare)}`,
    `(for comparison, greedy mean on the ${t.days} train days: ${f4(t.greedy)})`,
    '',
    `prices of the ${p.days} generated train + eval days (${p.hours} hours), $/MWh:`,
    `mean ${usd(p.mean)}, median ${usd(p.median)}, p99 ${usd(p.p99)}, max ${usd(p.max)}, min ${usd(p.min)}`,
    `negative hours: ${pct(p.negativeShare)}; days with a spike (an hour ≥ $${SPIKE_USD}): ${pct(p.spikeDayShare)}`,
  ];
  return lines.join('\n');
}
