/** The GridSim core: PRNG, archetypes, exact money, the DP against brute force, greedy, score. */
import { describe, expect, it } from 'vitest';
import {
  ARCHETYPES,
  archetype,
  C_DEG_VALUES,
  ETA_VALUES,
  K_VALUES,
  toInt,
  UNIT_MWH_VALUES,
  type BatteryInt,
} from '../../bundles/gridsim-v1/envs/gridsim/src/battery.js';
import { greedySchedule, greedyWishes } from '../../bundles/gridsim-v1/envs/gridsim/src/greedy.js';
import { optimize } from '../../bundles/gridsim-v1/envs/gridsim/src/optimum.js';
import { formatUsd, hourCash, MONEY_PER_DOLLAR, simulate } from '../../bundles/gridsim-v1/envs/gridsim/src/physics.js';
import { Rng } from '../../bundles/gridsim-v1/envs/gridsim/src/prng.js';
import { score, scoreMillionths } from '../../bundles/gridsim-v1/envs/gridsim/src/score.js';
import { dayPricesCents, POINTS } from '../../scripts/gridsim/prices.js';

const usd = (dollars: number) => dollars * MONEY_PER_DOLLAR;

describe('Rng', () => {
  it('is pinned: the same seed gives the same stream on every machine', () => {
    const r = new Rng('pinned');
    expect([r.nextU32(), r.nextU32(), r.nextU32()]).toEqual([4008947111, 2703072921, 2502544645]);
  });
  it('gives independent streams for different seeds, and sane ranges', () => {
    expect(new Rng('a').nextU32()).not.toBe(new Rng('b').nextU32());
    const r = new Rng('ranges');
    const ints = Array.from({ length: 2000 }, () => r.int(-2, 3));
    expect(Math.min(...ints)).toBe(-2);
    expect(Math.max(...ints)).toBe(3);
    const floats = Array.from({ length: 2000 }, () => r.float());
    expect(floats.every((x) => x >= 0 && x < 1)).toBe(true);
    const normals = Array.from({ length: 4000 }, () => r.normal());
    const mean = normals.reduce((a, b) => a + b, 0) / normals.length;
    const sd = Math.sqrt(normals.reduce((a, b) => a + (b - mean) ** 2, 0) / normals.length);
    expect(Math.abs(mean)).toBeLessThan(0.06);
    expect(Math.abs(sd - 1)).toBeLessThan(0.06);
  });
});

describe('battery archetypes', () => {
  it('has 78: {1h, 2h, 4h} × a–z, unique ids', () => {
    expect(ARCHETYPES).toHaveLength(78);
    const ids = ARCHETYPES.map((b) => b.id);
    expect(new Set(ids).size).toBe(78);
    for (const h of [1, 2, 4]) for (const l of 'abcdefghijklmnopqrstuvwxyz') expect(ids).toContain(`${h}h-${l}`);
  });
  it('2h-a is exactly the battery the bundle README describes', () => {
    expect(archetype('2h-a')).toEqual({
      id: '2h-a',
      hours: 2,
      k_ch: 3,
      k_dis: 3,
      unit_mwh: 30,
      p_ch_mw: 90,
      p_dis_mw: 90,
      soc_levels: 6,
      energy_mwh: 180,
      eta: 0.85,
      c_deg: 4,
      cycle_cap_units: 12,
      s0: 0,
      s_end_min: 0,
    });
  });
  it('every archetype respects the parameter sets and the derived fields', () => {
    for (const b of ARCHETYPES) {
      expect(K_VALUES).toContain(b.k_ch);
      expect(K_VALUES).toContain(b.k_dis);
      expect(UNIT_MWH_VALUES).toContain(b.unit_mwh);
      expect(ETA_VALUES).toContain(b.eta);
      expect(C_DEG_VALUES).toContain(b.c_deg);
      expect(b.soc_levels).toBe(b.hours * b.k_dis);
      expect(b.energy_mwh).toBe(b.soc_levels * b.unit_mwh);
      expect(b.p_ch_mw).toBe(b.k_ch * b.unit_mwh);
      expect(b.p_dis_mw).toBe(b.k_dis * b.unit_mwh);
      expect([b.soc_levels, 2 * b.soc_levels]).toContain(b.cycle_cap_units);
      expect(b.s_end_min).toBeLessThanOrEqual(b.s0);
      expect(b.s0).toBeLessThanOrEqual(b.soc_levels);
      expect(b.soc_levels).toBeLessThanOrEqual(16);
    }
    // the table is varied, not one battery 78 times
    expect(new Set(ARCHETYPES.map((b) => `${b.k_ch}/${b.k_dis}/${b.unit_mwh}/${b.eta}/${b.c_deg}`)).size).toBeGreaterThan(60);
    expect(ARCHETYPES.some((b) => b.s0 > 0)).toBe(true);
    expect(ARCHETYPES.some((b) => b.s_end_min > 0)).toBe(true);
  });
});

