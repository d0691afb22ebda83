/**
 * Batteries: the public task-table fields, the integer form the money arithmetic uses, the 78
 * fixed archetypes, and validation of a battery handed in as task data.
 */
import { Rng } from './prng.js';

/** A battery as the task table (and the task row's `data.battery`) shows it. */
export interface Battery {
  /** archetype id, `<hours>h-<letter>` */
  id: string;
  /** duration at full discharge power */
  hours: number;
  /** most units charged in one hour */
  k_ch: number;
  /** most units discharged (sold) in one hour */
  k_dis: number;
  /** energy of one unit */
  unit_mwh: number;
  p_ch_mw: number;
  p_dis_mw: number;
  /** capacity in units (`hours·k_dis`) */
  soc_levels: number;
  energy_mwh: number;
  /** round-trip efficiency, applied on the selling leg */
  eta: number;
  /** wear cost, $ per MWh sold */
  c_deg: number;
  /** most units sold over the day */
  cycle_cap_units: number;
  /** units stored at the start of hour 1 */
  s0: number;
  /** least units stored after hour 24 */
  s_end_min: number;
}

export const DURATIONS = [1, 2, 4] as const;
export const K_VALUES = [2, 3, 4] as const;
export const UNIT_MWH_VALUES = [2.5, 5, 10, 15, 20, 25, 30, 50, 75] as const;
export const ETA_VALUES = [0.8, 0.82, 0.85, 0.88, 0.9] as const;
export const C_DEG_VALUES = [0, 2, 4, 6, 8] as const;
export const LETTERS = 'abcdefghijklmnopqrstuvwxyz';

/** Largest price magnitude the integer arithmetic is proven safe for: the $9,000 offer cap. */
export const MAX_ABS_PRICE_CENTS = 900_000;

/** The battery in the integers the money arithmetic uses. */
export interface BatteryInt {
  kCh: number;
  kDis: number;
  socLevels: number;
  /** round-trip efficiency in integer percent */
  etaPct: number;
  /** wear cost in whole $ per MWh */
  cDeg: number;
  /** one unit in kWh */
  unitKwh: number;
  cycleCap: number;
  s0: number;
  sEndMin: number;
}

export function toInt(b: Battery): BatteryInt {
  return {
    kCh: b.k_ch,
    kDis: b.k_dis,
    socLevels: b.soc_levels,
    etaPct: Math.round(b.eta * 100),
    cDeg: b.c_deg,
    unitKwh: Math.round(b.unit_mwh * 1000),
    cycleCap: b.cycle_cap_units,
    s0: b.s0,
    sEndMin: b.s_end_min,
  };
}

/** Builds a complete battery from its free parameters (the derived fields follow the bundle README's battery table). */
export function makeBattery(p: {
  id: string;
  hours: number;
  k_ch: number;
  k_dis: number;
  unit_mwh: number;
  eta: number;
  c_deg: number;
  cycle_cap_units: number;
  s0: number;
  s_end_min: number;
}): Battery {
  const soc_levels = p.hours * p.k_dis;
  return {
    id: p.id,
    hours: p.hours,
    k_ch: p.k_ch,
    k_dis: p.k_dis,
    unit_mwh: p.unit_mwh,
    p_ch_mw: p.k_ch * p.unit_mwh,
    p_dis_mw: p.k_dis * p.unit_mwh,
    soc_levels,
    energy_mwh: soc_levels * p.unit_mwh,
    eta: p.eta,
    c_deg: p.c_deg,
    cycle_cap_units: p.cycle_cap_units,
    s0: p.s0,
    s_end_min: p.s_end_min,
  };
}

/** Seed of the archetype table. Changing it changes every archetype: never do, it is frozen. */
const ARCHETYPE_SEED = 'gridsim-v1/archetypes';

