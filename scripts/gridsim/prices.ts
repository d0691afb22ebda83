/**
 * Synthetic, ERCOT-like day-ahead prices. Every number below is pinned and frozen: the bundle is
 * a pure function of them (see generate.ts). Shape and noise were calibrated once so that
 * GridSim's greedy rule scores 0.76 ± 0.02 on the eval split, then frozen.
 *
 * A price is built for a (date, settlement point) as
 *   level = YEAR_LEVEL · MONTH_FACTOR · WEEKDAY_FACTOR · BASIS(point) · exp(σ_day · z_day)
 *   p_h   = level · SHAPE(season)_h · (1 + AR(1) noise_h)
 *           − level · SOLAR_DEPTH(year) · season factor · cloudiness · SOLAR_SHAPE_h
 *           + level · EVENING_RAMP_h · SOLAR_DEPTH(year) · RAMP_GAIN
 *           − level · wind(day) · WIND_SENS(point) · WIND_YEAR(year) · WIND_SHAPE_h
 *           + scarcity spikes (system-wide, evening) and local congestion spikes
 * clipped to the floor (−$250) and the offer cap of the date, rounded to cents.
 * The draws that are common to all points of a date come from one stream per date, so the 15
 * points of a day move together as real hubs and load zones do.
 */
import { Rng } from '../../bundles/gridsim-v1/envs/gridsim/src/prng.js';
import { PRICE_FLOOR, priceCapOf, seasonOf } from '../../bundles/gridsim-v1/envs/gridsim/src/task.js';

/** ERCOT's 7 hubs and 8 load zones, as the bundle README lists them. */
export const POINTS = [
  'HB_BUSAVG',
  'HB_HOUSTON',
  'HB_HUBAVG',
  'HB_NORTH',
  'HB_PAN',
  'HB_SOUTH',
  'HB_WEST',
  'LZ_AEN',
  'LZ_CPS',
  'LZ_HOUSTON',
  'LZ_LCRA',
  'LZ_NORTH',
  'LZ_RAYBN',
  'LZ_SOUTH',
  'LZ_WEST',
] as const;

export const FIRST_DATE = '2014-01-02';
export const LAST_DATE = '2024-12-31';

/**
 * Around-the-clock level before spikes, $/MWh, by year. Public facts followed: averages of about
 * $25–40 in most years; about $38 in 2019 (a scarcity summer: the spikes below add the rest);
 * North hub $55.50 in 2023 (hot summer and scarcity on top of this); $27.33 in 2024; 2014 higher
 * and 2015–2016 and 2020 lower with natural-gas prices; 2022 high with natural-gas prices.
 */
const YEAR_LEVEL: Record<number, number> = {
  2014: 40,
  2015: 28,
  2016: 22,
  2017: 28,
  2018: 36,
  2019: 43,
  2020: 24,
  2021: 38,
  2022: 68,
  2023: 63,
  2024: 32,
};

/** Month factors (Jan…Dec): higher in summer, August hottest; mild spring and autumn lowest. */
const MONTH_FACTOR = [1.0, 1.02, 0.9, 0.88, 0.94, 1.04, 1.18, 1.38, 1.06, 0.9, 0.88, 0.94];

/** Sunday…Saturday: weekend load is lower. */
const WEEKDAY_FACTOR = [0.86, 1.0, 1.02, 1.02, 1.02, 1.0, 0.9];

/**
 * Hourly shapes by season, hour ending 1…24, before solar (the 2014 grid): overnight lows in all
 * seasons; winter has a morning peak (HE 7–9) and an evening peak (HE 18–20); summer a single
 * late-afternoon peak (HE 16–18) from air-conditioning load; spring and fall a gentle evening peak.
 * Each is normalised to mean 1 at run time.
 */
const SHAPE: Record<'winter' | 'spring' | 'summer' | 'fall', number[]> = {
  winter: [0.86, 0.83, 0.81, 0.81, 0.84, 0.93, 1.1, 1.24, 1.17, 1.05, 1.0, 0.97, 0.94, 0.92, 0.92, 0.95, 1.02, 1.17, 1.27, 1.22, 1.12, 1.02, 0.95, 0.89],
  spring: [0.81, 0.78, 0.76, 0.76, 0.78, 0.85, 0.95, 1.0, 1.0, 1.0, 1.02, 1.05, 1.08, 1.1, 1.12, 1.14, 1.16, 1.18, 1.2, 1.22, 1.15, 1.03, 0.93, 0.86],
  summer: [0.73, 0.69, 0.66, 0.65, 0.66, 0.69, 0.73, 0.77, 0.83, 0.91, 1.0, 1.11, 1.25, 1.4, 1.55, 1.68, 1.74, 1.67, 1.48, 1.3, 1.15, 1.0, 0.88, 0.79],
  fall: [0.81, 0.78, 0.76, 0.76, 0.79, 0.87, 0.98, 1.05, 1.02, 1.0, 1.02, 1.05, 1.08, 1.12, 1.16, 1.2, 1.24, 1.28, 1.3, 1.22, 1.1, 0.98, 0.9, 0.84],
};

