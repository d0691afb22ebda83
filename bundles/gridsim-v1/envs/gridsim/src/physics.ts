/**
 * Physics and exact money. Prices are integer cents, eta integer percent, c_deg whole dollars and
 * a unit integer kWh, so every cash flow is an integer number of 1e-7 dollars ("money units"):
 *
 *   charging a units at p cents:  -p · a · u_kWh · 100                 (cents→$ 1e2, kWh→MWh 1e3)
 *   selling n units at p cents:   (eta% · p − c_deg · 10^4) · n · u_kWh (the same 1e7 scale)
 *
 * Why Number is exact here: |p| ≤ 900,000 cents (the $9,000 cap), eta% ≤ 100, c_deg ≤ 8,
 * n ≤ 4, u ≤ 75,000 kWh, so one hour's flow is at most (9·10^7 + 8·10^4)·4·75,000 < 2.73·10^13
 * in magnitude, and a 24-hour sum (any path of the DP too) below 6.6·10^14 < 2^53 ≈ 9.0·10^15.
 * Integers below 2^53 add exactly in a double. `assertSafe` guards the premise at run time.
 */
import { MAX_ABS_PRICE_CENTS, type BatteryInt } from './battery.js';

/** money units per dollar */
export const MONEY_PER_DOLLAR = 10_000_000;

/** Cash flow of one hour, in money units: positive earns, negative pays. */
export function hourCash(b: BatteryInt, priceCents: number, action: number): number {
  if (action > 0) return -priceCents * action * b.unitKwh * 100;
  if (action < 0) return (b.etaPct * priceCents - b.cDeg * 10_000) * -action * b.unitKwh;
  return 0;
}

/** Checks the premises of the exactness argument above; throws on a violation. */
export function assertSafe(b: BatteryInt, pricesCents: readonly number[]): void {
  if (b.unitKwh > 75_000 || b.etaPct > 100 || b.cDeg > 8 || b.kCh > 4 || b.kDis > 4) {
    throw new RangeError('battery outside the bounds under which money is exact');
  }
  if (pricesCents.length > 24) throw new RangeError('more than 24 hours');
  for (const p of pricesCents) {
    if (!Number.isInteger(p) || Math.abs(p) > MAX_ABS_PRICE_CENTS) throw new RangeError(`price ${p} cents is not an integer within ±$9,000`);
  }
}

/** $/MWh with at most two decimals → integer cents; throws when it has more decimals. */
export function toCents(usdPerMwh: number): number {
  const c = Math.round(usdPerMwh * 100);
  if (!Number.isFinite(usdPerMwh) || Math.abs(usdPerMwh * 100 - c) > 1e-6) {
    throw new RangeError(`price ${usdPerMwh} is not a whole number of cents`);
  }
  return c === 0 ? 0 : c;
}

/** integer cents → $/MWh number (exactly the two-decimal value when printed) */
export function fromCents(cents: number): number {
  return cents / 100;
}

/** money units → dollars as a number (for JSON; the shortest printout is the exact decimal) */
export function moneyToUsd(m: number): number {
  return m / MONEY_PER_DOLLAR;
}

/** dollars (a number with at most 7 decimals) → money units */
export function usdToMoney(usd: number): number {
  return Math.round(usd * MONEY_PER_DOLLAR);
}

/** Exact decimal dollars, at least two decimals: -1234.5 → "-$1,234.50", 0.02125 → "$0.02125". */
export function formatUsd(m: number): string {
  const neg = m < 0;
  const abs = Math.abs(m);
  const whole = Math.floor(abs / MONEY_PER_DOLLAR);
  let frac = String(abs % MONEY_PER_DOLLAR).padStart(7, '0');
  while (frac.length > 2 && frac.endsWith('0')) frac = frac.slice(0, -1);
  const grouped = String(whole).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${neg ? '-' : ''}$${grouped}.${frac}`;
}

/** cents → "$12.34" style price text, without a currency sign: "12.34", "-3.50" */
export function formatPrice(cents: number): string {
  const neg = cents < 0;
  const abs = Math.abs(cents);
  return `${neg ? '-' : ''}${Math.floor(abs / 100)}.${String(abs % 100).padStart(2, '0')}`;
}

export type ViolationKind = 'power' | 'soc_below_zero' | 'soc_above_capacity' | 'cycle_cap' | 'end_below_min';

export interface Violation {
  /** 1-based hour ending of the first offending hour */
  hour: number;
  kind: ViolationKind;
  message: string;
}

export interface HourTrace {
  hour: number;
  price_cents: number;
  action: number;
  /** units stored after this hour (may be out of range in an infeasible schedule) */
  soc: number;
  /** units sold so far today, this hour included */
  sold: number;
  /** this hour's cash flow, money units */
  cash: number;
}

export interface Simulation {
  trace: HourTrace[];
  /** sum of the hourly cash flows, money units, whatever the feasibility */
  profit: number;
  unitsSold: number;
  finalSoc: number;
  /** the first rule broken, or null when feasible */
  violation: Violation | null;
}

const unitsWord = (n: number) => `${n} unit${Math.abs(n) === 1 ? '' : 's'}`;

/** Plays a schedule hour by hour: trace, exact profit and the first offending hour. */
export function simulate(b: BatteryInt, pricesCents: readonly number[], schedule: readonly number[]): Simulation {
  if (schedule.length !== pricesCents.length) throw new RangeError('schedule and prices differ in length');
  assertSafe(b, pricesCents);
  const trace: HourTrace[] = [];
  let soc = b.s0;
  let sold = 0;
  let profit = 0;
  let violation: Violation | null = null;
  for (let i = 0; i < schedule.length; i++) {
    const a = schedule[i] as number;
    const p = pricesCents[i] as number;
    const hour = i + 1;
    const before = soc;
    soc += a;
    if (a < 0) sold += -a;
    const cash = hourCash(b, p, a);
    profit += cash;
    trace.push({ hour, price_cents: p, action: a, soc, sold, cash });
    if (violation) continue;
    if (!Number.isInteger(a) || a > b.kCh || a < -b.kDis) {
      violation = { hour, kind: 'power', message: `hour ${hour}: ${a} is outside [-${b.kDis}, +${b.kCh}] units per hour` };
    } else if (soc < 0) {
      violation = {
        hour,
        kind: 'soc_below_zero',
        message: `hour ${hour}: selling ${unitsWord(-a)} with ${unitsWord(before)} stored would take the charge to ${soc}, below 0`,
      };
    } else if (soc > b.socLevels) {
      violation = {
        hour,
        kind: 'soc_above_capacity',
        message: `hour ${hour}: charging ${unitsWord(a)} with ${unitsWord(before)} stored would take the charge to ${soc}, above the capacity of ${b.socLevels}`,
      };
    } else if (sold > b.cycleCap) {
      violation = {
        hour,
        kind: 'cycle_cap',
        message: `hour ${hour}: selling ${unitsWord(-a)} brings the units sold today to ${sold}, above the cycle cap of ${b.cycleCap}`,
      };
    }
  }
  if (!violation && soc < b.sEndMin) {
    violation = {
      hour: schedule.length,
      kind: 'end_below_min',
      message: `hour ${schedule.length}: the day ends with ${unitsWord(soc)} stored, below the required minimum of ${b.sEndMin}`,
    };
  }
  return { trace, profit, unitsSold: sold, finalSoc: soc, violation };
}