describe('money', () => {
  const b = toInt(archetype('2h-a'));
  it('charging costs p·a·u and selling earns (eta·p − c_deg)·n·u, exactly', () => {
    expect(hourCash(b, 2000, 1)).toBe(usd(-600)); // $20 × 30 MWh
    expect(hourCash(b, 2000, -1)).toBe(usd(390)); // (0.85·20 − 4) × 30
    expect(hourCash(b, 1234, 3)).toBe(-1234 * 3 * 30_000 * 100); // $12.34 × 90 MWh = $1,110.60
    expect(formatUsd(hourCash(b, 1234, 3))).toBe('-$1,110.60');
    expect(hourCash(b, -500, 2)).toBe(usd(300)); // negative price: charging earns
    expect(hourCash(b, -500, -2)).toBe(usd(-(0.85 * 5 + 4) * 60)); // and selling pays
    expect(hourCash(b, 999_999, 0)).toBe(0);
  });
  it('formats exact decimals', () => {
    expect(formatUsd(212_500)).toBe('$0.02125');
    expect(formatUsd(0)).toBe('$0.00');
    expect(formatUsd(usd(1234567.5))).toBe('$1,234,567.50');
  });
  it('stays exact at the extremes ($9,000 cap, 75 MWh units, 4 units every hour)', () => {
    const big: BatteryInt = { kCh: 4, kDis: 4, socLevels: 16, etaPct: 100, cDeg: 8, unitKwh: 75_000, cycleCap: 32, s0: 16, sEndMin: 0 };
    const prices = new Array<number>(24).fill(900_000);
    const sched = [-4, -4, -4, -4, 4, 4, 4, 4, -4, -4, -4, -4, 4, 4, 4, 4, -4, -4, -4, -4, 0, 0, 0, 0].map((a, i) => (i >= 16 && a < 0 ? 0 : a));
    const sim = simulate(big, prices, sched);
    expect(sim.violation).toBeNull();
    expect(Number.isSafeInteger(sim.profit)).toBe(true);
    expect(BigInt(sim.profit)).toBe(
      sched.reduce((acc, a) => acc + (a > 0 ? -900_000n * BigInt(a) * 75_000n * 100n : a < 0 ? (100n * 900_000n - 80_000n) * BigInt(-a) * 75_000n : 0n), 0n),
    );
    const opt = optimize(
      big,
      prices.map((p, i) => (i % 2 ? p : -25_000)),
    );
    expect(Number.isSafeInteger(opt.profit)).toBe(true);
  });
  it('refuses prices beyond the bounds the exactness proof covers', () => {
    expect(() => simulate(b, [900_001], [0])).toThrow(/within ±\$9,000/);
    expect(() => simulate(b, [12.5], [0])).toThrow();
  });
});