/** Solar output by hour ending (Central time), peak at HE 13–14. */
const SOLAR_SHAPE = [0, 0, 0, 0, 0, 0, 0, 0.05, 0.25, 0.5, 0.75, 0.92, 1.0, 1.0, 0.92, 0.75, 0.5, 0.25, 0.05, 0, 0, 0, 0, 0];

/**
 * Depth of the midday solar dip at its peak, as a share of the day's level, by year: the midday
 * dip grows over the years with ERCOT's utility solar (well under 1 GW in 2014, about 4 GW in
 * 2020, over 20 GW by 2024).
 */
const SOLAR_DEPTH: Record<number, number> = {
  2014: 0.0,
  2015: 0.01,
  2016: 0.02,
  2017: 0.04,
  2018: 0.06,
  2019: 0.08,
  2020: 0.12,
  2021: 0.19,
  2022: 0.26,
  2023: 0.34,
  2024: 0.42,
};

/** Solar dip by season: deepest in spring (sun and mild load), shallowest in winter. */
const SOLAR_SEASON = { winter: 0.7, spring: 1.25, summer: 1.0, fall: 0.9 };

/** The evening net-load peak: as solar fades at dusk (HE 19–22) the rest of the fleet ramps up. */
const EVENING_RAMP = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.2, 0.6, 1.0, 0.8, 0.3, 0, 0];
const RAMP_GAIN = 0.7;

/** Wind blows hardest at night in West Texas and the Panhandle. */
const WIND_SHAPE = [1.0, 1.0, 1.0, 0.98, 0.94, 0.88, 0.8, 0.7, 0.62, 0.56, 0.52, 0.5, 0.5, 0.52, 0.55, 0.58, 0.62, 0.68, 0.76, 0.84, 0.9, 0.95, 0.98, 1.0];

/** Wind fleet by year relative to 2024 (about 12 GW in 2014, about 38 GW in 2024). */
const WIND_YEAR: Record<number, number> = {
  2014: 0.45,
  2015: 0.5,
  2016: 0.56,
  2017: 0.62,
  2018: 0.68,
  2019: 0.74,
  2020: 0.8,
  2021: 0.86,
  2022: 0.92,
  2023: 0.96,
  2024: 1.0,
};

/** Windy months (Mar–May most, summer least). */
const WIND_MONTH = [0.9, 1.0, 1.15, 1.2, 1.1, 0.85, 0.7, 0.65, 0.75, 0.9, 1.0, 0.95];

/**
 * Per point: price basis (Houston a small premium; West, and the Panhandle most, at a discount
 * behind export constraints) and wind sensitivity (largest in the Panhandle and the West, which is
 * where negative hours cluster).
 */
const POINT: Record<(typeof POINTS)[number], { basis: number; wind: number; solar: number }> = {
  HB_BUSAVG: { basis: 1.0, wind: 0.55, solar: 1.0 },
  HB_HOUSTON: { basis: 1.03, wind: 0.45, solar: 1.0 },
  HB_HUBAVG: { basis: 1.0, wind: 0.55, solar: 1.0 },
  HB_NORTH: { basis: 1.0, wind: 0.55, solar: 1.0 },
  HB_PAN: { basis: 0.86, wind: 2.2, solar: 1.1 },
  HB_SOUTH: { basis: 1.0, wind: 0.55, solar: 1.0 },
  HB_WEST: { basis: 0.92, wind: 1.75, solar: 1.5 },
  LZ_AEN: { basis: 1.01, wind: 0.5, solar: 1.0 },
  LZ_CPS: { basis: 1.01, wind: 0.5, solar: 1.0 },
  LZ_HOUSTON: { basis: 1.04, wind: 0.45, solar: 1.0 },
  LZ_LCRA: { basis: 1.0, wind: 0.55, solar: 1.0 },
  LZ_NORTH: { basis: 1.01, wind: 0.55, solar: 1.0 },
  LZ_RAYBN: { basis: 1.0, wind: 0.55, solar: 1.0 },
  LZ_SOUTH: { basis: 1.01, wind: 0.55, solar: 1.0 },
  LZ_WEST: { basis: 0.94, wind: 1.6, solar: 1.4 },
};

/** Depth of the wind dip at full wind, as a share of the level. */
const WIND_DEPTH = 0.8;

/**
 * Day-to-day level noise (weather, gas), hourly noise (σ, AR(1) persistence ρ, shared by the
 * points of a date) and each point's own hourly noise. Calibrated once, then frozen: σ_hour and ρ
 * were swept over 0.10–0.16 and 0.4–0.8; σ_hour 0.10 with ρ 0.75 puts the greedy rule at 0.766 on
 * eval (0.726 on train: these 200 eval days happen to be a little kinder to greedy than the
 * 2,000 train days, by about the same margin at every setting tried).
 */