function buildArchetypes(): Battery[] {
  const rng = new Rng(ARCHETYPE_SEED);
  const out: Battery[] = [];
  for (const hours of DURATIONS) {
    for (const letter of LETTERS) {
      const k_ch = rng.pick(K_VALUES);
      const k_dis = rng.pick(K_VALUES);
      const unit_mwh = rng.pick(UNIT_MWH_VALUES);
      const eta = rng.pick(ETA_VALUES);
      const c_deg = rng.pick(C_DEG_VALUES);
      const soc_levels = hours * k_dis;
      const cycle_cap_units = rng.pick([1, 2] as const) * soc_levels;
      // Most batteries start empty; some start part-charged and a few must keep some of that.
      const s0 = rng.chance(0.6) ? 0 : rng.int(1, Math.max(1, Math.floor(soc_levels / 2)));
      const s_end_min = rng.chance(0.5) ? 0 : rng.int(0, s0);
      const id = `${hours}h-${letter}`;
      out.push(
        id === '2h-a'
          ? // fixed by the bundle's design (README): 90/90 MW, unit 30 MWh, k 3/3, 180 MWh, eta 0.85, c_deg 4, cap 12, s0 = s_end_min = 0
            makeBattery({ id, hours: 2, k_ch: 3, k_dis: 3, unit_mwh: 30, eta: 0.85, c_deg: 4, cycle_cap_units: 12, s0: 0, s_end_min: 0 })
          : makeBattery({ id, hours, k_ch, k_dis, unit_mwh, eta, c_deg, cycle_cap_units, s0, s_end_min }),
      );
    }
  }
  return out;
}

/** The 78 archetypes, {1h, 2h, 4h} × a–z, in that order. */
export const ARCHETYPES: readonly Battery[] = Object.freeze(buildArchetypes());

export function archetype(id: string): Battery {
  const b = ARCHETYPES.find((x) => x.id === id);
  if (!b) throw new RangeError(`unknown battery archetype ${id}`);
  return b;
}

/** Bad task data: a message naming the field. */
export class DataError extends Error {
  override readonly name = 'DataError';
}

function intIn(obj: Record<string, unknown>, key: string, lo: number, hi: number): number {
  const v = obj[key];
  if (typeof v !== 'number' || !Number.isInteger(v) || v < lo || v > hi) {
    throw new DataError(`battery.${key}: expected an integer in [${lo}, ${hi}], got ${JSON.stringify(v)}`);
  }
  return v;
}

function numberIn(obj: Record<string, unknown>, key: string, allowed: readonly number[]): number {
  const v = obj[key];
  if (typeof v !== 'number' || !allowed.includes(v)) {
    throw new DataError(`battery.${key}: expected one of ${allowed.join(', ')}, got ${JSON.stringify(v)}`);
  }
  return v;
}

/**
 * Validates a battery handed in as data. Besides each field's range it checks the derived fields,
 * and the bounds under which the integer money arithmetic is proven exact (see physics.ts).
 */
export function parseBattery(x: unknown): Battery {
  if (typeof x !== 'object' || x === null || Array.isArray(x)) throw new DataError('battery: expected an object');
  const o = x as Record<string, unknown>;
  const id = o.id;
  if (typeof id !== 'string' || id.length === 0 || id.length > 64) throw new DataError('battery.id: expected a short string');
  const hours = intIn(o, 'hours', 1, 4);
  const k_ch = intIn(o, 'k_ch', 1, 4);
  const k_dis = intIn(o, 'k_dis', 1, 4);
  const unit_mwh = numberIn(o, 'unit_mwh', UNIT_MWH_VALUES);
  const eta = numberIn(o, 'eta', ETA_VALUES);
  const c_deg = numberIn(o, 'c_deg', C_DEG_VALUES);
  const soc_levels = intIn(o, 'soc_levels', 1, 16);
  const cycle_cap_units = intIn(o, 'cycle_cap_units', 0, 2 * soc_levels);
  const s0 = intIn(o, 's0', 0, soc_levels);
  const s_end_min = intIn(o, 's_end_min', 0, s0);
  const b = makeBattery({ id, hours, k_ch, k_dis, unit_mwh, eta, c_deg, cycle_cap_units, s0, s_end_min });
  for (const key of ['p_ch_mw', 'p_dis_mw', 'soc_levels', 'energy_mwh'] as const) {
    if (o[key] !== b[key]) throw new DataError(`battery.${key}: expected ${b[key]} (derived from the other fields), got ${JSON.stringify(o[key])}`);
  }
  return b;
}
