/**
 * A task's `data` (what the env gets at reset, never shown to the model), its validation, and
 * the texts the model sees: the system prompt and the situation.
 */
import { DataError, parseBattery, toInt, type Battery, type BatteryInt } from './battery.js';
import { formatPrice, formatUsd, simulate, toCents, usdToMoney } from './physics.js';
import { HOURS_PER_DAY } from './schedule.js';

/** `data` of a task row, as stored in the JSONL. */
export interface TaskData {
  /** delivery date, YYYY-MM-DD */
  date: string;
  /** settlement point, e.g. HB_NORTH */
  point: string;
  battery: Battery;
  /** 24 day-ahead prices, $/MWh, hour ending 1…24, two decimals at most */
  prices: number[];
  /** the day's optimal profit, $ (exact: at most 7 decimals) */
  optimum_profit: number;
  /** one schedule reaching the optimum */
  optimal_schedule: number[];
}

/** A validated task in the integers the arithmetic uses. */
export interface Task {
  data: TaskData;
  b: BatteryInt;
  pricesCents: number[];
  /** optimal profit, money units */
  optimum: number;
}

/** ERCOT's price floor, $/MWh. */
export const PRICE_FLOOR = -250;

/** ERCOT's offer cap of a date, $/MWh: $9,000 until 2021, $5,000 from 2022 on. */
export function priceCapOf(date: string): number {
  return Number(date.slice(0, 4)) >= 2022 ? 5000 : 9000;
}

export function seasonOf(date: string): 'winter' | 'spring' | 'summer' | 'fall' {
  const m = Number(date.slice(5, 7));
  if (m === 12 || m <= 2) return 'winter';
  if (m <= 5) return 'spring';
  if (m <= 8) return 'summer';
  return 'fall';
}

const WEEKDAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

export function weekdayOf(date: string): string {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number];
  return WEEKDAYS[new Date(Date.UTC(y, m - 1, d)).getUTCDay()] as string;
}

function isRealDate(date: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(date)) return false;
  const [y, m, d] = date.split('-').map(Number) as [number, number, number];
  const t = new Date(Date.UTC(y, m - 1, d));
  return t.getUTCFullYear() === y && t.getUTCMonth() === m - 1 && t.getUTCDate() === d;
}

function intArray24(x: unknown, field: string): number[] {
  if (!Array.isArray(x) || x.length !== HOURS_PER_DAY || !x.every((v) => typeof v === 'number' && Number.isInteger(v))) {
    throw new DataError(`${field}: expected an array of ${HOURS_PER_DAY} integers`);
  }
  return x as number[];
}

/**
 * Validates task data and checks it against itself: the stored optimal schedule must be feasible
 * and earn exactly the stored optimum, which must be positive (the score divides by it).
 */
export function parseTaskData(x: unknown): Task {
  if (typeof x !== 'object' || x === null || Array.isArray(x)) throw new DataError('data: expected an object');
  const o = x as Record<string, unknown>;
  if (typeof o.date !== 'string' || !isRealDate(o.date)) throw new DataError('data.date: expected a date YYYY-MM-DD');
  if (typeof o.point !== 'string' || !/^[A-Z0-9_]{1,32}$/.test(o.point)) throw new DataError('data.point: expected a settlement point name like HB_NORTH');
  const battery = parseBattery(o.battery);
  const b = toInt(battery);
  if (!Array.isArray(o.prices) || o.prices.length !== HOURS_PER_DAY) throw new DataError(`data.prices: expected ${HOURS_PER_DAY} prices`);
  const cap = priceCapOf(o.date);
  const pricesCents = o.prices.map((p: unknown, i: number) => {
    if (typeof p !== 'number' || p < PRICE_FLOOR || p > cap) {
      throw new DataError(`data.prices[${i}]: expected a number in [${PRICE_FLOOR}, ${cap}] (floor and cap of ${String(o.date)}), got ${JSON.stringify(p)}`);
    }
    try {
      return toCents(p);
    } catch {
      throw new DataError(`data.prices[${i}]: ${p} has more than two decimals`);
    }
  });
  const schedule = intArray24(o.optimal_schedule, 'data.optimal_schedule');
  if (typeof o.optimum_profit !== 'number' || !Number.isFinite(o.optimum_profit) || o.optimum_profit <= 0) {
    throw new DataError('data.optimum_profit: expected a positive number of dollars');
  }
  const sim = simulate(b, pricesCents, schedule);
  if (sim.violation) throw new DataError(`data.optimal_schedule is infeasible: ${sim.violation.message}`);
  if (sim.profit !== usdToMoney(o.optimum_profit)) {
    throw new DataError(`data.optimum_profit: ${o.optimum_profit} differs from the profit of data.optimal_schedule (${formatUsd(sim.profit)})`);
  }
  const data: TaskData = {
    date: o.date,
    point: o.point,
    battery,
    prices: o.prices as number[],
    optimum_profit: o.optimum_profit,
    optimal_schedule: schedule,
  };
  return { data, b, pricesCents, optimum: sim.profit };
}