export interface NoiseParams {
  sigmaDay: number;
  sigmaHour: number;
  rho: number;
  sigmaPoint: number;
}
export const NOISE: NoiseParams = Object.freeze({ sigmaDay: 0.22, sigmaHour: 0.1, rho: 0.75, sigmaPoint: 0.04 });

/**
 * Evening scarcity spikes: chance per date by season, more in the scarcity years (2018, 2019
 * and 2023), fewer in 2024 as batteries arrived; 1–3 hours in the evening (HE 16–21), from a few
 * hundred to several thousand $/MWh.
 */
const SPIKE_CHANCE = { winter: 0.012, spring: 0.006, summer: 0.04, fall: 0.01 };
const SPIKE_YEAR: Record<number, number> = { 2018: 1.6, 2019: 2.0, 2023: 2.0, 2024: 0.6 };
/** local congestion: one point, one hour, $100–700 */
const CONGESTION_CHANCE = 0.008;

export function* datesBetween(first: string, last: string): Generator<string> {
  const [y0, m0, d0] = first.split('-').map(Number) as [number, number, number];
  const end = last;
  for (let t = Date.UTC(y0, m0 - 1, d0); ; t += 86_400_000) {
    const s = new Date(t).toISOString().slice(0, 10);
    if (s > end) return;
    yield s;
  }
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const NORMALISED_SHAPE = Object.fromEntries(Object.entries(SHAPE).map(([k, v]) => [k, v.map((x) => x / mean(v))])) as Record<keyof typeof SHAPE, number[]>;

/** The 24 prices of one date at one point, integer cents, hour ending 1…24. */
export function dayPricesCents(date: string, point: (typeof POINTS)[number], noise: NoiseParams = NOISE): number[] {
  const year = Number(date.slice(0, 4));
  const month = Number(date.slice(5, 7));
  const [y, m, d] = date.split('-').map(Number) as [number, number, number];
  const weekday = new Date(Date.UTC(y, m - 1, d)).getUTCDay();
  const season = seasonOf(date);
  const cap = priceCapOf(date);
  const pt = POINT[point];
  const yearLevel = YEAR_LEVEL[year];
  if (yearLevel === undefined) throw new RangeError(`no price level for ${year}`);

  // draws shared by every point of the date
  const sys = new Rng(`gridsim-v1/prices/${date}`);
  const zDay = sys.normal();
  const cloud = 0.5 + 0.6 * sys.float();
  const wind = sys.float() ** 1.2;
  const sysNoise: number[] = [];
  let e = 0;
  for (let h = 0; h < 24; h++) {
    e = noise.rho * e + noise.sigmaHour * sys.normal();
    sysNoise.push(e);
  }
  const spike: number[] = new Array<number>(24).fill(0);
  if (sys.chance(SPIKE_CHANCE[season] * (SPIKE_YEAR[year] ?? 1))) {
    const start = sys.int(15, 20); // index of HE 16…21
    const len = sys.int(1, 3);
    // log-uniform between $250 and $4,000, with one spike in ten reaching for the cap
    const peak = sys.chance(0.1) ? cap * (0.6 + 0.4 * sys.float()) : 250 * Math.exp(sys.float() * Math.log(16));
    for (let i = 0; i < len && start + i < 24; i++) spike[start + i] = peak * (i === 0 ? 1 : 0.35 + 0.5 * sys.float());
  }

  // draws of this point alone
  const loc = new Rng(`gridsim-v1/prices/${date}/${point}`);
  const windHere = Math.min(1, Math.max(0, wind + 0.15 * loc.normal()));
  const level = yearLevel * (MONTH_FACTOR[month - 1] as number) * (WEEKDAY_FACTOR[weekday] as number) * pt.basis * Math.exp(noise.sigmaDay * zDay);
  const shape = NORMALISED_SHAPE[season];
  const solar = (SOLAR_DEPTH[year] as number) * SOLAR_SEASON[season] * cloud * pt.solar;
  const windDip = windHere * WIND_DEPTH * pt.wind * (WIND_YEAR[year] as number) * (WIND_MONTH[month - 1] as number);
  const congestionHour = loc.chance(CONGESTION_CHANCE) ? loc.int(13, 20) : -1;
  const congestion = 100 + 600 * loc.float();
  const spikeScale = 0.8 + 0.4 * loc.float();
  const out: number[] = [];
  for (let h = 0; h < 24; h++) {
    const local = noise.sigmaPoint * loc.normal();
    let p = level * (shape[h] as number) * (1 + (sysNoise[h] as number) + local);
    p -= level * solar * (SOLAR_SHAPE[h] as number);
    p += level * (EVENING_RAMP[h] as number) * (SOLAR_DEPTH[year] as number) * RAMP_GAIN;
    p -= level * windDip * (WIND_SHAPE[h] as number);
    p += (spike[h] as number) * spikeScale;
    if (h === congestionHour) p += congestion;
    p = Math.min(cap, Math.max(PRICE_FLOOR, p));
    const cents = Math.round(p * 100);
    out.push(cents === 0 ? 0 : cents);
  }
  return out;
}