describe('feasibility', () => {
  const b = toInt(archetype('2h-a')); // 6 units, k 3/3, cap 12, s0 = s_end_min = 0
  const prices = new Array<number>(24).fill(2000);
  const sched = (...xs: Array<[number, number]>) => {
    const s = new Array<number>(24).fill(0);
    for (const [h, a] of xs) s[h - 1] = a;
    return s;
  };
  it('names the first offending hour', () => {
    expect(simulate(b, prices, sched([3, -1])).violation).toMatchObject({ hour: 3, kind: 'soc_below_zero' });
    expect(simulate(b, prices, sched([1, 3], [2, 3], [5, 1], [9, -9])).violation).toMatchObject({ hour: 5, kind: 'soc_above_capacity' });
    const capped = sched([1, 3], [2, 3], [3, -3], [4, -3], [5, 3], [6, 3], [7, -3], [8, -3], [9, 3], [10, -3]);
    expect(simulate(b, prices, capped).violation).toMatchObject({ hour: 10, kind: 'cycle_cap' });
    expect(simulate(b, prices, sched([1, 2], [2, 4])).violation).toMatchObject({ hour: 2, kind: 'power' });
  });
  it('checks the charge left at the end', () => {
    const keep: BatteryInt = { ...b, s0: 3, sEndMin: 2 };
    expect(simulate(keep, prices, sched([5, -2])).violation).toMatchObject({ hour: 24, kind: 'end_below_min' });
    expect(simulate(keep, prices, sched([5, -1])).violation).toBeNull();
    expect(simulate(keep, prices, new Array<number>(24).fill(0)).violation).toBeNull();
  });
});

/** every schedule of a short day, by enumeration */
function bruteForce(b: BatteryInt, prices: number[]): number {
  const actions: number[] = [];
  for (let a = -b.kDis; a <= b.kCh; a++) actions.push(a);
  let best = -Infinity;
  const cur = new Array<number>(prices.length).fill(0);
  const rec = (h: number) => {
    if (h === prices.length) {
      const sim = simulate(b, prices, cur);
      if (!sim.violation && sim.profit > best) best = sim.profit;
      return;
    }
    for (const a of actions) {
      cur[h] = a;
      rec(h + 1);
    }
  };
  rec(0);
  return best;
}

function randomBattery(r: Rng, maxLevels: number): BatteryInt {
  const socLevels = r.int(1, maxLevels);
  const s0 = r.int(0, socLevels);
  return {
    kCh: r.int(1, 2),
    kDis: r.int(1, 2),
    socLevels,
    etaPct: Math.round(r.pick(ETA_VALUES) * 100),
    cDeg: r.pick(C_DEG_VALUES),
    unitKwh: Math.round(r.pick(UNIT_MWH_VALUES) * 1000),
    cycleCap: r.int(0, 2 * socLevels),
    s0,
    sEndMin: r.int(0, s0),
  };
}

function randomPrices(r: Rng, n: number): number[] {
  return Array.from({ length: n }, () => (r.chance(0.1) ? r.int(-25_000, 0) : r.chance(0.1) ? r.int(10_000, 500_000) : r.int(500, 6000)));
}

describe('the DP optimum', () => {
  it('agrees with brute force on small random batteries and days', () => {
    const r = new Rng('test/dp-vs-brute');
    for (let i = 0; i < 60; i++) {
      const b = randomBattery(r, 4);
      const prices = randomPrices(r, r.int(3, 6));
      const opt = optimize(b, prices);
      expect(opt.profit, `case ${i}: ${JSON.stringify({ b, prices })}`).toBe(bruteForce(b, prices));
      const sim = simulate(b, prices, opt.schedule);
      expect(sim.violation).toBeNull();
      expect(sim.profit).toBe(opt.profit);
    }
  });
  it('on full days: its schedule is feasible and earns it, and it is never below greedy nor idle', () => {
    const r = new Rng('test/dp-vs-greedy');
    for (let i = 0; i < 300; i++) {
      const battery = r.pick(ARCHETYPES);
      const date = `${r.int(2014, 2024)}-${String(r.int(1, 12)).padStart(2, '0')}-${String(r.int(1, 28)).padStart(2, '0')}`;
      const prices = dayPricesCents(date, r.pick(POINTS));
      const b = toInt(battery);
      const opt = optimize(b, prices);
      const sim = simulate(b, prices, opt.schedule);
      expect(sim.violation).toBeNull();
      expect(sim.profit).toBe(opt.profit);
      const g = simulate(b, prices, greedySchedule(b, prices));
      expect(g.violation, `${battery.id} ${date}`).toBeNull();
      expect(opt.profit).toBeGreaterThanOrEqual(g.profit);
      expect(opt.profit).toBeGreaterThanOrEqual(0);
    }
  });
});

