/**
 * The exact optimum: a dynamic program over (hour, SoC, units sold so far), at most
 * 24 × 17 × 33 states × 9 actions. Values are integer money units (exact, see physics.ts).
 */
import type { BatteryInt } from './battery.js';
import { assertSafe, hourCash } from './physics.js';

export interface Optimum {
  /** the best profit, money units */
  profit: number;
  /** one schedule reaching it */
  schedule: number[];
}

/**
 * Actions in the order ties are broken: idle first, then smaller moves, charging before selling.
 * So among optimal schedules the one stored is the calmest, and always the same one.
 */
function actionOrder(b: BatteryInt): number[] {
  const order = [0];
  for (let m = 1; m <= Math.max(b.kCh, b.kDis); m++) {
    if (m <= b.kCh) order.push(m);
    if (m <= b.kDis) order.push(-m);
  }
  return order;
}

/** Works for any number of hours (tests compare it with brute force on short days). */
export function optimize(b: BatteryInt, pricesCents: readonly number[]): Optimum {
  assertSafe(b, pricesCents);
  const T = pricesCents.length;
  const S = b.socLevels + 1;
  const K = b.cycleCap + 1;
  const actions = actionOrder(b);
  // value[s*K + c]: best profit from hour h on, holding s units with c sold so far
  let next = new Float64Array(S * K);
  for (let s = 0; s < S; s++) for (let c = 0; c < K; c++) next[s * K + c] = s >= b.sEndMin ? 0 : -Infinity;
  const choice: Int8Array[] = new Array<Int8Array>(T);
  for (let h = T - 1; h >= 0; h--) {
    const p = pricesCents[h] as number;
    const cash = actions.map((a) => hourCash(b, p, a));
    const cur = new Float64Array(S * K).fill(-Infinity);
    const ch = new Int8Array(S * K);
    for (let s = 0; s < S; s++) {
      for (let c = 0; c < K; c++) {
        let best = -Infinity;
        let bestA = 0;
        for (let j = 0; j < actions.length; j++) {
          const a = actions[j] as number;
          const s2 = s + a;
          if (s2 < 0 || s2 > b.socLevels) continue;
          const c2 = a < 0 ? c - a : c;
          if (c2 > b.cycleCap) continue;
          const v = (cash[j] as number) + (next[s2 * K + c2] as number);
          if (v > best) {
            best = v;
            bestA = a;
          }
        }
        cur[s * K + c] = best;
        ch[s * K + c] = bestA;
      }
    }
    choice[h] = ch;
    next = cur;
  }
  const profit = next[b.s0 * K] as number;
  if (!Number.isFinite(profit)) throw new Error('no feasible schedule (cannot happen: idling is feasible when s_end_min ≤ s0)');
  const schedule: number[] = [];
  let s = b.s0;
  let c = 0;
  for (let h = 0; h < T; h++) {
    const a = (choice[h] as Int8Array)[s * K + c] as number;
    schedule.push(a);
    s += a;
    if (a < 0) c -= a;
  }
  return { profit, schedule };
}