export const SYSTEM_PROMPT = [
  'You operate one grid-scale battery for one day in an ERCOT-like day-ahead electricity market (the prices are synthetic).',
  'For each of the 24 delivery hours you decide how many energy units the battery charges (buys) or sells, to make the most money over the day.',
  '',
  'Tools:',
  '- get_situation(): the date, settlement point, battery, the 24 prices and the rules, again.',
  '- check_schedule(schedule): simulates a schedule without committing to it: the hour-by-hour state of charge, cash flow, total profit and the first rule it breaks. At most 3 uses.',
  '- submit_schedule(schedule): submits your final schedule. It is graded once and the episode ends; you cannot submit again.',
  '',
  'A schedule is a JSON array of exactly 24 integers, one per hour ending 1 to 24: a positive number charges (buys) that many units, a negative number sells that many units, 0 idles. Call a tool with {"schedule": [ ... ]}.',
  '',
  'Grading compares your profit with the best profit possible that day: the best schedule scores 1, idling all day scores 0.2, less than idle scores less, and a schedule that breaks a rule, or no submission, scores 0.',
  '',
  'Think it through, check a schedule if you want to, then answer by calling submit_schedule. End each turn with a tool call: submit_schedule when your schedule is final, or end_turn if you are not done.',
].join('\n');

function units(n: number): string {
  return `${n} unit${n === 1 ? '' : 's'}`;
}

function num(x: number): string {
  return String(x);
}

/** The full situation: date, point, battery table, the 24 prices, the rules and the sign convention. */
export function situationText(task: Task): string {
  const { data, b, pricesCents } = task;
  const bt = data.battery;
  const lines: string[] = [];
  lines.push(`Date: ${data.date} (${weekdayOf(data.date)}, ${seasonOf(data.date)})`);
  lines.push(`Settlement point: ${data.point} (ERCOT-like day-ahead market; synthetic prices)`);
  lines.push('');
  lines.push(`Battery ${bt.id}:`);
  lines.push('| field | value |');
  lines.push('|---|---|');
  lines.push(`| charge power | ${num(bt.p_ch_mw)} MW: at most k_ch = ${units(bt.k_ch)} charged per hour |`);
  lines.push(`| discharge power | ${num(bt.p_dis_mw)} MW: at most k_dis = ${units(bt.k_dis)} sold per hour |`);
  lines.push(`| unit | ${num(bt.unit_mwh)} MWh of energy |`);
  lines.push(`| capacity | ${units(bt.soc_levels)} = ${num(bt.energy_mwh)} MWh (${bt.hours} h at full discharge power) |`);
  lines.push(`| round-trip efficiency | eta = ${num(bt.eta)}, applied when selling |`);
  lines.push(`| wear cost | c_deg = $${bt.c_deg} per MWh sold |`);
  lines.push(`| cycle cap | at most ${units(bt.cycle_cap_units)} sold over the day |`);
  lines.push(`| charge at the start | ${units(bt.s0)} |`);
  lines.push(`| least charge at the end | ${units(bt.s_end_min)} |`);
  lines.push('');
  lines.push('Day-ahead prices, $/MWh, by hour ending (HE01 is 00:00-01:00):');
  for (let i = 0; i < pricesCents.length; i++) {
    lines.push(`HE${String(i + 1).padStart(2, '0')}: ${formatPrice(pricesCents[i] as number)}`);
  }
  lines.push('');
  lines.push('Rules:');
  lines.push(`- Answer with exactly 24 integers a_1 ... a_24 (hour ending 1 to 24), each between -${b.kDis} and +${b.kCh}.`);
  lines.push(`- Sign convention: a_h > 0 charges (buys) a_h units in hour h; a_h < 0 sells |a_h| units; 0 idles.`);
  lines.push(
    `- Charge: it starts at ${units(b.s0)}; after hour h it is the charge before plus a_h. It must stay between 0 and ${b.socLevels} units after every hour, and be at least ${units(b.sEndMin)} after hour 24.`,
  );
  lines.push(`- At most ${units(b.cycleCap)} sold over the day (the sum of |a_h| over the selling hours).`);
  lines.push(
    `- Cash flow of hour h at price p_h: charging a_h units costs p_h × a_h × ${num(bt.unit_mwh)} MWh; selling n units earns (${num(bt.eta)} × p_h − ${bt.c_deg}) × n × ${num(bt.unit_mwh)} MWh. At a negative price, charging earns money and selling costs money.`,
  );
  lines.push('- Profit is the sum of the 24 cash flows. Energy left at the end of the day is worth nothing.');
  return lines.join('\n');
}

/** The first user message: the situation and what to do with it. */
export function firstPrompt(task: Task): string {
  return [
    situationText(task),
    '',
    'Find the schedule with the highest profit. You may test schedules with check_schedule (at most 3 times), then call submit_schedule with {"schedule": [a_1, ..., a_24]}.',
  ].join('\n');
}