describe('the greedy rule', () => {
  const b = toInt(archetype('2h-a')); // k 3/3, 6 units: ⌈6/3⌉ = 2 pairs
  const base = [30, 28, 12, 10, 27, 31, 35, 33, 32, 30, 29, 28, 27, 26, 29, 32, 40, 60, 55, 38, 34, 33, 31, 30].map((p) => p * 100);
  it('charges the cheapest hours and sells the dearest, at most ⌈soc_levels/k⌉ pairs', () => {
    expect(greedyWishes(b, base)).toEqual(base.map((_, i) => (i === 2 || i === 3 ? 3 : i === 17 || i === 18 ? -3 : 0)));
    const s = greedySchedule(b, base);
    expect(s).toEqual(greedyWishes(b, base));
    expect(simulate(b, base, s).profit).toBe(usd(-(12 + 10) * 90 + (0.85 * 60 - 4 + 0.85 * 55 - 4) * 90));
  });
  it('stops pairing once eta·p_dear − c_deg ≤ p_cheap', () => {
    // 2nd pair: dear $40 → 0.85·40 − 4 = 30 ≤ cheap $30: only one pair
    const flat = new Array<number>(24).fill(3500).map((p, i) => (i === 2 ? 1000 : i === 3 ? 3000 : i === 18 ? 6000 : i === 19 ? 4000 : p));
    const w = greedyWishes(b, flat);
    expect(w.filter((a) => a !== 0)).toEqual([3, -3]);
    expect(w[2]).toBe(3);
    expect(w[18]).toBe(-3);
  });
  it('plays the wishes in time order, clipped: a sale before any charge is dropped and charge is kept', () => {
    // dearest hour HE1 comes before the cheapest: the battery is empty then, so nothing is sold
    const early = [...base];
    early[0] = 9000;
    const wishes = greedyWishes(b, early);
    expect(wishes[0]).toBe(-3);
    const s = greedySchedule(b, early);
    expect(s[0]).toBe(0);
    expect(simulate(b, early, s).violation).toBeNull();
    // never sells below s_end_min, never beyond the cycle cap
    const keep: BatteryInt = { ...b, s0: 4, sEndMin: 3, cycleCap: 2 };
    const k = greedySchedule(keep, early);
    expect(k[0]).toBe(-1);
    expect(simulate(keep, early, k).violation).toBeNull();
    expect(simulate(keep, early, k).unitsSold).toBeLessThanOrEqual(2);
  });
});

describe('score', () => {
  it('is 0.2 for idle, 1 for the optimum, linear between, clamped, 6 decimals', () => {
    expect(score(0, 123_456)).toBe(0.2);
    expect(score(123_456, 123_456)).toBe(1);
    expect(score(50, 100)).toBe(0.6);
    expect(score(1, 3)).toBe(0.466667); // 0.4666…
    expect(score(2, 3)).toBe(0.733333);
    expect(score(-25, 100)).toBe(0);
    expect(score(-10, 100)).toBe(0.12);
    expect(score(-1000, 100)).toBe(0);
    expect(scoreMillionths(1, 1_600_000)).toBe(200_001); // 0.2000005 rounds half up
  });
  it('refuses a non-positive optimum', () => {
    expect(() => score(0, 0)).toThrow();
  });
});
