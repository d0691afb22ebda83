/**
 * The greedy baseline, exactly as the bundle README words it: pair the i-th cheapest hour (charge at
 * k_ch) with the i-th dearest hour (sell at k_dis) while eta·p_dear − c_deg > p_cheap, for at
 * most ⌈soc_levels/k⌉ pairs; then play the wished actions in time order, clipping each to what
 * charge, power and the cycle cap allow (never selling below s_end_min).
 *
 * Readings where the wording leaves a choice, pinned here:
 * - k = min(k_ch, k_dis): enough pairs that both legs can fill and empty the battery once.
 * - Ties in price rank by the earlier hour, in both orders (a stable sort).
 * - The comparison is exact: eta% · p_dear − 100 · c_deg · 100 > 100 · p_cheap, all in cents.
 * - With at most ⌈16/2⌉ = 8 pairs out of 24 hours, a cheap hour is never also a dear one.
 */
import type { BatteryInt } from './battery.js';
import { assertSafe } from './physics.js';

export function greedyWishes(b: BatteryInt, pricesCents: readonly number[]): number[] {
  assertSafe(b, pricesCents);
  const T = pricesCents.length;
  const hours = Array.from({ length: T }, (_, i) => i);
  const price = (h: number) => pricesCents[h] as number;
  const cheap = [...hours].sort((x, y) => price(x) - price(y) || x - y);
  const dear = [...hours].sort((x, y) => price(y) - price(x) || x - y);
  const maxPairs = Math.min(Math.ceil(b.socLevels / Math.min(b.kCh, b.kDis)), Math.floor(T / 2));
  const wish = new Array<number>(T).fill(0);
  for (let i = 0; i < maxPairs; i++) {
    const hc = cheap[i] as number;
    const hd = dear[i] as number;
    // eta·p_dear − c_deg > p_cheap, scaled by 100 (percent) to stay in integers of cents
    if (!(b.etaPct * price(hd) - b.cDeg * 10_000 > 100 * price(hc))) break;
    wish[hc] = b.kCh;
    wish[hd] = -b.kDis;
  }
  return wish;
}

/** The greedy schedule: wishes played in time order, clipped to stay feasible. */
export function greedySchedule(b: BatteryInt, pricesCents: readonly number[]): number[] {
  const wish = greedyWishes(b, pricesCents);
  const out: number[] = [];
  let soc = b.s0;
  let sold = 0;
  for (const w of wish) {
    let a = 0;
    if (w > 0) a = Math.min(w, b.kCh, b.socLevels - soc);
    else if (w < 0) a = -Math.max(0, Math.min(-w, b.kDis, soc - b.sEndMin, b.cycleCap - sold));
    if (a === 0) a = 0; // no -0
    soc += a;
    if (a < 0) sold -= a;
    out.push(a);
  }
  return out;
}
